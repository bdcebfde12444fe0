#!/usr/bin/env bash
# The test command: installs what it needs, lints, checks notebooks carry no outputs,
# then runs the suite (GPU tests run where CUDA is present and are skipped elsewhere)
# and every notebook headless under nbmake (replaying recordings without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh dev
python3 -m ruff check .
python3 -m nbstripout --verify notebooks/*.ipynb
python3 -m pytest -q -ra "$@" tests notebooks --nbmake --nbmake-timeout=300
