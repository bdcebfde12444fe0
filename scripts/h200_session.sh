#!/usr/bin/env bash
# Everything this project measures on the lent H200, in one go (the device tool runs
# it from the repo root with the wheels of ../shared/device/fetch-wheels.sh in .whl/):
# the suite with GPU tests, the scale benchmark and its ncu cross-check, the profile
# recordings and the main command live. Logs and the reports/ tree go to $OUT.
#   bash scripts/h200_session.sh [steps...]   (default: all; steps: tests bench record reports)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/oasr-out}; mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site .whl/*.whl || exit 1
  export PYTHONPATH=$PWD:$PWD/.site PATH=$PWD/.site/bin:$PATH JUPYTER_PATH=$PWD/.site/share/jupyter
fi
export PYTHONUNBUFFERED=1
steps=${*:-tests bench record reports}
status=0
step() { echo; echo "=== $1 ($(date +%T))"; }
for s in $steps; do
  case $s in
    tests)
      step "JIT build of every module (cold cache)"
      /usr/bin/time -f "%e s" python3 -m oasr.jit build
      step "pytest (GPU tests included)"
      python3 -m pytest -q -ra -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest.log" | tail -40 || status=1
      ;;
    bench)
      for dt in float16 bfloat16 float32; do
        step "benchmark scale $dt"
        python3 benchmarks/oasr_benchmark.py --routine scale --subroutine scale --backends cuda torch \
          --refcheck --compare --dtype $dt --output_path "$OUT/bench_scale_$dt.csv" || status=1
      done
      step "benchmark vs ncu gpu__time_duration (>= 16 MiB)"
      python3 benchmarks/ncu_crosscheck.py --op scale --dtype float16 || status=1
      ;;
    record)
      step "profile recordings (roofline preset)"
      python3 -m profiling.session --op scale --preset roofline --dtypes float16,bfloat16,float32 || status=1
      ;;
    reports)
      step "main command, live"
      python3 -m profiling.reports || status=1
      tar czf "$OUT/reports.tgz" reports
      ;;
  esac
done
exit $status
