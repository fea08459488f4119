#!/usr/bin/env bash
# Both steps of the GPU check in dry run, in a clean Python 3.12 venv standing in for the lent
# machine: torch 2.11.0 and transformers 5.17.0 (its versions), tokenizers, safetensors, and
# the other packages of its image the check imports (`gpu_check.py image-needs`); everything
# else comes from the wheels prepare put in .gpu (installed --no-index --no-deps, as there).
# Downloads ~3 GB (torch's CUDA build); run by hand after `bash scripts/gpu-check.sh prepare`.
#
#   bash scripts/gpu-dry-run-312.sh [VENV]      # default /tmp/unsee-gpu-py312
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-/tmp/unsee-gpu-py312}
PY312=${PY312:-$(command -v python3.12 || echo "$HOME/.pyenv/versions/3.12.1/bin/python")}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY312" -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==2.11.0" "transformers==5.17.0" tokenizers safetensors \
    $(.venv/bin/python scripts/gpu_check.py image-needs)
  # the image has no pydantic: a package that pulled it in must not hide a missing wheel
  "$VENV/bin/pip" uninstall -y -q pydantic pydantic-core annotated-types typing-inspection || true
fi
rm -rf .gpu/site .gpu/models
PY="$VENV/bin/python" bash scripts/gpu-check.sh a --dry-run
PY="$VENV/bin/python" bash scripts/gpu-check.sh b --dry-run
