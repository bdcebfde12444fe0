#!/usr/bin/env bash
# The gemm and bmm families on the H200, in one command from the repo root (the device tool runs it
# with the wheels of ../shared/device/fetch-wheels.sh in .whl/, nvidia-cutlass included):
#   bash dev/gemm/h200.sh [steps...]     (default: build test tune epilogue; logs and CSVs go to $OUT)
# build:    every module the tests (python -m oasr.jit build --tests) and the sweep use, in parallel (~45 s each);
# test:     tests/test_gemm.py and tests/test_bmm.py with their GPU tests;
# tune:     dev/gemm/tune.py, every candidate configuration next to cuBLAS (CUDA-graph device time, eager apart);
# epilogue: dev/gemm/tune.py --epilogue, the fused epilogue's cost split and its candidate fixes;
# wave:     issue 17 alone (~3 min on 16 cores): its 11 modules built at once, then tune.py --wave (each checked
#           against float64 before it is timed);
# wave-fused: (not by default) tune.py --wave --fused: the same candidates and the fused ones with a bias + SiLU;
# direct:   (not by default) dev/gemm/direct.py's modules, the direct path's GPU tests, dev/gemm/direct.py (the direct
#           kernel bare, with each fused epilogue and as gemm_glu, next to cuBLAS and the rule's CUTLASS picks), then
#           those tests under compute-sanitizer memcheck and racecheck (DIRECT_ARGS: direct.py's options, e.g.
#           "--variants dev/gemm/variants/direct-pack-first.patch --issue-shapes" or "--dtype float16");
# direct-variants: (not by default) dev/gemm/direct.py $DIRECT_ARGS alone.
# direct-ncu: (not by default) the direct kernel bare, with a bias and with bias + SiLU under ncu (two shapes), and
#           the bias kernel's stall samples per SASS instruction -> $OUT/gemm-direct-ncu.txt, gemm-direct-source.csv;
# eager:    (not by default) dev/gemm/eager.py: host cost per call of oasr.gemm and gemm_glu, split into its parts.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/oasr-gemm-out}; mkdir -p "$OUT"
source scripts/device_env.sh .whl  # named: a sourced script would take our first argument for its folder
jobs=$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))
status=0
for s in ${*:-build test tune epilogue}; do
  echo; echo "=== $s ($(date +%T))"
  case $s in
    build) python3 -m oasr.jit build --tests --jobs "$jobs" 2>&1 | tee "$OUT/gemm-build.log" || status=1
           python3 dev/gemm/tune.py --build --jobs "$jobs" 2>&1 | tee -a "$OUT/gemm-build.log" || status=1 ;;
    test) python3 -m pytest -q -ra -p no:cacheprovider --durations=10 tests/test_gemm.py tests/test_bmm.py \
            > "$OUT/gemm-pytest.log" 2>&1 || status=1
          tail -30 "$OUT/gemm-pytest.log" ;;
    tune) python3 dev/gemm/tune.py --csv "$OUT/gemm-tune.csv" 2>&1 | tee "$OUT/gemm-tune.txt" || status=1 ;;
    epilogue) python3 dev/gemm/tune.py --epilogue --csv "$OUT/gemm-epilogue.csv" 2>&1 | tee "$OUT/gemm-epilogue.txt" \
                || status=1 ;;
    wave) python3 dev/gemm/tune.py --build --wave --jobs "$(nproc)" 2>&1 | tee "$OUT/gemm-wave-build.log" || status=1
          python3 dev/gemm/tune.py --wave --csv "$OUT/gemm-wave.csv" 2>&1 | tee "$OUT/gemm-wave.txt" || status=1 ;;
    wave-fused) python3 dev/gemm/tune.py --build --wave --fused --jobs "$(nproc)" 2>&1 | tail -3 || status=1
                python3 dev/gemm/tune.py --wave --fused --csv "$OUT/gemm-wave-fused.csv" 2>&1 \
                  | tee "$OUT/gemm-wave-fused.txt" || status=1 ;;
    direct) python3 dev/gemm/direct.py --build 2>&1 | tail -3
            python3 -m pytest -q -ra -p no:cacheprovider tests/test_gemm.py -k "direct or glu" \
              > "$OUT/gemm-direct-pytest.log" 2>&1 || status=1
            tail -5 "$OUT/gemm-direct-pytest.log"
            python3 dev/gemm/direct.py ${DIRECT_ARGS:-} 2>&1 | tee "$OUT/gemm-direct.txt" || status=1
            for tool in memcheck racecheck; do
              timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 python3 -m pytest -q \
                -p no:cacheprovider tests/test_gemm.py -k "direct_kernel or glu_odd" > "$OUT/gemm-direct-$tool.log" 2>&1 \
                || status=1
              echo "$tool: $(grep -E "(ERROR|RACECHECK) SUMMARY" "$OUT/gemm-direct-$tool.log" | tail -1)"
              tail -1 "$OUT/gemm-direct-$tool.log"
            done ;;
    direct-variants) python3 dev/gemm/direct.py ${DIRECT_ARGS:-} 2>&1 | tee "$OUT/gemm-direct.txt" || status=1 ;;
    direct-ncu) timeout 200 ncu --clock-control none -k regex:GroupGemmKernel --section SpeedOfLight \
                  --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
                  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
                  python3 dev/gemm/direct.py --ncu plain bias silu > "$OUT/gemm-direct-ncu.txt" 2>&1 || status=1
                grep -E "GroupGemm|Duration|Throughput|Busy|Stall|Issued|Eligible|Active Warps|gmma" \
                  "$OUT/gemm-direct-ncu.txt"
                timeout 200 ncu --clock-control none -k regex:GroupGemmKernel --launch-skip 1 --launch-count 1 \
                  --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
                  python3 dev/gemm/direct.py --ncu bias > "$OUT/gemm-direct-source.csv" 2>&1 || status=1
                python3 dev/gemm/direct.py --summarise "$OUT/gemm-direct-source.csv" | tee "$OUT/gemm-direct-source.txt" ;;
    eager) python3 dev/gemm/eager.py 2>&1 | tee "$OUT/gemm-eager.txt" || status=1 ;;
    *) echo "unknown step $s (steps: build test tune epilogue wave wave-fused direct direct-variants direct-ncu eager)"; status=1 ;;
  esac
done
exit $status
