"""The ~10% slower scale of ``scale_slow.cuh`` as a compare state: a copy of ``include/`` and ``csrc/``
with that header in place of ``include/oasr/scale.cuh``, built like any revision by
:func:`profiling.compare.build_state` (content-keyed: built once)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from oasr.jit.families import SCALE
from profiling.compare import State, state_hash
from profiling.provenance import REPO_ROOT

HERE = Path(__file__).resolve().parent


def slowed_state(name: str = "scale_slow10") -> State:
    """A checkout-like folder under the temp dir holding the slowed scale, as a :class:`State`."""
    root = Path(tempfile.gettempdir()) / "oasr-compare-states" / name
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO_ROOT / "include", root / "include")
    shutil.copytree(REPO_ROOT / "csrc", root / "csrc")
    shutil.copyfile(HERE / "scale_slow.cuh", root / "include" / "oasr" / "scale.cuh")
    return State(name, root, state_hash(SCALE, root))
