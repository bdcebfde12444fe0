#!/usr/bin/env bash
# The test command: installs what it needs, lints, checks notebooks carry no outputs,
# then runs the suite (GPU tests run where CUDA is present and are skipped elsewhere)
# and every notebook headless under nbmake (replaying recordings without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh dev
python3 -m ruff check .
python3 -m nbstripout --verify notebooks/*.ipynb
# The notebooks write summaries (and, live on a GPU, tables and profiles) under the
# reports root: a scratch copy of reports/ takes them, so testing leaves the checkout as it was.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r reports "$scratch/reports"
OASR_REPORTS_DIR="$scratch/reports" python3 -m pytest -q -ra "$@" tests notebooks --nbmake --nbmake-timeout=300
