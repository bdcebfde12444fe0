"""The main command: run every notebook headless, export HTML reports and the index.

``python -m profiling.workbench.publish`` (the main command) executes each ``notebooks/NN_family.ipynb`` with
nbclient (live on a GPU machine, from recordings otherwise: each notebook decides
through :mod:`profiling.workbench.tables`), writes ``NN_family.html`` and a
``NN_family.no-input.html`` variant without code, then an ``index.html`` listing
every report with its headline figures and provenance.

Where: live on a GPU, ``reports/<gpu>/`` and ``reports/index.html``, the committed
source. In replay (no GPU), ``reports/replay/<gpu>/`` and ``reports/replay/index.html``,
git-ignored: replay never rewrites a committed file. The command prints where they went.

On a machine with several GPUs (live), notebooks run in parallel, one per GPU: each
notebook's kernel sees only its GPU (``CUDA_VISIBLE_DEVICES``); ``--gpus`` chooses
them (``all``, a count, ids; ``--gpus 1`` runs one after the other). In replay,
``--jobs N`` runs N notebooks at a time (default one after the other).

A failing notebook is named with its cell and error, its index row says so (its
HTML is the partial run); the others still run, and the command exits 1. Ctrl-C
interrupts the running cell and stops: the reports that finished are kept, the
index lists them, and the command exits 130 with one line.

The HTML works offline: no CDN script (the widget renderer and require.js are
vendored in ``reports/assets/``; MathJax and mermaid, which no notebook uses, are
left out), each page titled after its family with a link back to its index.
"""

from __future__ import annotations

from .. import commands

if __name__ == "__main__":
    commands.starting(commands.publish_parser())  # --help, usage errors and an early Ctrl-C before torch loads

import asyncio
import copy
import html
import json
import os
import queue
import re
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from jinja2 import DictLoader
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from nbconvert import HTMLExporter
from tqdm.auto import tqdm

from .. import provenance
from ..files import REPLAY_DIR, atomic_write_text, reports_root, shown_path
from ..harness import device_state
from ..provenance import REPO_ROOT
from ..scaleout.gpus import discover, resolve
from .pages import MODEL_PAGES, PAGES
from .tables import LIVE, output_dir, output_root, report_gpu_slug, summary_path, workbench_mode

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
CELL_TIMEOUT_S = 600
EXIT_INTERRUPTED = commands.EXIT_INTERRUPTED

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# nbconvert's "lab" template, offline: no MathJax or mermaid from a CDN, no favicon request, widgets in the
# UI font, and a bar with the way back to the index (``resources["oasr_nav"]``, built escaped).
_TEMPLATE = "oasr_report.html.j2"
_TEMPLATE_SOURCE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block extra_css %}
<link rel="icon" href="data:,">
<style type="text/css">
.jupyter-widgets, .jupyter-widgets button, .jupyter-widgets input, .jupyter-widgets select,
.jupyter-widgets textarea, .widget-label, .widget-readout, .widget-html-content {
  font-family: var(--jp-ui-font-family);
}
nav.oasr-nav {
  font-family: var(--jp-ui-font-family); font-size: var(--jp-ui-font-size1);
  padding: .5em 1em; border-bottom: 1px solid var(--jp-border-color2); margin-bottom: .5em;
}
nav.oasr-nav a { margin-right: 1.5em; }
</style>
{% endblock extra_css %}
{%- block body_header -%}
{{ super() }}
{{ resources.oasr_nav }}
{%- endblock body_header -%}
"""


@dataclass
class NotebookRun:
    notebook: Path
    seconds: float
    error: str | None = None
    html: Path | None = None
    summary: dict | None = None
    gpu: str | None = None
    """The device id it ran on, when notebooks ran one per GPU."""

    @property
    def ok(self) -> bool:
        return self.error is None


class Interrupt:
    """Ctrl-C while notebooks run (installed as the SIGINT handler by :func:`main`).

    The first interrupts the running cell (as JupyterLab's interrupt does) and asks the
    command to stop after it; the second shuts the kernel down; a third raises
    ``KeyboardInterrupt``. nbclient runs in a worker thread, so it installs no handler of
    its own and never sees the signal.
    """

    def __init__(self) -> None:
        self.count = 0
        self._kernels: dict[object, tuple[asyncio.AbstractEventLoop, Any]] = {}
        """The running notebooks' kernels (several when notebooks run in parallel, one per GPU)."""

    @property
    def requested(self) -> bool:
        return self.count > 0

    def attach(self, loop: asyncio.AbstractEventLoop, kernel_manager: Any, key: object = None) -> None:
        self._kernels[key] = (loop, kernel_manager)

    def detach(self, key: object = None) -> None:
        self._kernels.pop(key, None)

    def __call__(self, signum: int | None = None, frame: object = None) -> None:
        self.count += 1
        if self.count > 2:
            raise KeyboardInterrupt
        # between notebooks or before a kernel started, none is attached: the next cell does not start
        for loop, manager in list(self._kernels.values()):
            action = manager.interrupt_kernel() if self.count == 1 else manager.shutdown_kernel(now=True)
            try:
                asyncio.run_coroutine_threadsafe(action, loop)
            except RuntimeError:  # the loop has closed: the notebook has ended anyway
                action.close()


class _Stopped(Exception):
    """Raised in nbclient's cell hook after Ctrl-C: no further cell starts."""


def execute_notebook(
    path: Path, progress: object | None = None, interrupt: Interrupt | None = None, gpu: str | None = None
) -> tuple[Any, str | None]:
    """Run a notebook in its folder; return it (outputs filled) and an error line or None.

    ``gpu``: the device id its kernel may use (its only ``CUDA_VISIBLE_DEVICES``); None: all of this process's.
    """
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        # the kernel's own log (e.g. "running over TCP without encryption") would cut into the progress bar
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )

    key = object()

    def started(**_: Any) -> None:
        if interrupt is not None:
            interrupt.attach(asyncio.get_running_loop(), client.km, key)

    def before_cell(**_: Any) -> None:
        if interrupt is not None and interrupt.requested:
            raise _Stopped

    client.on_notebook_start = started
    client.on_cell_execute = before_cell
    if progress is not None:
        client.on_cell_executed = lambda **_: progress.update(1)  # type: ignore[attr-defined]

    outcome: dict[str, BaseException] = {}
    kernel_env = None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}

    def work() -> None:
        try:
            client.execute(**({} if kernel_env is None else {"env": kernel_env}))
        except BaseException as exc:  # handed to the main thread below
            outcome["error"] = exc

    worker = threading.Thread(target=work, name=f"nbclient {path.name}", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)  # the main thread stays free for the SIGINT handler
    finally:
        if interrupt is not None:
            interrupt.detach(key)
    exc = outcome.get("error")
    if exc is None:
        return notebook, None
    if isinstance(exc, CellExecutionError):
        return notebook, _cell_error(notebook, exc)
    if isinstance(exc, (CellTimeoutError, DeadKernelError)):
        return notebook, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if isinstance(exc, _Stopped) or (interrupt is not None and interrupt.requested):
        return notebook, "interrupted"
    raise exc


def _cell_error(notebook: Any, exc: Exception) -> str:
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"cell {index}: {output['ename']}: {output['evalue']}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[-1]}"


def report_title(path: Path, notebook: Any | None = None) -> str:
    """The page's title for ``NN_family.ipynb`` (a family's or a model's); else the notebook's first heading; else its
    name."""
    for page in (*PAGES, *MODEL_PAGES):
        if page.notebook == path.stem:
            return page.title
    for cell in getattr(notebook, "cells", []):
        if cell.get("cell_type") == "markdown":
            for line in cell.get("source", "").splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return path.stem


def _plain(title: str) -> str:
    """A title without Markdown's inline-code backticks (for ``<title>``)."""
    return title.replace("`", "")


def _with_inline_code(text: str) -> str:
    """Escape ``text`` for HTML, then show its `backticked` parts as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _href(path: str | os.PathLike[str]) -> str:
    """A relative link, URL-quoted and escaped for an HTML attribute."""
    return html.escape(urllib.parse.quote(Path(path).as_posix()), quote=True)


def _without_widget_icons(notebook: Any) -> None:
    """Drop icons from the saved widget state: the static renderer has no icon font (its
    font URLs do not resolve from a file:// page), which would draw a missing-glyph box."""
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for model in state.values():
        if model.get("state", {}).get("icon"):
            model["state"]["icon"] = ""


def _without_source_outputs(notebook: Any, with_code: str) -> None:
    """In the variant without code, outputs that are source code (Markdown with a fenced
    block, e.g. the kernel headers) become one line pointing to the report with code."""
    note = nbformat.v4.new_output(
        "display_data",
        data={"text/markdown": f"*Source code: in [the report with code]({urllib.parse.quote(with_code)}).*"},
    )
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        outputs = [o for o in cell.get("outputs", []) if "```" not in o.get("data", {}).get("text/markdown", "")]
        if len(outputs) != len(cell.get("outputs", [])):
            cell.outputs = [*outputs, note]


def _nav(destination: Path, index: Path | None, other: Path | None, other_label: str) -> str:
    links = []
    if index is not None:
        links.append(f"<a href='{_href(os.path.relpath(index, destination.parent))}'>&larr; all reports</a>")
    if other is not None:
        links.append(f"<a href='{_href(os.path.relpath(other, destination.parent))}'>{html.escape(other_label)}</a>")
    return f"<nav class='oasr-nav'>{''.join(links)}</nav>" if links else ""


def export_html(
    notebook: Any,
    destination: Path,
    exclude_input: bool = False,
    title: str | None = None,
    index: Path | None = None,
) -> Path:
    """HTML with figures as inline PNG and tables as HTML, fully offline: saved widget state
    renders as static controls through the renderer vendored in ``reports/assets/``, and no
    script or style comes from a CDN. Titled ``title``; links back to ``index`` and to the
    other variant (with or without code)."""
    notebook = copy.deepcopy(notebook)
    _without_widget_icons(notebook)
    stem = destination.name.removesuffix(".html").removesuffix(".no-input")
    with_code, without_code = destination.with_name(f"{stem}.html"), destination.with_name(f"{stem}.no-input.html")
    title = title or stem
    if exclude_input:
        _without_source_outputs(notebook, with_code.name)
        nav = _nav(destination, index, with_code, "this report with code")
        title = f"{_plain(title)} (no code)"
    else:
        nav = _nav(destination, index, without_code, "this report without code")
        title = _plain(title)
    assets = Path(os.path.relpath(reports_root() / "assets", destination.parent)).as_posix()
    exporter = HTMLExporter(
        template_name="lab",
        template_file=_TEMPLATE,
        extra_loaders=[DictLoader({_TEMPLATE: _TEMPLATE_SOURCE})],
        embed_images=True,
        exclude_input=exclude_input,
        widget_renderer_url=f"{assets}/embed-amd.js",
        require_js_url=f"{assets}/require.js",
    )
    body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": title}, "oasr_nav": nav})
    destination.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(destination, body)
    return destination


def run_notebooks(
    paths: Sequence[Path],
    out_dir: Path | None = None,
    interrupt: Interrupt | None = None,
    gpus: Sequence[str] | None = None,
    jobs: int = 1,
) -> list[NotebookRun]:
    """Run each notebook, export its two HTML variants into ``out_dir`` (default: this mode's
    :func:`~profiling.workbench.tables.output_dir`) and read the summary it wrote there.

    With several ``gpus`` (device ids), one notebook runs on each at a time; otherwise ``jobs`` at a
    time (replay), by default one after the other. A failed notebook gets a summary that says so (the
    index must not show an earlier run's headline next to a partial report). After Ctrl-C no further notebook starts,
    and an interrupted one leaves its earlier files as they were; the list holds the finished
    ones, in the order of ``paths``.
    """
    out_dir = out_dir if out_dir is not None else output_dir()
    index = out_dir.parent / "index.html"
    mode = workbench_mode()
    finished: dict[Path, NotebookRun] = {}
    total_cells = sum(_count_code_cells(p) for p in paths)
    with _progress(total_cells) as bar:

        def one(path: Path, gpu: str | None) -> bool:
            """Run and export one notebook; False when Ctrl-C stopped it (nothing of it is kept)."""
            start_ns, start = time.time_ns(), time.perf_counter()
            notebook, error = execute_notebook(path, progress=bar, interrupt=interrupt, gpu=gpu)
            if interrupt is not None and interrupt.requested and error is not None:
                return False  # interrupted mid-run: keep what was there
            run = NotebookRun(path, time.perf_counter() - start, error, gpu=gpu)
            title = report_title(path, notebook)
            run.html = export_html(notebook, out_dir / f"{path.stem}.html", title=title, index=index)
            export_html(notebook, out_dir / f"{path.stem}.no-input.html", True, title=title, index=index)
            run.summary = _settle_summary(summary_path(path.stem, out_dir), run, title, mode, start_ns)
            finished[path] = run
            bar.write(f"{path.name}: {'ok' if run.ok else 'FAILED'} in {run.seconds:.1f} s", file=sys.stderr)
            return True

        if gpus is not None and len(gpus) > 1:
            bar.set_postfix_str(f"{len(gpus)} GPUs")
            _in_parallel(paths, gpus, one, interrupt)
        elif jobs > 1:
            bar.set_postfix_str(f"{jobs} at a time")
            _in_parallel(paths, [None] * jobs, one, interrupt)
        else:
            gpu = gpus[0] if gpus else None
            for path in paths:
                if interrupt is not None and interrupt.requested:
                    break
                bar.set_postfix_str(path.name)
                if not one(path, gpu):
                    break
    return [finished[p] for p in paths if p in finished]


class _Lines:
    """The progress bar's form where it goes to a file (a log, a pipe): plain lines, no carriage returns."""

    def __init__(self, total: int) -> None:
        self.total, self.n = total, 0

    def __enter__(self) -> _Lines:
        return self

    def __exit__(self, *_: object) -> None:
        self.write(f"notebooks: {self.n}/{self.total} cells run")

    def update(self, count: int = 1) -> None:
        self.n += count

    def set_postfix_str(self, text: str) -> None:
        self.write(f"notebooks: {self.n}/{self.total} cells run; now {text}")

    @staticmethod
    def write(text: str, file: Any = None) -> None:
        print(text, file=file or sys.stderr, flush=True)


def _progress(total_cells: int) -> Any:
    """A progress bar on a terminal, else plain lines (:class:`_Lines`)."""
    if sys.stderr.isatty():
        return tqdm(total=total_cells, desc="notebooks", unit="cell", file=sys.stderr)
    return _Lines(total_cells)


def _in_parallel(
    paths: Sequence[Path],
    gpus: Sequence[str | None],
    one: Callable[[Path, str | None], bool],
    interrupt: Interrupt | None,
) -> None:
    """One thread per GPU (None: a replay worker) takes the next notebook until none is left (or Ctrl-C);
    the main thread only waits, so that it stays free for the SIGINT handler."""
    todo: queue.SimpleQueue[Path] = queue.SimpleQueue()
    for path in paths:
        todo.put(path)
    errors: list[BaseException] = []

    def serve(gpu: str | None) -> None:
        try:
            while not (interrupt is not None and interrupt.requested):
                try:
                    path = todo.get_nowait()
                except queue.Empty:
                    return
                if not one(path, gpu):
                    return
        except BaseException as exc:  # handed to the main thread below
            errors.append(exc)

    threads = [
        threading.Thread(target=serve, args=(gpu,), name=f"notebooks on GPU {gpu}" if gpu else f"notebooks {i}")
        for i, gpu in enumerate(gpus)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)
    if errors:
        raise errors[0]


def _settle_summary(path: Path, run: NotebookRun, title: str, mode: str, start_ns: int) -> dict:
    """The summary the notebook wrote in this run; otherwise one that says what happened."""
    fresh = path.is_file() and path.stat().st_mtime_ns >= start_ns
    if run.ok and fresh:
        return json.loads(path.read_text())
    summary = {
        "title": title,
        "notebook": run.notebook.stem,
        "mode": mode,
        "headline": [],
        "provenance": {k: v for k, v in provenance.collect().items() if k in ("git_commit", "date")},
    }
    if not run.ok:
        summary["failed"] = run.error
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _count_code_cells(path: Path) -> int:
    cells = json.loads(path.read_text())["cells"]
    return sum(cell["cell_type"] == "code" for cell in cells)


def _provenance_text(provenance_: dict) -> str:
    parts = []
    if provenance_.get("gpu"):
        parts.append(f"{provenance_['gpu']}, driver {provenance_.get('driver', '?')}")
    if provenance_.get("cuda_runtime"):
        parts.append(f"CUDA {provenance_['cuda_runtime']}")
    if provenance_.get("git_commit"):
        parts.append(f"commit {str(provenance_['git_commit'])[:7]}")  # one length in the index: git's short hash
    if provenance_.get("date"):
        parts.append(str(provenance_["date"]))
    if provenance_.get("device_state"):
        parts.append(f"GPU state around the timing: {device_state.describe(provenance_['device_state'])}")
    return html.escape(", ".join(parts) or "-")


def write_index(root: Path | None = None) -> Path:
    """``<root>/index.html`` (default: this mode's :func:`~profiling.workbench.tables.output_root`):
    every report found under ``<root>/<gpu>/``, with its headlines, or its failure."""
    root = root if root is not None else output_root()
    replay_index = root.name == REPLAY_DIR
    rows = []
    for summary_file in sorted(root.glob("*/*.summary.json")):
        if summary_file.parent.name == REPLAY_DIR:
            continue
        summary = json.loads(summary_file.read_text())
        report = summary_file.with_name(summary_file.name.replace(".summary.json", ".html"))
        no_code = report.with_name(report.name.replace(".html", ".no-input.html"))
        title = _with_inline_code(str(summary.get("title", report.stem)))
        mode = html.escape(str(summary.get("mode", "")))
        failed = summary.get("failed")
        if failed:
            status = f"<b class='failed'>failed</b> ({mode}): {html.escape(str(failed))}"
            links = f"<a href='{_href(report.relative_to(root))}'>{title}</a> (partial run)"
        else:
            status = mode
            links = (
                f"<a href='{_href(report.relative_to(root))}'>{title}</a>"
                f" (<a href='{_href(no_code.relative_to(root))}'>no code</a>)"
            )
        headline = "".join(f"<li>{html.escape(str(line))}</li>" for line in summary.get("headline", []))
        rows.append(
            f"<tr><td>{links}</td><td>{status}</td><td><ul>{headline}</ul></td>"
            f"<td>{_provenance_text(summary.get('provenance') or {})}</td></tr>"
        )
    if replay_index:
        committed = root.parent / "index.html"
        about = (
            "<p>Replayed on a machine without a CUDA GPU: every table and plot comes from the recordings "
            "made on the GPU named in the provenance. This folder is the main command's replay output "
            "(git-ignored)."
            + (
                " The committed reports, made live on that GPU: <a href='../index.html'>reports/index.html</a>."
                if committed.is_file()
                else ""
            )
            + "</p>"
        )
    else:
        about = (
            "<p>One report per kernel family and per model, made live on the GPU named in its provenance"
            ' ("replay" marks one rendered from recordings).</p>'
        )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>Oasr reports{" (replay)" if replay_index else ""}</title>
<style>body{{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;margin:2em}}
table{{border-collapse:collapse}}ul{{margin:0;padding-left:1.2em}}
td,th{{border:1px solid #ccc;padding:.4em;vertical-align:top;text-align:left}}
code{{font-family:ui-monospace,Menlo,Consolas,monospace;background:#f3f3f3;padding:0 .2em}}
.failed{{color:#b00020}}</style></head>
<body><h1>Oasr workbench reports{" (replay)" if replay_index else ""}</h1>
{about}
<table><tr><th>report</th><th>mode</th><th>headline</th><th>provenance</th></tr>
{"".join(rows)}
</table></body></html>
"""
    index = root / "index.html"
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(index, page)
    return index


def _where(mode: str, out_dir: Path) -> str:
    if mode == LIVE:
        return f"live: writing {shown_path(out_dir)}/ and its index (the committed reports)"
    return (
        f"replay (no CUDA GPU): rendering from the recordings in {shown_path(reports_root() / report_gpu_slug())}/"
        f" into {shown_path(out_dir)}/ (git-ignored; committed reports untouched)"
    )


def _print_summary(runs: Sequence[NotebookRun], index: Path) -> None:
    print(f"\n{'notebook':<24} {'status':<8} {'mode':<9} {'gpu':>4} {'seconds':>8}  report")
    for run in runs:
        mode = (run.summary or {}).get("mode", "?")
        status = "ok" if run.ok else "FAILED"
        report = shown_path(run.html) if run.html else "-"
        print(f"{run.notebook.name:<24} {status:<8} {mode:<9} {run.gpu or '-':>4} {run.seconds:8.1f}  {report}")
    for run in runs:
        if not run.ok:
            print(f"  {run.notebook.name}: {run.error}")
    print(f"\nindex: {shown_path(index)}")


def notebook_problem(path: Path) -> str | None:
    """Why ``path`` cannot be run as a notebook (one sentence), or None when it can."""
    shown = shown_path(path)
    if not path.exists():
        return f"{shown} does not exist"
    if path.is_dir():
        return f"{shown} is a folder, not a notebook (.ipynb file)"
    if path.suffix != ".ipynb":
        return f"{shown} is not a notebook (.ipynb file)"
    try:
        if path.stat().st_size == 0:
            return f"{shown} is empty, not a notebook"
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
    except OSError as exc:
        return f"{shown} cannot be read ({exc.strerror or exc})"
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError, nbformat.ValidationError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        return f"{shown} is not a valid notebook ({reason})"
    if not any(cell.get("cell_type") == "code" for cell in notebook.cells):
        return f"{shown} has no code cells: nothing to run"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.publish_parser()
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"argument --jobs: must be at least 1, got {args.jobs}")
    for problem in map(notebook_problem, (Path(p) for p in args.notebooks)):
        if problem is not None:
            parser.error(f"argument notebooks: {problem}")

    paths = [Path(p).resolve() for p in args.notebooks] or sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    os.environ.setdefault("PYTHONPATH", str(REPO_ROOT))
    mode, out_dir = workbench_mode(), output_dir()
    gpus = None
    if mode == LIVE and (args.gpus is not None or len(discover()) > 1):
        try:
            gpus = resolve(args.gpus or "all")
        except (ValueError, TypeError) as error:
            parser.error(f"argument --gpus: {error}")
    elif args.gpus is not None:
        parser.error("argument --gpus: notebooks run on GPUs only live, and this run replays recordings (no CUDA GPU)")
    if mode == LIVE and args.jobs > 1:
        parser.error("argument --jobs: live runs take one notebook per GPU at a time (--gpus); --jobs is for replay")
    print(_where(mode, out_dir) + (f"; one notebook per GPU on {', '.join(gpus)}" if gpus and len(gpus) > 1 else ""),
          flush=True)  # fmt: skip

    interrupt = Interrupt()
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, interrupt) if in_main_thread else None
    runs: list[NotebookRun] = []
    try:
        runs = run_notebooks(paths, out_dir, interrupt, gpus, args.jobs)  # (live refused --jobs above)
    except KeyboardInterrupt:
        interrupt.count = max(interrupt.count, 1)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)
    index = write_index(out_dir.parent)
    if interrupt.requested:
        kept = ", ".join(run.notebook.name for run in runs) or "none"
        done = {run.notebook for run in runs}
        left = ", ".join(path.name for path in paths if path not in done) or "none"
        print(f"interrupted (Ctrl-C): kept {kept}; not run to the end: {left}; index: {shown_path(index)}")
        return EXIT_INTERRUPTED
    _print_summary(runs, index)
    return 0 if all(run.ok for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())  # the start-up Ctrl-C handler stays until main installs the one that stops notebooks
