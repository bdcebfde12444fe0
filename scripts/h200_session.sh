#!/usr/bin/env bash
# Everything this project measures on the lent H200 (the device tool runs it from the
# repo root with the wheels of ../shared/device/fetch-wheels.sh in .whl/): the suite with
# GPU tests, the benchmark harness against ncu, every routine over the Conformer shapes,
# and the main command live, which records the profiles and tables that replay uses.
# Logs, CSVs and the reports/ tree go to $OUT. Set OASR_GIT_COMMIT when the tree has no .git.
#   bash scripts/h200_session.sh [steps...]
#   (default: all; steps: tests sanitize crosscheck conformer overhead reports; build, the first half of tests, for
#   a call of its own; and, asked for by name,
#   compare (each family's first op at this tree and at its parent: the samples a replayed compare reads),
#   source (the source preset of the ops without one: the hotspots that replay shows)
#   regions (one Conformer layer of oasr ops and of torch, every kernel under one ncu run each: a call of its
#   own, which brings back region_recordings.tgz to unpack at the repo root and commit)
#   encoder (the encoder's GPU tests, then benchmarks/encoder.py: the tables notebook 10 replays)
#   and gemm-grid (issue 54's grid: oasr's gemm, gemm_glu and bmm choices against cuBLAS; GEMM_GRID_FLAGS, e.g.
#   "--m 6000 16000", splits it over calls; OASR_AUTOTUNE=1 times the tuner's choices))
#   bash scripts/h200_session.sh peers   # a call of its own, carrying .whl-peers alone (see the step)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/oasr-out}; mkdir -p "$OUT"
source scripts/device_env.sh "${OASR_WHEELS:-.whl}"  # named: a sourced script would take our first argument
steps=${*:-tests sanitize crosscheck conformer overhead reports}
status=0
step() { echo; echo "=== $1 ($(date +%T))"; }
for s in $steps; do
  case $s in
    build|tests)
      step "JIT build of every module the tests take (cold cache), in parallel"
      # Built inside the tests, one at a time, the CUTLASS configurations alone take longer than a device call; a
      # module not built when BUILD_TIMEOUT ends is built by the next call into the same cache (a warm machine).
      timeout "${BUILD_TIMEOUT:-3000}" python3 -m oasr.jit build --tests --jobs "$(nproc)" 2>&1 \
        | tee "$OUT/build.log" | tail -3 || status=1
      [ "$s" = build ] && continue
      step "pytest (GPU tests included), kernels and the rest in two processes at once"
      # The kernel files (with torch.compile's inductor builds) take as long as all the rest.
      kernels="tests/test_scale.py tests/test_activation.py tests/test_norm.py tests/test_compile.py tests/test_checks.py"
      kernels="$kernels $(ls tests/test_conv1d.py 2>/dev/null)"
      rest=$(ls tests/test_*.py | grep -v -x -F -f <(tr ' ' '\n' <<< "$kernels"))
      # The rest holds the property tests (tests/test_properties.py): their statistics give
      # the number of cases each op ran.
      limit=${PYTEST_TIMEOUT:-3000}
      timeout "$limit" python3 -m pytest -q -ra -p no:cacheprovider --durations=10 $kernels \
        > "$OUT/pytest-kernels.log" 2>&1 &
      kernels_pid=$!
      timeout "$limit" python3 -m pytest -q -ra -p no:cacheprovider --durations=10 --hypothesis-show-statistics $rest \
        > "$OUT/pytest-rest.log" 2>&1 || status=1
      wait $kernels_pid || status=1
      tail -n 25 "$OUT/pytest-kernels.log" "$OUT/pytest-rest.log"
      ;;
    sanitize)
      step "compute-sanitizer (memcheck, racecheck, initcheck) over every op's random odd, unaligned and strided cases"
      # The property tests draw the cases. Every kernel is instrumented, torch's too:
      # initcheck must see torch's kernels write the inputs that ours read.
      python3 -m oasr.jit build > /dev/null || status=1
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck}; do
        OASR_PROPERTY_EXAMPLES=${SANITIZE_EXAMPLES:-40} timeout "${SANITIZE_TIMEOUT:-600}" \
          compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 \
          python3 -m pytest -q -p no:cacheprovider tests/test_properties.py > "$OUT/sanitize-$tool.log" 2>&1 || status=1
        echo "$tool: $(grep -E "(ERROR|RACECHECK) SUMMARY" "$OUT/sanitize-$tool.log" | tail -1)"
        echo "$tool: $(grep -E "passed|failed|error" "$OUT/sanitize-$tool.log" | tail -1)"
      done
      ;;
    crosscheck)
      step "benchmark harness vs ncu gpu__time_duration (>= 16 MiB)"
      python3 benchmarks/ncu_crosscheck.py --op scale --dtype float16 2>&1 | tee "$OUT/crosscheck.txt" || status=1
      ;;
    conformer)
      step "every routine over its default shapes, fp16 and bf16"
      timeout "${CONFORMER_TIMEOUT:-900}" python3 benchmarks/oasr_benchmark.py --testlist benchmarks/testlists/conformer.txt \
        --output_path "$OUT/conformer.csv" > "$OUT/conformer.txt" 2>&1 || status=1
      tail -5 "$OUT/conformer.txt"
      ;;
    overhead)
      step "host overhead per call"
      python3 benchmarks/host_overhead.py 2>&1 | tee "$OUT/overhead.txt" || status=1
      ;;
    reports)
      step "main command, live, cold JIT cache (REPORTS_JIT_DIR: a warm one)"
      stamp=$(mktemp) && sleep 1
      OASR_JIT_DIR=${REPORTS_JIT_DIR:-$(mktemp -d)} timeout "${REPORTS_TIMEOUT:-3000}" \
        python3 -m profiling.workbench.publish ${NOTEBOOKS:-} 2>&1 | tee "$OUT/reports.log" || status=1
      # What the run wrote (the device tool brings back files of up to 16 MiB: parts, joined by
      # `cat reports.tgz.* | tar xz`).
      find reports -newer "$stamp" -type f -not -path "reports/replay/*" | tar czf - -T - | split -b 15M - "$OUT/reports.tgz."
      ;;
    peers)
      budget=${PEERS_BUDGET:-300}
      step "every op against its peers (benchmarks/peers.py) inside $budget s"
      # Its wheels (scripts/fetch-peer-wheels.sh) carry tvm-ffi and CUTLASS's headers too, so that .whl-peers
      # travels alone: with .whl beside it the call would pass 64 MiB. Installed outside the tree, where a
      # warm machine keeps them, with FlashInfer's and Inductor's caches.
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-peers \
        .whl-peers/*.whl || status=1
      PYTHONPATH=$PWD:/tmp/site-peers timeout $((budget + 45)) python3 benchmarks/peers.py --time-budget "$budget" \
        --output "$OUT/peers.md" ${PEERS_FLAGS:-} > "$OUT/peers.txt" 2>&1 || status=1
      tail -n 30 "$OUT/peers.txt"
      ;;
    compare)
      step "each family's first op timed at this tree and at its parent (the samples a replayed compare reads)"
      # A copy sent to the GPU machine has no .git: then the parent's kernel sources come from a tarball made
      # beside the tree, `git archive -o .artifacts/parent-src.tar HEAD~1 include csrc` (carry .artifacts), with
      # OASR_GIT_COMMIT naming this tree's commit, and a two-commit history of include/ and csrc/ stands in.
      if ! git rev-parse -q --verify HEAD~1 > /dev/null 2>&1; then
        if [ ! -f .artifacts/parent-src.tar ] || [ -z "${OASR_GIT_COMMIT:-}" ] || [ -e .git ]; then
          echo "compare: needs the repository's history, or .artifacts/parent-src.tar and OASR_GIT_COMMIT"
          status=1; continue
        fi
        parent=$(mktemp -d) && tar xf .artifacts/parent-src.tar -C "$parent"
        as=(-c user.name=oasr -c user.email=oasr@localhost)
        git init -q && git --work-tree="$parent" add -A include csrc && git "${as[@]}" commit -qm parent \
          && git add -A include csrc && git "${as[@]}" commit -q --allow-empty -m "$OASR_GIT_COMMIT" || status=1
      fi
      ops=$(python3 -c "from oasr.jit.families import FAMILIES; from profiling.harness.ops import ops_of
print(' '.join(ops_of(f)[0].name for f in FAMILIES if ops_of(f)))")
      for op in ${COMPARE_OPS:-$ops}; do
        timeout "${COMPARE_TIMEOUT:-900}" python3 -m profiling.compare --op "$op" --base HEAD~1 || status=1
      done
      tar czf "$OUT/timings.tgz" reports/h200/timings && tar tzf "$OUT/timings.tgz" | tail -n 20
      ;;
    source)
      step "the source preset of the ops without a source recording (the largest config, oasr only)"
      for op in ${SOURCE_OPS:-scale glu swish bmm}; do
        config=$(python3 -c "import sys; from profiling.harness.ops import get_op
print(','.join(f'{k}={v}' for k, v in get_op(sys.argv[1]).default_sweep[-1].items()))" "$op")
        timeout 300 python3 -m profiling.nsight --op "$op" --preset source --backends oasr --config "$config" --live \
          || status=1
      done
      python3 -m profiling.nsight.packing reports/h200 || status=1
      tar czf "$OUT/source_recordings.tgz" reports/h200/profiles/*/source-* && tar tzvf "$OUT/source_recordings.tgz"
      ;;
    regions)
      step "region profiles: one Conformer layer of oasr ops and the torch layer (every kernel, one ncu run each)"
      # REGION_SHAPE (d=,b=,t=,k=) changes the layer; the default is profiling/harness/regions.py's CONFORMER_SHAPE.
      # One call of the oasr layer outside ncu first: its GEMM configurations are JIT modules of their own (~45 s each
      # on a cold cache), built here rather than inside the profiled worker's warm-up.
      python3 -c "import sys; from profiling.commands import parse_config; from profiling.harness.regions import region_call
region_call('conformer_layer_oasr', parse_config(sys.argv[1]) if sys.argv[1] else None)()" "${REGION_SHAPE:-}" \
        || status=1
      timeout "${REGIONS_TIMEOUT:-540}" python3 -m profiling.nsight.region conformer_layer_oasr conformer_layer_torch --live \
        ${REGION_SHAPE:+--shape "$REGION_SHAPE"} 2>&1 | tee "$OUT/regions.log" || status=1
      python3 -m profiling.nsight.packing reports/h200 || status=1
      tar czf "$OUT/region_recordings.tgz" reports/h200/regions && tar tzvf "$OUT/region_recordings.tgz"
      ;;
    encoder)
      step "the encoder: its GPU tests, then benchmarks/encoder.py recorded in reports/<gpu>/encoder/"
      # Asked for by name: torch.compile builds the reference once per configuration and workload (minutes each).
      # ENCODER_FLAGS="--configs wenet" and then "--configs conformer-l" split it over two device calls: each
      # configuration is recorded in files of its own, so the second leaves the first's as they were;
      # ENCODER_FLAGS="--max-autotune" adds torch.compile's max-autotune rows (the issue asks for them too).
      timeout "${PYTEST_TIMEOUT:-1200}" python3 -m pytest -q -ra -p no:cacheprovider -m gpu \
        tests/test_models.py tests/test_encoder_benchmark.py > "$OUT/pytest-encoder.log" 2>&1 || status=1
      tail -n 5 "$OUT/pytest-encoder.log"
      timeout "${ENCODER_TIMEOUT:-3000}" python3 benchmarks/encoder.py ${ENCODER_FLAGS:-} 2>&1 \
        | tee "$OUT/encoder.txt" || status=1
      tar czf "$OUT/encoder.tgz" reports/*/encoder && tar tzf "$OUT/encoder.tgz" || status=1
      ;;
    gemm-grid)
      step "issue 54's grid: gemm, gemm_glu and bmm as planned, against cuBLAS and torch's unfused epilogues"
      # The first call of each oasr configuration builds its CUTLASS module (prebuilt by the build step).
      timeout "${GEMM_GRID_TIMEOUT:-3000}" python3 benchmarks/gemm_grid.py --output "$OUT/gemm_grid.csv" \
        ${GEMM_GRID_FLAGS:-} > "$OUT/gemm_grid.txt" 2>&1 || status=1
      tail -n 12 "$OUT/gemm_grid.txt"
      ;;
    *) echo "unknown step $s"; status=2 ;;
  esac
done
exit $status
