#!/usr/bin/env bash
# GPU check of the replay runtime: installs exllamav2 into the venv and runs the
# `gpu`-marked tests (tests/model/test_exllama_gpu.py) on an NVIDIA machine,
# then prints a short report. Budget: < 5 min (the first exllamav2 import
# JIT-compiles its CUDA extension; that needs a CUDA build of torch and nvcc).
#
#   bash scripts/gpu-check.sh            # uses .venv
#   VENV=/path/to/venv bash scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
PIP="$VENV/bin/pip"
export UNSEE_MODEL_CACHE=${UNSEE_MODEL_CACHE:-$HOME/.cache/unsee-gpu-check}
t0=$(date +%s)
say() { printf '[gpu-check] %s\n' "$*"; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  say "no NVIDIA GPU visible (nvidia-smi) - nothing to check"; exit 2
fi
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
say "GPU: $gpu"

cuda_ok=$($PY -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ "$cuda_ok" != "1" ]; then
  # The CPU wheel cannot drive the GPU: PyPI's Linux wheel of the same
  # version is the CUDA build.
  say "torch in $VENV has no CUDA; installing the CUDA build of torch==2.13.0 from PyPI"
  $PIP install -q --force-reinstall --no-deps "torch==2.13.0" && \
    $PIP install -q "torch==2.13.0" || { say "FAIL: cannot install a CUDA torch"; exit 1; }
fi
$PY -c 'import torch; print("[gpu-check] torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'

if ! $PY -c 'import importlib.util,sys; sys.exit(importlib.util.find_spec("exllamav2") is None)'; then
  say "installing exllamav2==0.3.2"
  $PIP install -q "exllamav2==0.3.2" || { say "FAIL: pip install exllamav2==0.3.2"; exit 1; }
fi
if [ -z "${CUDA_HOME:-}" ]; then
  for d in /usr/local/cuda /usr/local/cuda-12*; do [ -x "$d/bin/nvcc" ] && export CUDA_HOME=$d && break; done
fi
say "CUDA_HOME=${CUDA_HOME:-unset}; building/importing the exllamav2 extension"
t1=$(date +%s)
if ! $PY -c 'import exllamav2, exllamav2.ext; print("[gpu-check] exllamav2", exllamav2.__version__)'; then
  say "FAIL: exllamav2 does not import (needs nvcc/CUDA toolkit matching torch for its JIT build)"; exit 1
fi
say "extension ready in $(( $(date +%s) - t1 ))s"

out=$(mktemp)
$PY -m pytest tests/model/test_exllama_gpu.py -m gpu -q -rs -p no:cacheprovider 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
summary=$(grep -E "passed|failed|error|skipped" "$out" | tail -1)
say "----------------------------------------------------------------"
say "report: GPU=$gpu"
say "report: tests: ${summary:-no summary} (rc=$rc)"
say "report: wall time $(( $(date +%s) - t0 ))s"
rm -f "$out"
exit $rc
