"""Committed notebooks: generated from notebooks/generate.py and stored without outputs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from oasr.jit.families import FAMILIES, family_named
from profiling.workbench.pages import MODEL_PAGES, PAGES, page_of

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def test_every_family_and_model_has_one_page_and_a_notebook():
    assert [page.family for page in PAGES] == list(FAMILIES)
    assert [p.stem for p in PATHS] == [page.notebook for page in (*PAGES, *MODEL_PAGES)]
    with pytest.raises(ValueError, match="no notebook page"):
        page_of(dataclasses.replace(FAMILIES[0], name="nope"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.family.name)
def test_each_notebook_opens_the_workbench_of_its_family(page):
    cells = json.loads((NOTEBOOKS / f"{page.notebook}.ipynb").read_text())["cells"]
    sources = ["".join(cell["source"]) for cell in cells]
    (opening,) = [s for s in sources if "Workbench(" in s]
    name = opening.split('Workbench(family_named("', 1)[1].split('")', 1)[0]
    assert family_named(name) is page.family
    assert sources[0].startswith(f"# {page.title}") and any("SweepPanel(wb)" in s for s in sources)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    cells = json.loads(path.read_text())["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)


def test_notebooks_match_their_generator():
    result = subprocess.run([sys.executable, str(NOTEBOOKS / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("page", MODEL_PAGES, ids=lambda p: p.notebook)
def test_a_model_notebook_opens_its_workbench_and_shares_the_family_notebooks_opening_and_summary(page):
    cells = json.loads((NOTEBOOKS / f"{page.notebook}.ipynb").read_text())["cells"]
    sources = ["".join(cell["source"]) for cell in cells]
    family = ["".join(cell["source"]) for cell in json.loads(PATHS[0].read_text())["cells"]]
    assert sources[0].startswith(f"# {page.title}") and 'CONFIG = "wenet"' in sources[1]
    assert "wb = ModelWorkbench(CONFIG)" in sources[1] and any("EncoderPanel(wb)" in s for s in sources)
    assert sources[-1] == family[-1] and sources[1].endswith("display(wb.banner())\nwb.environment()")
    assert sources[0].endswith(family[0][-120:])  # the replay paragraph: one source for both kinds
    per_kernel = sources.index(next(s for s in sources if s.startswith("## Per kernel")))
    assert sources[per_kernel + 1] == "wb.layer_profile()"  # the whole-layer profile of both layers
