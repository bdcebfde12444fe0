#!/usr/bin/env bash
# The conv1d family on the H200, in one command from the repo root (the device tool runs it with the
# wheels of ../shared/device/fetch-wheels.sh; nvidia-cutlass is not needed):
#   bash dev/conv1d/h200.sh [steps...]     (default: test bench report)
# test:   tests/test_conv1d.py with its GPU tests                              -> $OUT/conv1d-pytest.log
# bench:  dev/conv1d/bench.py --all (check, sweep, fused, step, ncu, sanitize) -> $OUT/bench.txt, bench.csv, ncu.txt
# report: notebooks/04_conv1d.ipynb published live (cold JIT cache); the reports/ files it wrote
#         -> $OUT/reports-conv1d.tgz, and the list of every file under reports/h200 -> $OUT/reports-list.txt
#         (a recording missing from the list was pruned: git rm it).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/oasr-conv1d-out}; mkdir -p "$OUT"
source scripts/device_env.sh "${WHEELS:-.whl}"
status=0
for s in ${*:-test bench report}; do
  echo; echo "=== $s ($(date +%T))"
  case $s in
    test) timeout 200 python3 -m pytest -q -ra -p no:cacheprovider tests/test_conv1d.py > "$OUT/conv1d-pytest.log" 2>&1 \
            || status=1
          tail -5 "$OUT/conv1d-pytest.log" ;;
    bench) timeout 300 python3 dev/conv1d/bench.py --all --variants prod,ffma --deadline-s 280 --out "$OUT" > /dev/null 2>&1 \
             || status=1
           grep -E "PASS|FAIL|prod|ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$OUT/bench.txt" | head -60 ;;
    report) mark=$(mktemp); sleep 1
            OASR_JIT_DIR=$(mktemp -d) timeout 300 python3 -m profiling.workbench.publish notebooks/04_conv1d.ipynb \
              || status=1
            find reports -newer "$mark" -type f -not -path "reports/replay/*" | tar czf "$OUT/reports-conv1d.tgz" -T -
            find reports/h200 -type f | sort > "$OUT/reports-list.txt"
            tar tzf "$OUT/reports-conv1d.tgz" | head -40 ;;
    *) echo "unknown step $s (steps: test bench report)"; status=1 ;;
  esac
done
exit $status
