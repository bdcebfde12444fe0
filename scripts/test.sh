#!/usr/bin/env bash
# The test command: installs what it needs, lints, checks notebooks carry no outputs,
# then runs the suite (GPU tests run where CUDA is present and are skipped elsewhere),
# the real-browser test (JupyterLab and the HTML reports in headless Chromium) and every
# notebook headless under nbmake (replaying recordings without a GPU).
# Arguments go to pytest, e.g. `bash scripts/test.sh -m "not browser"`.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { echo "test: $* ($((SECONDS - start)) s)"; }

step "installing what the tests need"
bash scripts/bootstrap.sh dev

# The browser test drives Debian's chromium (Playwright's own browser download is not
# used). Install it where it is missing and we may; otherwise say how, and the test skips
# (outside CI; in CI a missing browser fails it).
chromium="${OASR_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then
  step "chromium: $("$chromium" --version 2>/dev/null || echo "$chromium")"
elif [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  step "installing Debian's chromium for the browser test (apt-get, about a minute)"
  if DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
    step "chromium: $("$chromium" --version 2>/dev/null || echo "$chromium")"
  else
    echo "test: installing chromium failed (see apt-get's lines above): the browser test will skip, or fail in CI"
  fi
else
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
step "pytest (screenshots of the browser test go to .artifacts/browser/)"
status=0
OASR_REPORTS_DIR="$scratch/reports" python3 -m pytest -q -ra "$@" tests notebooks --nbmake --nbmake-timeout=300 \
  || status=$?
step "finished with status $status"
exit "$status"
