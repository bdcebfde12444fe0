#!/usr/bin/env bash
# The conv2d family on the H200, in one command from the repo root (the device tool runs it with the
# wheels of ../shared/device/fetch-wheels.sh in .whl/, nvidia-cutlass included):
#   bash dev/conv2d/h200.sh [steps...]     (default: build test bench; at most 7 files go to $OUT)
# build: the direct module and the implicit-GEMM modules the tests (python -m oasr.jit build --tests) and the
#        timing use, in parallel;
# test:  tests/test_conv2d.py with its GPU tests                       -> $OUT/conv2d-pytest.log
# bench: dev/conv2d/bench.py, oasr vs torch channels-last vs NCHW      -> $OUT/conv2d-bench.txt, conv2d-bench.csv
# front: (not by default) the fused front end alone: its GPU tests, its timing, compute-sanitizer memcheck
#        and racecheck on a small front end, ncu on the issue's shape -> $OUT/front.txt, front-ncu.txt
# front-source: (not by default) the fused front end's stall samples per SASS instruction -> $OUT/front-source.csv
# ncu:   (not by default) conv #1's few-taps kernel and conv #2's implicit GEMM under Nsight Compute
#        (speed of light, occupancy, memory, warp stalls; after build) -> $OUT/conv2d-ncu.txt
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/oasr-conv2d-out}; mkdir -p "$OUT"
source scripts/device_env.sh .whl  # named: a sourced script would take our first argument for its folder
jobs=$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))
status=0
for s in ${*:-build test bench}; do
  echo; echo "=== $s ($(date +%T))"
  case $s in
    build) python3 -m oasr.jit build --tests --jobs "$jobs" 2>&1 | tail -1 | tee -a "$OUT/conv2d-bench.txt" || status=1
           python3 dev/conv2d/bench.py --build --jobs "$jobs" 2>&1 | tee -a "$OUT/conv2d-bench.txt" || status=1 ;;
    test) timeout 150 python3 -m pytest -q -ra -p no:cacheprovider --durations=10 tests/test_conv2d.py \
            > "$OUT/conv2d-pytest.log" 2>&1 || status=1
          tail -30 "$OUT/conv2d-pytest.log" ;;
    bench) timeout 150 python3 dev/conv2d/bench.py --csv "$OUT/conv2d-bench.csv" 2>&1 | tee -a "$OUT/conv2d-bench.txt" \
             || status=1 ;;
    front) { timeout 200 python3 -m pytest -q -ra -p no:cacheprovider tests/test_conv2d.py -k "Subsampling and not two_oasr"
             timeout 120 python3 dev/conv2d/bench.py --front
             for tool in memcheck racecheck; do
               timeout 120 compute-sanitizer --tool $tool python3 -c "import sys; sys.path.insert(0, 'tests'); import torch, oasr, test_conv2d as t
x, w1, b1, w2, b2 = t.front_end(1, 37, 41, 144, torch.bfloat16, 'cuda'); oasr.conv2d_subsampling(x, w1, b1, w2, b2)
torch.cuda.synchronize()" 2>&1 | grep -E "SUMMARY|rror" | head -5
             done
             timeout 120 ncu --clock-control none -k regex:Subsampling -c 1 --section SpeedOfLight --section Occupancy \
               --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
               python3 dev/conv2d/ncu_targets.py --front > "$OUT/front-ncu.txt" 2>&1
             grep -E "Duration|Throughput|Registers|Occupancy|Stall|Issued|Eligible|Active Warps" "$OUT/front-ncu.txt" | head -40
             } 2>&1 | tee -a "$OUT/front.txt" || status=1 ;;
    front-source) timeout 200 ncu --clock-control none -k regex:Subsampling -c 1 --section SourceCounters \
                    --section WarpStateStats --page source --print-source sass --csv \
                    python3 dev/conv2d/ncu_targets.py --front > "$OUT/front-source.csv" 2>&1 || status=1 ;;
    ncu) if ! command -v ncu > /dev/null; then echo "ncu not found: put Nsight Compute's ncu on PATH"; status=1; continue; fi
         timeout 240 ncu --clock-control none -k 'regex:FewTaps|device_kernel' -c 4 --section SpeedOfLight \
           --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats \
           python3 dev/conv2d/ncu_targets.py > "$OUT/conv2d-ncu.txt" 2>&1 || status=1
         grep -E "FewTaps|device_kernel|Duration|DRAM Throughput|Registers Per|Achieved Occupancy" "$OUT/conv2d-ncu.txt" ;;
    *) echo "unknown step $s (steps: build test bench front front-source ncu)"; status=1 ;;
  esac
done
exit $status
