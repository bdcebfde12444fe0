#!/usr/bin/env python3
"""Writes the family notebooks from one template, so they share one structure.

    python notebooks/generate.py          # rewrite notebooks/NN_family.ipynb
    python notebooks/generate.py --check  # exit 1 if a committed notebook differs

Family-specific text lives in the family's page (profiling/workbench/pages.py), a model's in its model page; the
cells call profiling.workbench.notebook (a family) or profiling.workbench.model (a model) and hold no logic of their
own. The opening and the summary cells are one builder's for both kinds. Notebooks are written without outputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from profiling import commands  # noqa: E402  (after the checkout is on the path)

if __name__ == "__main__":
    commands.starting(commands.generate_parser())  # --help and usage errors before the imports below load torch

import nbformat  # noqa: E402

from profiling.workbench.pages import MODEL_PAGES, PAGES, ModelPage, Page  # noqa: E402

md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
REPLAYED = (
    "Without one, tables and plots are **replayed** from recordings made on an H200, and the banner says so. The "
    "logic lives in `profiling/` and `oasr/`; these cells only call it."
)


def header_cells(page: Page | ModelPage, steps: str, live: str, imports: str, workbench: str) -> list:
    """Every notebook's opening: its title and paragraph, what it shows (``steps``), live or replayed (``live``: the
    sentence before :data:`REPLAYED`), then the cell that makes ``wb`` (``imports``, ``workbench``) and shows the
    banner and the environment."""
    return [
        md(f"# {page.title}\n\n{page.summary}\n\n{steps}\n\n{live} {REPLAYED}"),
        code(f"%matplotlib inline\n{imports}\n\n{workbench}\ndisplay(wb.banner())\nwb.environment()"),
    ]


def summary_cells(page: Page | ModelPage) -> list:
    """Every notebook's end: ``wb``'s headlines, written for the report index."""
    return [
        md(
            "## Summary\n\n"
            "Headline figures for the report index. The main command "
            "(`bash scripts/make_reports.sh`) runs this notebook headless and writes "
            f"`reports/<gpu>/{page.notebook}.html` live on a GPU, or "
            f"`reports/replay/<gpu>/{page.notebook}.html` (git-ignored) when it replays."
        ),
        code('print("\\n".join(wb.headlines))\nwb.write_summary()'),
    ]


def family_cells(page: Page) -> list:
    """A kernel family's notebook (:class:`~profiling.workbench.notebook.Workbench`)."""
    opening = header_cells(
        page,
        "This notebook shows the CUDA source, JIT-compiles it in the session, checks it "
        "next to PyTorch, times it against torch and the measured copy ceiling, profiles a "
        "sweep under Nsight Compute, reads the report into pandas and places every launch "
        "on the roofline; a panel sweeps sizes and dtypes.",
        "On a machine with an NVIDIA GPU every step runs live (profiles run in a worker process under `ncu`).",
        "from IPython.display import Markdown, display\n\n"
        "from oasr.jit.families import family_named\n"
        "from profiling.workbench.notebook import Workbench\n"
        "from profiling.workbench.panel import SweepPanel",
        f'wb = Workbench(family_named("{page.family.name}"))',
    )
    return [
        *opening,
        md(f"## The kernel\n\n{page.design}"),
        code("wb.kernel_source()"),
        md(
            "JIT-compile it here (nvcc + ninja, cached by content: a second run is a cache "
            "hit; editing any header under `include/` or `csrc/` rebuilds)."
        ),
        code("wb.build()"),
        md(
            "## Correctness\n\n"
            "Each backend against a float64 reference on fresh random data, outputs poisoned "
            "with NaN before the launch. The tolerance applied (rtol, atol per dtype) is in "
            "each row."
        ),
        code("wb.correctness()"),
        md(
            "## Timing\n\n"
            "Median per-launch time from CUDA-graph replay (device time), inputs rotated so that small "
            "sizes do not measure a warm L2, and the eager latency: host wall time per call made "
            "back to back outside a graph (Python, checks and launch included). Bandwidth counts the "
            "bytes the op must move, compared with the device-to-device copy bandwidth measured in the "
            "same run."
        ),
        code(
            "timing = wb.timing()\n"
            'times = ["seconds", "eager_seconds", "bandwidth_bytes_per_s", "pct_of_copy", "iqr_rel"]\n'
            'timing[["op", "backend", "config", "dtype", "bytes", *times]]'
        ),
        code("wb.speedup_table(timing)"),
        code("wb.bandwidth_plot(timing)"),
        md(
            "## Nsight Compute\n\n"
            "One `ncu` process profiles each op's sweep, both backends, each launch inside its "
            "own NVTX range (`oasr@<op>:<backend>:<config>`), with an explicit metric list "
            "(`roofline` preset) and `--clock-control none`. Profiles are cached by GPU, kernel "
            "sources, config and preset. Below: the launches with the counters' bytes and FLOP "
            "next to the work each op must do, the roofline (ceilings from the report's peaks "
            "and clocks, plus the measured copy and cuBLAS rates), the hierarchical view of the "
            "largest oasr launch, and Nsight Compute's own advice."
        ),
        code(
            "results = {op: wb.profile(op) for op in wb.op_names}\n"
            "for result in results.values():\n"
            "    print(result.summary())"
        ),
        code(
            "for op, result in results.items():\n"
            '    display(Markdown(f"### {op}"))\n'
            "    display(wb.launch_table(result))\n"
            "    display(wb.roofline_plot(result))\n"
            "    display(wb.hierarchical_plot(result))\n"
            "    display(wb.advice(result))"
        ),
        md(
            "## What limits each kernel\n\n"
            "One sentence per launch from its counters (`profiling/analysis/limiter.py`): the busiest unit "
            "(DRAM, L2, L1/shared, FMA, the tensor pipe against its dense peak, issue) when it is at 40% of "
            "its peak or more, else launch- or latency/occupancy-bound, with the figure that says so, next "
            "to the titles of Nsight Compute's own advice."
        ),
        code('for op, result in results.items():\n    display(Markdown(f"### {op}"))\n    display(wb.limits(result))'),
        md(
            "## Source-line hotspots\n\n"
            "The largest config's oasr kernel under the `source` preset (ncu's `SourceCounters` and "
            "`WarpStateStats`, kernels built with `-lineinfo`, sources imported into the report): what "
            "limits it with its largest stall reason, the source lines with most warp samples and their "
            "stall reasons, and the kernel source with a heat bar per line. Replay reads the per-line "
            "table committed beside the recording."
        ),
        code("for op in wb.op_names:\n    display(wb.hotspots(op))"),
        md(
            "## Comparing revisions\n\n"
            "The oasr kernel at the last commit against the working tree (edit a header, rerun this cell), "
            "both built from their own sources and timed in turn: per config both times, the ratio, and a "
            "verdict (faster / slower / same / insufficient data) drawn from the two distributions of per-replay "
            "samples, not from two medians (`profiling/compare.py`; `python -m profiling.compare --op OP --base REV` "
            "on the command line). A replay compares the samples recorded for this tree's kernel sources with those "
            "of the revision timed against them (`bash scripts/h200_session.sh compare` on the H200). The plot "
            "shows the ratio per config with its bootstrap interval over its 1 +- threshold band: a bar inside "
            'its band is "same", one reaching past it without a verdict is "insufficient data".'
        ),
        code("comparison = wb.compare()\ndisplay(comparison)\nwb.compare_plot(comparison)"),
        md(
            "## Sweep panel\n\n"
            "Pick an op, size, dtype, backends and metric preset, press **Run**. Runs "
            "accumulate in the table so that a kernel can be compared before and after an edit "
            "(a live run rebuilds a kernel whose sources changed). In a static HTML report the "
            "controls do not run."
        ),
        code("panel = SweepPanel(wb)\npanel.widget"),
        *summary_cells(page),
    ]


def model_cells(page: ModelPage) -> list:
    """A model's notebook (:class:`~profiling.workbench.model.ModelWorkbench`): the encoder of one configuration."""
    opening = header_cells(
        page,
        "This notebook builds the encoder, checks it layer by layer against its float64 torch reference, times it "
        "against torch eager, torch in CUDA graphs and `torch.compile`, shows where one layer's time goes per op, and "
        "sweeps batch, duration and configuration in a panel.",
        "On a machine with an NVIDIA GPU every step runs live, on the configuration chosen below "
        "(`benchmarks/encoder.py` runs the same functions and records them: `bash scripts/h200_session.sh encoder`).",
        "from IPython.display import display\n\nfrom profiling.workbench.model import EncoderPanel, ModelWorkbench",
        'CONFIG = "wenet"  # or "conformer-l": the configuration built, checked and timed live\n'
        "wb = ModelWorkbench(CONFIG)",
    )
    return [
        *opening,
        md(f"## The encoder\n\n{page.design}"),
        code("wb.build()"),
        md(
            "## Correctness, layer by layer\n\n"
            "The oasr encoder in bfloat16 against the float64 reference on the same weights, on a padded batch of four "
            "utterances (one of them a single output frame): the front end, then each layer on the same input (the "
            "reference's previous output, rounded to bfloat16), then the whole encoder. Errors are over the valid "
            "frames; beside them, the reference's own error in bfloat16 (torch's rounding), the scale to judge by."
        ),
        code("wb.correctness()"),
        md(
            "## Speed against torch\n\n"
            "Each workload of the issue (16 utterances of 8-15 s, 64 of 2.5 s, one of 60 s) on every backend: the oasr "
            "encoder eager, in a CUDA graph and through its bucketed runner (`encoder.graphed`), against the reference "
            "module eager, in a CUDA graph and through `torch.compile`. Time per encoder call (eager rows: CUDA events "
            "around each call, the host's launches included; graph rows: graph replays), RTFx (seconds of audio per "
            "second of encoder time) and the speedups over torch eager, torch in a graph and `torch.compile` timed the "
            "same way."
        ),
        code("wb.speed_table()"),
        md(
            "## Where a layer's time goes\n\n"
            "The first layer traced into one graph (dynamo, as `torch.compile` does); every op that computes is timed "
            "alone on its real inputs in a CUDA graph, and the calls of an op are summed. Beneath the table, the ops' "
            "sum next to the whole layer in one graph."
        ),
        code("wb.breakdown_table()"),
        code("wb.breakdown_plot()"),
        md(
            "## Per kernel\n\n"
            "One layer of this configuration's width and kernel size, oasr's and torch's, each call profiled whole by "
            "one `ncu` run (`profiling/nsight/region.py`): every kernel with the op that launched it, its time and "
            "share, what limits it; where the time goes against the call's wall time under ncu, every kernel on the "
            "roofline sized by its share, and the two layers side by side (kernel count, time, top kernels)."
        ),
        code("wb.layer_profile()"),
        md(
            "## Timeline and gaps\n\n"
            "One eager call of each layer traced with torch.profiler (CUPTI): its kernels along time, and the idle "
            "gaps between them summed against the call's time, the launch-bound share a CUDA graph removes. The "
            "Chrome trace is saved beside the report (open it in Perfetto or chrome://tracing)."
        ),
        code("wb.layer_timeline()"),
        md(
            "## Panel\n\n"
            "Pick a configuration, a batch and a duration, press **Run**: live, every backend is timed on that many "
            "utterances of that length (`torch.compile` when ticked: slow to build); in replay, the recorded rows of "
            "that setting. Runs accumulate in the table. In a static HTML report the controls do not run."
        ),
        code("panel = EncoderPanel(wb)\npanel.widget"),
        *summary_cells(page),
    ]


def build(page: Page | ModelPage) -> nbformat.NotebookNode:
    """The notebook of a family's or a model's page, without outputs."""
    cells = model_cells(page) if isinstance(page, ModelPage) else family_cells(page)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    for index, cell in enumerate(notebook.cells):
        cell["id"] = str(index)  # the ids nbstripout writes: stable, so diffs and --check stay quiet
    return notebook


def main() -> int:
    args = commands.generate_parser().parse_args()
    stale = []
    for page in (*PAGES, *MODEL_PAGES):
        path = HERE / f"{page.notebook}.ipynb"
        text = nbformat.writes(build(page)) + "\n"
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date (run python notebooks/generate.py): {', '.join(stale)}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    commands.started()
    sys.exit(main())
