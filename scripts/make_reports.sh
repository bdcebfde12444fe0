#!/usr/bin/env bash
# The main command: installs what it needs, then runs every notebook headless. Live on a
# machine with an NVIDIA GPU it writes reports/<gpu>/ and reports/index.html (the committed
# reports); without one it replays the committed H200 recordings into reports/replay/
# (git-ignored), so the checkout stays clean.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh notebook
exec python3 -m profiling.workbench.publish "$@"
