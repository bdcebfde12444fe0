"""Committed notebooks: generated from notebooks/generate.py and stored without outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oasr.jit import families
from oasr.jit.families import FAMILIES

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def test_every_family_has_a_notebook():
    assert [p.stem for p in PATHS] == [family.notebook for family in FAMILIES]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_each_notebook_opens_the_workbench_of_its_family(family):
    cells = json.loads((NOTEBOOKS / f"{family.notebook}.ipynb").read_text())["cells"]
    sources = ["".join(cell["source"]) for cell in cells]
    (opening,) = [s for s in sources if "Workbench(" in s]
    name = opening.split("Workbench(families.", 1)[1].split(")", 1)[0]
    assert getattr(families, name) is family
    assert sources[0].startswith(f"# {family.title}") and any("SweepPanel(wb)" in s for s in sources)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    cells = json.loads(path.read_text())["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)


def test_notebooks_match_their_generator():
    result = subprocess.run([sys.executable, str(NOTEBOOKS / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
