#!/usr/bin/env bash
# Installs what Oasr's commands need into the current Python: torch (if absent), then
# the package itself, editable, with the extras named in $1 (default: dev).
# Prints one line per step; skips pip entirely when everything is already installed
# at the versions pyproject.toml asks for (OASR_BOOTSTRAP_FORCE=1 reinstalls anyway).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
start=$SECONDS
say() { echo "bootstrap: $*"; }

python3 -m pip --version >/dev/null 2>&1 || { echo "bootstrap: python3 with pip is required" >&2; exit 1; }
say "$(python3 -c 'import sys; print(f"Python {sys.version.split()[0]} at {sys.executable}")')"

# pip's own lines, less the "already satisfied" ones (hundreds, saying nothing); the
# pipe keeps pip's exit status (pipefail).
quiet="^(Requirement already satisfied|  Preparing|  Getting requirements|  Checking if build backend|WARNING: Location '.*' is ignored)"
pip_install() {
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
    | { grep --line-buffered -v -E "$quiet" || [ $? -eq 1 ]; } \
    | sed -u 's/^/  pip: /'
}

if torch_version=$(python3 -c "from importlib.metadata import version; print(version('torch'))" 2>/dev/null); then
  say "torch $torch_version: installed"
else
  # 2.13.0 is the release this project is tested with; on CPU-only machines the
  # local wheel cache provides its CPU build, on GPU machines PyPI's CUDA build.
  say "installing torch==2.13.0 (the CPU wheel from the local cache here; PyPI's CUDA build on a GPU machine)"
  pip_install "torch==2.13.0"
fi

# Is oasr installed editable from this checkout, and is every requirement of its
# dependencies and the extras (followed through oasr[...] self-references) present
# at a version pyproject.toml admits? Prints what is not, one per line.
check_installed() {
  python3 - "$extras" <<'EOF'
import json
import os
import sys

# Not the checkout itself: an oasr.egg-info left in it would pass for the installed package.
sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
from importlib import metadata
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # pip vendors it
    from pip._vendor.packaging.requirements import Requirement
try:
    import tomllib
except ImportError:  # Python 3.10
    try:
        import tomli as tomllib
    except ImportError:
        print("no TOML reader (Python 3.10 without tomli): cannot check, installing")
        sys.exit(1)

project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
problems = []
try:
    dist = metadata.distribution(project["name"])
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    here = Path.cwd().resolve().as_uri()
    if dist.version != project["version"]:
        problems.append(f"{project['name']} {dist.version} installed, {project['version']} here")
    if direct.get("url", "").rstrip("/") != here or not direct.get("dir_info", {}).get("editable"):
        problems.append(f"{project['name']} is not installed editable from {Path.cwd()}")
except metadata.PackageNotFoundError:
    problems.append(f"{project['name']} is not installed")

seen, todo, wanted = set(), [None, *sys.argv[1].split(",")], []
while todo:
    extra = todo.pop()
    if extra in seen:
        continue
    seen.add(extra)
    texts = project["dependencies"] if extra is None else project["optional-dependencies"].get(extra)
    if texts is None:
        problems.append(f"no extra {extra!r} in pyproject.toml")
        continue
    for text in texts:
        req = Requirement(text)
        if req.name == project["name"]:
            todo.extend(req.extras)
        elif req.marker is None or req.marker.evaluate({"extra": extra or ""}):
            wanted.append(req)
for req in wanted:
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        problems.append(f"{req.name} is not installed (wanted {req.specifier or 'any version'})")
        continue
    if not req.specifier.contains(version, prereleases=True):
        problems.append(f"{req.name} {version} installed, wanted {req.specifier}")
for line in problems:
    print(line)
if not problems:
    print(f"{len(wanted)} requirements")
sys.exit(1 if problems else 0)
EOF
}

if [ "${OASR_BOOTSTRAP_FORCE:-0}" = "0" ] && summary=$(check_installed); then
  say "oasr[$extras] is installed editable from here with all $summary at the wanted versions: nothing to install"
else
  if [ "${OASR_BOOTSTRAP_FORCE:-0}" = "0" ]; then
    say "to install:"
    sed 's/^/  - /' <<<"${summary:-}"
  fi
  say "pip install -e \".[$extras]\" (can take a minute; pip's lines follow)"
  pip_install -e ".[$extras]"
fi
say "done in $((SECONDS - start)) s"
