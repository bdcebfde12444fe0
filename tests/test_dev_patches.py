"""The experiments' patches under dev/*/variants: each applies to include/ as it is, or records the commit it was made
on (its first line, ``base: COMMIT``) and applies there, so that every variant a results file names can be rebuilt."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dev.tune_kernels import patch_base, patched_include

ROOT = Path(__file__).resolve().parents[1]
PATCHES = sorted((ROOT / "dev").glob("*/variants/*.patch"))


def test_the_experiments_patches_are_found():
    assert len(PATCHES) > 40


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_each_patch_applies_here_or_records_its_base(patch):
    base = patch_base(patch)
    if base is None:
        name, include = patched_include(patch)
        assert name == patch.stem and (include / "oasr").is_dir()
        return
    # A base only where it is needed, and the refusal here names it.
    with pytest.raises(ValueError, match=f"does not apply \\(it was made on {base}"):
        patched_include(patch)
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{base}^{{commit}}"], capture_output=True)
    if known.returncode != 0:
        pytest.skip(f"{base} is not in this clone's history (a shallow clone)")
    _, include = patched_include(patch, base)
    assert (include / "oasr").is_dir()
