#!/usr/bin/env bash
# The test command, in two tiers. Both install what they need, lint and check that the
# notebooks carry no outputs; GPU tests run where CUDA is present and are skipped elsewhere.
#   bash scripts/test.sh         the default tier: the suite less the tests marked slow
#                                (pyproject.toml's markers), in minutes on 2 cores
#   bash scripts/test.sh --full  everything, what CI runs (.ci/run): the slow tests too (the
#                                CUTLASS builds, the real-browser test of JupyterLab and the HTML
#                                reports in headless Chromium) and every notebook headless under
#                                nbmake (replaying recordings without a GPU)
# Other arguments go to pytest, e.g. `bash scripts/test.sh --full -m "not browser"` (a -m of
# yours replaces the default tier's `-m "not slow"`).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { echo "test: $* ($((SECONDS - start)) s)"; }

full=0
pytest_args=()
for arg in "$@"; do
  if [ "$arg" = "--full" ]; then full=1; else pytest_args+=("$arg"); fi
done
if [ "$full" = 1 ]; then
  selection=(tests notebooks --nbmake --nbmake-timeout=300)
else
  selection=(-m "not slow" tests)
fi

step "installing what the tests need"
bash scripts/bootstrap.sh dev

# The browser test (full tier) drives Debian's chromium (Playwright's own browser download
# is not used). Install it where it is missing and we may; otherwise say how, and the test
# skips (outside CI; in CI a missing browser fails it).
chromium="${OASR_CHROMIUM:-/usr/bin/chromium}"
if [ "$full" = 1 ] && [ -x "$chromium" ]; then
  step "chromium: $("$chromium" --version 2>/dev/null || echo "$chromium")"
elif [ "$full" = 1 ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  step "installing Debian's chromium for the browser test (apt-get, about a minute)"
  if DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
    step "chromium: $("$chromium" --version 2>/dev/null || echo "$chromium")"
  else
    echo "test: installing chromium failed (see apt-get's lines above): the browser test will skip, or fail in CI"
  fi
elif [ "$full" = 1 ]; then
  echo "test: $chromium is missing and this is not root with apt-get: the browser test will skip" \
    "(install it with \`sudo apt-get install chromium\`, or set OASR_CHROMIUM to a Chromium executable)"
fi

step "ruff"
python3 -m ruff check .
step "nbstripout --verify"
python3 -m nbstripout --verify notebooks/*.ipynb
# The notebooks write summaries (and, live on a GPU, tables and profiles) under the
# reports root: a scratch copy of reports/ takes them, so testing leaves the checkout as it was.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r reports "$scratch/reports"
if [ "$full" = 1 ]; then
  step "pytest, the full tier (screenshots of the browser test go to .artifacts/browser/)"
else
  step "pytest, the default tier (bash scripts/test.sh --full adds the slow tests and the notebooks)"
fi
status=0
OASR_REPORTS_DIR="$scratch/reports" python3 -m pytest -q -ra "${selection[@]}" "${pytest_args[@]+"${pytest_args[@]}"}" \
  || status=$?
step "finished with status $status"
exit "$status"
