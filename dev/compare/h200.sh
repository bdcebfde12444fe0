#!/usr/bin/env bash
# Issue 20 on the H200, in one command from the repo root (the device tool runs it with the wheels of
# ../shared/device/fetch-wheels.sh in .whl/, nvidia-cutlass and ncu-report included):
#   bash dev/compare/h200.sh [steps...]    (default: build source accept test)
# build:  the oasr modules of the ops below, in parallel (a gemm configuration takes ~45 s)
# source: the `source` preset (per-line instructions and stalls) of each op's largest config, oasr only,
#         stored in reports/h200/profiles/<op>/source-* and tarred into $OUT/source_recordings.tar.gz
#         (untar at the repo root, commit: replay and tests/test_source.py read them)
# accept: dev/compare/h200_acceptance.py, 10 compares of scale against its ~10% slower variant and 10
#         against itself ($OUT/compare_acceptance.csv)
# test:   tests/test_source.py, test_limiter.py and test_compare.py with their GPU tests
# Writes 3 files to $OUT: h200_issue20.log (everything printed), source_recordings.tar.gz, compare_acceptance.csv.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/oasr-issue20}; mkdir -p "$OUT"
source scripts/device_env.sh .whl  # named: a sourced script would take our first argument for its folder
OPS="scale layer_norm rms_norm add_layer_norm add_rms_norm gemm gemm_glu"
status=0
exec > >(tee "$OUT/h200_issue20.log") 2>&1
for s in ${*:-build source accept test}; do
  echo; echo "=== $s ($(date +%T))"; start=$SECONDS
  case $s in
    build)  # one process per op: each builds (and runs once) the modules its largest config uses
      pids=()
      for op in $OPS; do
        python3 - "$op" <<'PY' &
import sys, torch
from profiling.harness.ops import get_op
op = get_op(sys.argv[1])
op.backends["oasr"](op.make_inputs(op.default_sweep[-1], torch.float16, torch.device("cuda"), 0))
torch.cuda.synchronize()
print(f"built {op.name}")
PY
        pids+=($!)
      done
      # Wait on the builds by pid: a bare `wait` also waits for the tee of the log, which never ends.
      for pid in "${pids[@]}"; do wait "$pid" || status=1; done ;;
    source)
      timeout 300 python3 - $OPS <<'PY' || status=1
import sys, time
from profiling.nsight import runner
from profiling.nsight.sweep import profile_sweep
from profiling.harness.ops import get_op
for name in sys.argv[1:]:
    start = time.perf_counter()
    config = dict(get_op(name).default_sweep[-1])
    try:
        result = profile_sweep(name, [config], backends=("oasr",), preset="source", live=True, timeout_s=120)
    except Exception as exc:  # one op's failure must not hide the others'
        print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
        continue
    print(f"{name} {config}: {result.source}, {len(result.launches)} launches, {time.perf_counter() - start:.1f} s, "
          f"{[p.name for p in result.report_paths]}", flush=True)
PY
      tar czf "$OUT/source_recordings.tar.gz" reports/h200/profiles/*/source-* && tar tzvf "$OUT/source_recordings.tar.gz" \
        || status=1 ;;
    accept) timeout 240 python3 dev/compare/h200_acceptance.py --csv "$OUT/compare_acceptance.csv" || status=1 ;;
    test) timeout 300 python3 -m pytest -q -ra -p no:cacheprovider --durations=8 \
            tests/test_source.py tests/test_limiter.py tests/test_compare.py || status=1 ;;
    *) echo "unknown step $s (steps: build source accept test)"; status=1 ;;
  esac
  echo "=== $s: $((SECONDS - start)) s"
done
exit $status
