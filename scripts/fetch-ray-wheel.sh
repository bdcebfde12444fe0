#!/usr/bin/env bash
# Ray for the lent H200 (no internet there, 64 MiB per call): download the ray wheel and slim it to
# what Ray Core needs for ray.init() and tasks on one node, then fetch the dependencies the device
# lacks. Everything lands in .whl-ray/ (git-ignored), which `source scripts/device_env.sh .whl-ray` installs:
#   bash scripts/fetch-ray-wheel.sh            # cp312 (the device's Python)
#   PY=3.11 bash scripts/fetch-ray-wheel.sh    # another Python, e.g. to try the slim wheel here
# Dropped: the Java worker (ray/jars, 32 MB), the dashboard's web client, the libraries on top of
# Core (serve, rllib, tune, train, data, air, llm, workflow), cloud autoscaler providers, tests;
# the raylet, GCS server and _raylet.so lose their debug symbols (strip --strip-unneeded); RECORD is
# rewritten to match (scripts/slim_wheel.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-3.12}
VERSION=${RAY_VERSION:-2.60.0}
DEST=${DEST:-.whl-ray}
tag=cp${PY/./}
full=$(mktemp -d)
trap 'rm -rf "$full"' EXIT
mkdir -p "$DEST"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
  --platform manylinux2014_x86_64 -d "$full" "ray==$VERSION"
wheel=$(ls "$full"/ray-"$VERSION"-"$tag"-*.whl)
python3 scripts/slim_wheel.py "$wheel" "$DEST" \
  --drop '^ray/(jars/|dashboard/client/|serve/|rllib/|tune/|train/|data/|air/|llm/|workflow/|autoscaler/_private/(aws|gcp|azure|aliyun|vsphere|spark)/|tests/|.*/tests/)' \
  --strip ray/_raylet.so ray/core/src/ray/raylet/raylet ray/core/src/ray/gcs/gcs_server
# Ray's requirements that the device image lacks (KINDS.md lists click, filelock, jsonschema, msgpack,
# packaging, protobuf, pyyaml, requests, aiohttp and its helpers): none at 2.60.0. Checked with
#   unzip -p .whl-ray/ray-*.whl '*/METADATA' | grep ^Requires-Dist | grep -v extra
missing=${RAY_MISSING_DEPS:-}
if [ -n "$missing" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$DEST" $missing
fi
# The project's own wheels that the scale-out script needs, from .whl (../shared/device/fetch-wheels.sh), so
# that only .whl-ray travels (.whl and .whl-ray together pass the 64 MiB a call may carry).
if [ "$tag" = cp312 ]; then
  for wheel in .whl/apache_tvm_ffi-*-cp312-*.whl .whl/nvtx-*-cp312-*.whl; do
    [ -f "$wheel" ] && cp "$wheel" "$DEST/" || echo "missing $wheel: run bash ../shared/device/fetch-wheels.sh first"
  done
fi
ls -la "$DEST"
