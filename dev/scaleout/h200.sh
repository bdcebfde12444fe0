#!/usr/bin/env bash
# Sweeps on one GPU against all the GPUs of the machine (issue 22), on the lent H200s. The device
# tool runs it from the repo root with .whl-ray carried (bash scripts/fetch-ray-wheel.sh fills it:
# the slim Ray wheel, plus tvm-ffi and nvtx from .whl):
#   bash dev/scaleout/h200.sh [steps...]         (default: build tests timing ncu, about 5 minutes on 2 GPUs;
#                                               concurrency, the ncu experiment already measured, on request)
# Works on 2 GPUs (the point) and on 1 (degenerate: "all" is one GPU). Writes into $OUT at most 8
# files: summary.txt (every step's table, start-up per GPU included), timing.csv, ncu.csv,
# ncu_concurrency.csv, ncu_concurrency_events.csv, pytest.log, tables.tgz (every run's full table), log.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/oasr-out}; mkdir -p "$OUT"
work=$(mktemp -d /var/tmp/oasr-scaleout-XXXX)
exec > >(tee -a "$OUT/log.txt") 2>&1
source scripts/device_env.sh .whl-ray
export OASR_GIT_COMMIT=${OASR_GIT_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
engines=local
python3 -c "import ray" 2>/dev/null && engines="local ray" || echo "Ray is not importable here: the ray engine is left out"
steps=${*:-build tests timing ncu}
status=0
step() { echo; echo "=== $1 ($(date +%T))"; }
nvidia-smi -L
for s in $steps; do
  case $s in
    build)
      step "JIT build of the modules the sweeps use (the timed runs then only load them)"
      /usr/bin/time -f "%e s" python3 -c "from profiling.scaleout.timing import prebuild; prebuild(['scale', 'glu', 'rms_norm'])" || status=1
      ;;
    tests)
      step "the live tests of tests/test_scaleout.py (both engines; its CPU tests run anywhere)"
      timeout 150 python3 -m pytest -q -ra -p no:cacheprovider -k "live_" tests/test_scaleout.py > "$OUT/pytest.log" 2>&1 || status=1
      tail -15 "$OUT/pytest.log"
      ;;
    timing)
      step "two 40-case timing sweeps (short: rms_norm; conformer: 7 ops at Conformer shapes), one GPU vs all, engines: $engines"
      timeout 330 python3 dev/scaleout/compare.py timing --out "$work" --engines $engines || status=1
      cp "$work/timing.csv" "$OUT/" 2>/dev/null
      ;;
    ncu)
      step "40-config ncu sweep (scale, timing preset): one GPU vs all (the driver runs one ncu per GPU), engines: $engines"
      timeout 200 python3 dev/scaleout/compare.py ncu --out "$work" --engines $engines || status=1
      cp "$work/ncu.csv" "$OUT/" 2>/dev/null
      ;;
    concurrency)
      step "what serialises two ncu runs on one host"
      timeout 240 python3 dev/scaleout/ncu_concurrency.py --out "$work" || status=1
      cp "$work"/ncu_concurrency*.csv "$OUT/" 2>/dev/null
      ;;
    *) echo "unknown step $s"; status=2 ;;
  esac
done
step "summary"
{
  for f in timing timing_startup ncu ncu_startup ncu_concurrency; do
    [ -f "$work/$f.csv" ] && { echo "## $f"; python3 -c "import pandas as pd, sys; pd.set_option('display.width', 250); pd.set_option('display.max_colwidth', 90); print(pd.read_csv(sys.argv[1]).to_string(index=False))" "$work/$f.csv"; echo; }
  done
} | tee "$OUT/summary.txt"
tar czf "$OUT/tables.tgz" -C "$work" . 2>/dev/null
exit $status
