#!/usr/bin/env bash
# Installs what Oasr's commands need into the current Python: torch (if absent), then
# the package itself, editable, with the extras named in $1 (default: dev).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
python3 -m pip --version >/dev/null || { echo "bootstrap: python3 with pip is required" >&2; exit 1; }
if ! python3 -c "import torch" 2>/dev/null; then
  # 2.13.0 is the release this project is tested with; on CPU-only machines the
  # local wheel cache provides its CPU build, on GPU machines PyPI's CUDA build.
  python3 -m pip install -q "torch==2.13.0"
fi
python3 -m pip install -q --disable-pip-version-check -e ".[${extras}]"
