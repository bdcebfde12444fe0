# Sourced by the H200 scripts, from the repo root: installs the carried wheels (.whl/ from
# ../shared/device/fetch-wheels.sh, or the folder named by $1) outside the tree, where a warm machine keeps them for
# the next call (the tree itself is copied afresh each call), and puts them and the repo on the paths.
wheels=${1:-.whl}
site=${OASR_DEVICE_SITE:-/tmp/oasr-site}
if [ -d "$wheels" ]; then
  stamp="$site/.wheels-$(ls "$wheels" | md5sum | cut -c1-12)"
  if [ ! -f "$stamp" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
      "$wheels"/*.whl || exit 1
    touch "$stamp"
  fi
fi
if [ -d "$site" ]; then
  export PYTHONPATH=$PWD:$site${PYTHONPATH:+:$PYTHONPATH} PATH=$site/bin:$PATH
  export JUPYTER_PATH=$site/share/jupyter
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
# One JIT cache for the whole device run: the steps prebuild into it and the suite, which otherwise builds in a
# session folder of its own (tests/conftest.py), builds nothing twice.
export OASR_JIT_DIR=${OASR_JIT_DIR:-$HOME/.cache/oasr/jit}
