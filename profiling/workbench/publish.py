"""The main command: run every notebook headless, export HTML reports and the index.

``python -m profiling.workbench.publish`` (the main command) executes each ``notebooks/NN_family.ipynb`` with
nbclient (live on a GPU machine, from recordings otherwise: each notebook decides
through :mod:`profiling.workbench.tables`), writes ``reports/<gpu>/NN_family.html`` and a
``NN_family.no-input.html`` variant with the code hidden, then
``reports/index.html`` listing every report with its headline figures and
provenance. A failing notebook is named with its cell and error; the others
still run, and the command exits non-zero.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from nbconvert import HTMLExporter
from tqdm.auto import tqdm

from ..files import atomic_write_text, reports_root
from ..provenance import REPO_ROOT
from .tables import report_gpu_slug

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
CELL_TIMEOUT_S = 600


@dataclass
class NotebookRun:
    notebook: Path
    seconds: float
    error: str | None = None
    html: Path | None = None
    summary: dict | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _summary_path(gpu_slug: str, stem: str) -> Path:
    return reports_root() / gpu_slug / f"{stem}.summary.json"


def execute_notebook(path: Path, progress: object | None = None) -> tuple[object, str | None]:
    """Run a notebook in its folder; return it (outputs filled) and an error line or None."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
    )
    if progress is not None:
        client.on_cell_executed = lambda **_: progress.update(1)
    try:
        client.execute()
    except CellExecutionError as exc:
        return notebook, _cell_error(notebook, exc)
    except (CellTimeoutError, DeadKernelError) as exc:
        return notebook, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return notebook, None


def _cell_error(notebook: object, exc: Exception) -> str:
    for index, cell in enumerate(notebook.cells):  # type: ignore[attr-defined]
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"cell {index}: {output['ename']}: {output['evalue']}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[-1]}"


def export_html(notebook: object, destination: Path, exclude_input: bool = False) -> Path:
    """HTML with figures as inline PNG and tables as HTML; saved widget state renders as static
    controls through the widget renderer vendored in ``reports/assets/`` (no CDN needed)."""
    assets = os.path.relpath(reports_root() / "assets", destination.parent)
    exporter = HTMLExporter(
        template_name="lab",
        embed_images=True,
        exclude_input=exclude_input,
        widget_renderer_url=f"{assets}/embed-amd.js",
        require_js_url=f"{assets}/require.js",
    )
    body, _ = exporter.from_notebook_node(notebook)
    destination.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(destination, body)
    return destination


def run_notebooks(paths: Sequence[Path], gpu_slug: str) -> list[NotebookRun]:
    runs = []
    total_cells = sum(_count_code_cells(p) for p in paths)
    with tqdm(total=total_cells, desc="notebooks", unit="cell", file=sys.stderr) as bar:
        for path in paths:
            bar.set_postfix_str(path.name)
            start = time.perf_counter()
            notebook, error = execute_notebook(path, progress=bar)
            run = NotebookRun(path, time.perf_counter() - start, error)
            out_dir = reports_root() / gpu_slug
            run.html = export_html(notebook, out_dir / f"{path.stem}.html")
            export_html(notebook, out_dir / f"{path.stem}.no-input.html", exclude_input=True)
            summary = _summary_path(gpu_slug, path.stem)
            if summary.is_file():
                run.summary = json.loads(summary.read_text())
            runs.append(run)
    return runs


def _count_code_cells(path: Path) -> int:
    cells = json.loads(path.read_text())["cells"]
    return sum(cell["cell_type"] == "code" for cell in cells)


def write_index() -> Path:
    """``reports/index.html``: every report found under ``reports/<gpu>/``, with headlines."""
    root = reports_root()
    rows = []
    for summary_path in sorted(root.glob("*/*.summary.json")):
        summary = json.loads(summary_path.read_text())
        report = summary_path.with_name(summary_path.name.replace(".summary.json", ".html"))
        headline = "".join(f"<li>{html.escape(str(line))}</li>" for line in summary.get("headline", []))
        provenance = summary.get("provenance", {})
        rows.append(
            "<tr>"
            f"<td><a href='{report.relative_to(root)}'>{html.escape(summary.get('title', report.stem))}</a>"
            f" (<a href='{report.with_suffix('').relative_to(root)}.no-input.html'>no code</a>)</td>"
            f"<td>{html.escape(summary.get('mode', ''))}</td>"
            f"<td><ul>{headline}</ul></td>"
            f"<td>{html.escape(provenance.get('gpu', ''))}, driver {html.escape(provenance.get('driver', ''))},"
            f" CUDA {html.escape(provenance.get('cuda_runtime', ''))}, commit"
            f" {html.escape(provenance.get('git_commit', ''))}, {html.escape(provenance.get('date', ''))}</td>"
            "</tr>"
        )
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Oasr reports</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.4em;vertical-align:top}}</style></head>
<body><h1>Oasr workbench reports</h1>
<p>One report per kernel family. "replayed" reports were rendered from recordings
made on the GPU named in their provenance; "live" ones ran on it.</p>
<table><tr><th>report</th><th>mode</th><th>headline</th><th>provenance</th></tr>
{"".join(rows)}
</table></body></html>
"""
    index = root / "index.html"
    atomic_write_text(index, page)
    return index


def _print_summary(runs: Sequence[NotebookRun], index: Path) -> None:
    print(f"\n{'notebook':<24} {'status':<8} {'mode':<9} {'seconds':>8}  report")
    for run in runs:
        mode = (run.summary or {}).get("mode", "?")
        status = "ok" if run.ok else "FAILED"
        print(f"{run.notebook.name:<24} {status:<8} {mode:<9} {run.seconds:8.1f}  {run.html}")
    for run in runs:
        if not run.ok:
            print(f"  {run.notebook.name}: {run.error}")
    print(f"\nindex: {index}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m profiling.workbench.publish", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: notebooks/*.ipynb)")
    args = parser.parse_args(argv)

    paths = [p.resolve() for p in args.notebooks] or sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    os.environ.setdefault("PYTHONPATH", str(REPO_ROOT))
    runs = run_notebooks(paths, report_gpu_slug())
    index = write_index()
    _print_summary(runs, index)
    return 0 if all(run.ok for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
