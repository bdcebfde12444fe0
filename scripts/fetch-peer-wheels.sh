#!/usr/bin/env bash
# The peers' wheels for the lent H200 (no internet there, 64 MiB per call with the tree), for
# benchmarks/peers.py: downloaded, slimmed to what the routine loads, into .whl-peers/ (git-ignored);
# scripts/h200_session.sh's step `peers` installs it there. Run from anywhere, on a machine with torch,
# nvcc and ninja (the probe imports the peers and asks nvcc which headers FlashInfer's JIT modules read):
#   bash scripts/fetch-peer-wheels.sh
# What travels, and why the rest does not:
#   flashinfer-python   slimmed: the Python folders `import flashinfer` loads (probed here) and the JIT
#                       sources and headers of the modules the routine builds (nvcc -M), not its ~700 MB of
#                       other kernel sources. Its Requires-Dist that the image lacks are left out: the routine
#                       needs none of them (cuda-tile, nccl4py, nccl-extensions, nvidia-cutlass-dsl are
#                       imported lazily, by other modules; cuda-python's modules come with the image's
#                       cuda-bindings); nvidia-cudnn-frontend travels anyway.
#   nvidia-cudnn-frontend  slimmed the same way (its CuTe-DSL engines need nvidia-cutlass-dsl: left out).
#   apache-tvm-ffi, nvidia-cutlass (its C++ headers only): what oasr's JIT needs, copied here so that only
#                       .whl-peers travels (.whl is 31 MB: with the tree it would pass 64 MiB).
#   quack-kernels       cannot travel: it needs nvidia-cutlass-dsl, whose CUDA 13 library wheel is 92 MB.
#   flash-attn          no cp312 manylinux wheel; torch SDPA's backends and cuDNN stand in.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${DEST:-.whl-peers}
FLASHINFER_VERSION=${FLASHINFER_VERSION:-0.7.4}
CUDNN_FRONTEND_VERSION=${CUDNN_FRONTEND_VERSION:-1.32.0}
TVM_FFI_VERSION=${TVM_FFI_VERSION:-0.1.15.post2}
CUTLASS_VERSION=${CUTLASS_VERSION:-4.2.0.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
device=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
        --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform any)
download() { python3 -m pip download -q --no-deps "$@" 2>&1 | grep -v '^WARNING' || true; }
# Into the probe's virtualenvs, without the Requires-Dist the routine does not need (listed above).
install() { "$1/bin/python" -m pip install -q --no-deps --no-warn-conflicts "${@:2}" 2>&1 | grep -v '^WARNING' || true; }
download "${device[@]}" -d "$work/device" "flashinfer-python==$FLASHINFER_VERSION" \
  "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" "apache-tvm-ffi==$TVM_FFI_VERSION" "nvidia-cutlass==$CUTLASS_VERSION"
download --only-binary=:all: -d "$work/host" "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"  # this machine's Python
flashinfer=$(ls "$work"/device/flashinfer_python-*.whl)
cudnn_device=$(ls "$work"/device/nvidia_cudnn_frontend-*.whl)
cudnn_host=$(ls "$work"/host/nvidia_cudnn_frontend-*.whl)

echo "probing what the peers load (a virtualenv over this Python's torch)"
python3 -m venv --system-site-packages "$work/venv"
install "$work/venv" "$flashinfer" "$cudnn_host"
install "$work/venv" einops tabulate nvidia-ml-py  # in the device image already
"$work/venv/bin/python" scripts/peer_wheels_probe.py flashinfer-python nvidia-cudnn-frontend > "$work/keep.json"

mkdir -p "$DEST"
rm -f "$DEST"/*.whl
slim() { python3 scripts/slim_wheel.py "$@"; }
slim "$flashinfer" "$DEST" --keep-json "$work/keep.json" --distribution flashinfer-python
slim "$cudnn_device" "$DEST" --keep-json "$work/keep.json" --distribution nvidia-cudnn-frontend
slim "$(ls "$work"/device/nvidia_cutlass-*.whl)" "$DEST" --keep-prefix cutlass_library/__init__.py \
  cutlass_library/source/include/ cutlass_library/source/tools/util/include/
cp "$work"/device/apache_tvm_ffi-*.whl "$DEST"/

echo "checking the slim wheels: installed alone, the probe finds everything it found before"
mkdir -p "$work/check-wheels"
slim "$cudnn_host" "$work/check-wheels" --keep-json "$work/keep.json" --distribution nvidia-cudnn-frontend > /dev/null
python3 -m venv --system-site-packages "$work/check"
install "$work/check" "$DEST"/flashinfer_python-*.whl "$work"/check-wheels/*.whl "$DEST"/nvidia_cutlass-*.whl
install "$work/check" einops tabulate nvidia-ml-py
"$work/check/bin/python" scripts/peer_wheels_probe.py flashinfer-python nvidia-cudnn-frontend > "$work/keep-check.json"
"$work/check/bin/python" -c "import cutlass_library, pathlib, sys
root = pathlib.Path(cutlass_library.__file__).parent / 'source' / 'include' / 'cutlass' / 'cutlass.h'
sys.exit(0 if root.is_file() else 'the slim nvidia-cutlass lacks cutlass/cutlass.h')"

ls -la "$DEST"
tree=$(git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {print s}')
carry=$(du -sb "$DEST" | cut -f1)
awk -v t="$tree" -v c="$carry" 'BEGIN {
  printf "tracked tree %.1f MiB + %s %.1f MiB = %.1f MiB of the 64 MiB a call carries\n", t / 2^20, "'"$DEST"'", c / 2^20, (t + c) / 2^20
  if (t + c > 64 * 2^20) { print "too large: carry less, or slim the tree"; exit 1 } }'
