# Sourced by the H200 scripts, from the repo root: installs the carried wheels (.whl/ from
# ../shared/device/fetch-wheels.sh, or the folder named by $1) into .site/, and puts .site/ (also one a
# warm machine kept from an earlier call) and the repo on the paths.
wheels=${1:-.whl}
if [ -d "$wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site "$wheels"/*.whl \
    || exit 1
fi
if [ -d .site ]; then
  export PYTHONPATH=$PWD:$PWD/.site${PYTHONPATH:+:$PYTHONPATH} PATH=$PWD/.site/bin:$PATH
  export JUPYTER_PATH=$PWD/.site/share/jupyter
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
# One JIT cache for the whole device run: the steps prebuild into it and the suite, which otherwise builds in a
# session folder of its own (tests/conftest.py), builds nothing twice.
export OASR_JIT_DIR=${OASR_JIT_DIR:-$HOME/.cache/oasr/jit}
