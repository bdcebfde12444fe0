#!/usr/bin/env bash
# Ray for the lent H200 (no internet there, 64 MiB per call): download the ray wheel and slim it to
# what Ray Core needs for ray.init() and tasks on one node, then fetch the dependencies the device
# lacks. Everything lands in .whl-ray/ (git-ignored), which `source scripts/device_env.sh .whl-ray` installs:
#   bash scripts/fetch-ray-wheel.sh            # cp312 (the device's Python)
#   PY=3.11 bash scripts/fetch-ray-wheel.sh    # another Python, e.g. to try the slim wheel here
# Dropped: the Java worker (ray/jars, 32 MB), the dashboard's web client, the libraries on top of
# Core (serve, rllib, tune, train, data, air, llm, workflow), cloud autoscaler providers, tests;
# the raylet, GCS server and _raylet.so lose their debug symbols (strip --strip-unneeded). RECORD
# is rewritten to match (dropped files leave it, stripped ones get their new hash and size).
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
python3 - "$wheel" "$DEST" <<'PY'
import base64, hashlib, os, re, subprocess, sys, tempfile, zipfile
from pathlib import Path

source, dest = Path(sys.argv[1]), Path(sys.argv[2])
DROP = re.compile(
    r"^ray/(jars/|dashboard/client/|serve/|rllib/|tune/|train/|data/|air/|llm/|workflow/|"
    r"autoscaler/_private/(aws|gcp|azure|aliyun|vsphere|spark)/|tests/|.*/tests/)"
)
STRIP = {"ray/_raylet.so", "ray/core/src/ray/raylet/raylet", "ray/core/src/ray/gcs/gcs_server"}
out = dest / source.name
kept = dropped = 0
with zipfile.ZipFile(source) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
    record_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
    record = []
    for info in zin.infolist():
        if info.filename == record_name:
            continue
        if DROP.match(info.filename):
            dropped += info.file_size
            continue
        data = zin.read(info)
        if info.filename in STRIP:
            with tempfile.NamedTemporaryFile(delete=False) as tmp:
                tmp.write(data)
            subprocess.run(["strip", "--strip-unneeded", tmp.name], check=True)
            data = Path(tmp.name).read_bytes()
            os.unlink(tmp.name)
        zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{info.filename},sha256={digest},{len(data)}")
        kept += len(data)
    record.append(f"{record_name},,")
    zout.writestr(zin.getinfo(record_name), "\n".join(record) + "\n")
print(f"{out}: {out.stat().st_size / 1e6:.1f} MB (from {source.stat().st_size / 1e6:.1f} MB; "
      f"{dropped / 1e6:.0f} MB of files dropped, {kept / 1e6:.0f} MB kept, uncompressed)")
PY
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
