#!/usr/bin/env bash
# The group_gemm family on the H200, in one command from the repo root (the device tool runs it with the
# wheels of ../shared/device/fetch-wheels.sh in .whl/, nvidia-cutlass included):
#   bash dev/group_gemm/h200.sh [steps...]     (default: build test bench; three files go to $OUT)
# build: the modules the tests (python -m oasr.jit build --tests) and the sweep use, in parallel (~45 s each);
# test:  tests/test_group_gemm.py with its GPU tests -> $OUT/group-pytest.log;
# bench: dev/group_gemm/bench.py, the issue's shapes: oasr (default, and every candidate with and without
#        programmatic dependent launch) next to torch._grouped_mm, a loop of F.linear and one dense GEMM,
#        CUDA-graph device time
#        -> $OUT/group-bench.txt and $OUT/group-bench.csv;
# sanitize: compute-sanitizer memcheck and racecheck over dev/group_gemm/sanitize.py's odd problems (both
#        kernels) -> $OUT/group-sanitize-{memcheck,racecheck}.log;
# ncu:   (not by default) the issue's shape under the direct kernel and CUTLASS's 128x256 cooperative, each
#        launched twice (speed of light, memory, occupancy, warp stalls) -> $OUT/group-ncu.txt;
# source: (not by default) the direct kernel's stall samples per SASS instruction -> $OUT/group-source.csv;
# variants: (not by default) variants.py over $VARIANTS ("PATCH[@COMMIT] ...", patches of include/ or of a commit's, or
#        "NAME=INCLUDE_DIR ...", edited copies of include/),
#        timed next to production, then each under ncu, and the dense kernels (cuBLAS's, oasr.gemm's) on one group
#        -> $OUT/group-variants.txt, group-variants-ncu.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/oasr-group-out}; mkdir -p "$OUT"
source scripts/device_env.sh .whl  # named: a sourced script would take our first argument for its folder
jobs=$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))
status=0
NCU_EXTRA=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum,\
dram__bytes_write.sum,smsp__warp_issue_stalled_gmma_per_warp_active.pct
for s in ${*:-build test bench}; do
  echo; echo "=== $s ($(date +%T))"
  case $s in
    build) python3 -m oasr.jit build --tests --jobs "$jobs" 2>&1 | tail -1 | tee -a "$OUT/group-pytest.log" || status=1
           python3 dev/group_gemm/bench.py --build --jobs "$jobs" 2>&1 | tee -a "$OUT/group-pytest.log" || status=1 ;;
    test) python3 -m pytest -q -ra -p no:cacheprovider --durations=10 tests/test_group_gemm.py \
            >> "$OUT/group-pytest.log" 2>&1 || status=1
          tail -30 "$OUT/group-pytest.log" ;;
    bench) python3 dev/group_gemm/bench.py --csv "$OUT/group-bench.csv" 2>&1 | tee "$OUT/group-bench.txt" || status=1 ;;
    sanitize) for tool in memcheck racecheck; do
                timeout 300 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 \
                  python3 dev/group_gemm/sanitize.py > "$OUT/group-sanitize-$tool.log" 2>&1 || status=1
                echo "$tool: $(grep -E "(ERROR|RACECHECK) SUMMARY" "$OUT/group-sanitize-$tool.log" | tail -1)"
                grep -c " ok$" "$OUT/group-sanitize-$tool.log" | sed "s/^/$tool: cases ok: /"
              done ;;
    ncu) timeout 240 ncu --clock-control none -k regex:'GroupGemm(Kernel|AfterSetup)' \
           --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
           --section SchedulerStats python3 dev/group_gemm/ncu_targets.py > "$OUT/group-ncu.txt" 2>&1 || status=1
         grep -E "GroupGemm|Duration|Throughput|Busy|Stall|Issued|Eligible|Active Warps|Hit Rate" "$OUT/group-ncu.txt" ;;
    source) timeout 200 ncu --clock-control none -k regex:GroupGemmKernel -c 1 --section SourceCounters \
              --section WarpStateStats --page source --print-source sass --csv \
              python3 dev/group_gemm/ncu_targets.py 128x128x64_c1x1_direct_s0 > "$OUT/group-source.csv" 2>&1 \
              || status=1 ;;
    variants) timeout 300 python3 dev/group_gemm/variants.py ${VARIANTS:-} 2>&1 | tee "$OUT/group-variants.txt" \
                || status=1
              timeout 200 ncu --clock-control none -k regex:'GroupGemm|device_kernel|nvjet' --section SpeedOfLight \
                --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
                --metrics "$NCU_EXTRA" python3 dev/group_gemm/variants.py --ncu ${VARIANTS:-} \
                > "$OUT/group-variants-ncu.txt" 2>&1 || status=1
              grep -E "GroupGemm|device_kernel|nvjet|Duration|L2 Cache Throughput|tensor|lts__t|dram__bytes" \
                "$OUT/group-variants-ncu.txt" ;;
    *) echo "unknown step $s (steps: build test bench sanitize ncu source variants)"; status=1 ;;
  esac
done
exit $status
