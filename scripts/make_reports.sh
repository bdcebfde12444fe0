#!/usr/bin/env bash
# The main command: installs what it needs, then runs every notebook headless and
# writes the HTML reports to reports/<gpu>/ and the index to reports/index.html —
# live on a machine with an NVIDIA GPU, from the committed H200 recordings otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh notebook
exec python3 -m profiling.workbench.publish "$@"
