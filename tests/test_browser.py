"""The workbench in a real browser: JupyterLab and the HTML reports, in headless Chromium.

1. ``test_notebook_panel_in_jupyterlab`` starts JupyterLab on localhost (a free port, a
   token, the repository as its root, settings and workspaces in a temporary folder,
   autosave off so that the notebook on disk is never rewritten), opens
   ``notebooks/01_scale.ipynb``, runs all cells from the Run menu, waits until every
   cell has run, then drives the sweep panel by its widgets' descriptions: one step
   on the size slider, dtype float16 (the recorded one), Run: new table rows and a new
   image; then a dtype the panel marks in its label (in replay: not profiled), Run:
   new rows, a note, and the float16 figure gone (never a stale figure).
2. ``test_reports_offline`` serves the reports on localhost, opens an index and every
   page it links, and fails on any console error, uncaught exception, HTTP error,
   failed request or request off localhost (the reports must work offline; such
   requests are blocked and reported). ``[committed]``: ``reports/index.html`` as
   committed; ``[rendered]``: the index the main command writes now
   (``python -m profiling.workbench.publish`` into a scratch copy of reports/, about
   30 s), so that the HTML the current code makes is checked too.

Chromium is Debian's (``/usr/bin/chromium``, or ``$OASR_CHROMIUM``) driven by the
``playwright`` package; Playwright's own browser download is not used. Without
Chromium, Playwright or JupyterLab the tests skip with the reason, except in CI
(``$CI`` set) where they fail. Screenshots go to ``.artifacts/browser/`` (or
``$OASR_ARTIFACTS_DIR``). Every wait is bounded; the server, its kernels and the
browser are stopped on any exit. Deselect with ``-m "not browser"``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = "notebooks/01_scale.ipynb"
ARTIFACTS = Path(os.environ.get("OASR_ARTIFACTS_DIR") or REPO / ".artifacts" / "browser")
CHROMIUM = os.environ.get("OASR_CHROMIUM", "/usr/bin/chromium")
# What works on a machine with a closed network (no sandbox as root, no GPU, and none of
# the background requests Chromium makes to Google's hosts at start).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]
SERVER_START_S = 90  # JupyterLab answering /api/status
NOTEBOOK_RUN_S = 240  # Run All Cells until every cell has run (the JIT build is cached by the suite)
KERNEL_START_S = 60  # the notebook opened until its kernel is idle
PANEL_RUN_S = 180  # Run pressed until the panel shows what the run brings (its rows, figure or note)
PAGE_LOAD_S = 60
PUBLISH_S = 300  # the main command rendering every notebook (about 25 s here)
RUN_LABEL = re.compile(r"^\s*Run\s*$")  # the panel's Run button (its description)
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}

# Lab settings: no autosave (the notebook on disk must stay as committed), every cell in
# the DOM, no news or update checks (no requests off localhost).
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False,
        "fetchNews": "false",
    },
}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _require(ok: bool, reason: str) -> None:
    """Skip with ``reason`` when something the test needs is missing; in CI, fail instead."""
    if ok:
        return
    if _in_ci():
        pytest.fail(f"{reason} (CI is set: the browser test must run there; scripts/test.sh installs it)")
    pytest.skip(f"{reason}; `bash scripts/test.sh` installs it")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _shot(target: Any, name: str, **kwargs: Any) -> Path:
    """Save a screenshot of a page or element under ARTIFACTS (bounded, never fails the test)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    with contextlib.suppress(Exception):
        target.screenshot(path=str(path), timeout=15_000, **kwargs)
    return path


# ---------------------------------------------------------------------------
# Browser, JupyterLab, static server
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _require(Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK), f"no Chromium at {CHROMIUM}")
    _require(importlib.util.find_spec("playwright") is not None, "the Python package playwright is not installed")
    from playwright.sync_api import sync_playwright

    for old in ARTIFACTS.glob("*.png"):  # this run's screenshots only
        old.unlink()

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=60_000
        )
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass(frozen=True)
class Lab:
    base: str
    token: str
    url: str  # the notebook, opened in a reset workspace
    log_tail: Callable[[], str]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab on localhost with the repository as its root, stopped (with its kernels) on exit."""
    _require(importlib.util.find_spec("jupyterlab") is not None, "JupyterLab is not installed")
    tmp = tmp_path_factory.mktemp("lab")
    settings = tmp / "settings"
    for name, values in LAB_SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        IPYTHONDIR=str(tmp / "ipython"),
        PYTHONUNBUFFERED="1",
    )
    if not env.get("OASR_REPORTS_DIR"):
        # The notebook writes its summary under the reports root: a scratch copy takes it.
        shutil.copytree(REPO / "reports", tmp / "reports")
        env["OASR_REPORTS_DIR"] = str(tmp / "reports")
    port, token = _free_port(), secrets.token_hex(16)
    log_path = tmp / "jupyterlab.log"
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={REPO}",
        f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
        f"--FileCheckpoints.checkpoint_dir={tmp / 'checkpoints'}",  # not notebooks/.ipynb_checkpoints/
    ]  # fmt: skip
    if os.geteuid() == 0:
        command.append("--allow-root")
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def log_tail() -> str:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])

    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"JupyterLab exited with {server.returncode} at start:\n{log_tail()}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer within {SERVER_START_S} s:\n{log_tail()}")
            time.sleep(0.5)
        yield Lab(base, token, f"{base}/lab/tree/{NOTEBOOK}?token={token}&reset", log_tail)
    finally:
        # The server and its kernels share one process group (start_new_session).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)  # a kernel that outlived its server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _serve(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on localhost (what a user gets from any static file server)."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(directory))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@dataclass(frozen=True)
class Rendered:
    index: Path  # the index.html the main command wrote
    returncode: int
    output: str  # its last lines, progress bars left out


@pytest.fixture(scope="module")
def rendered_reports(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """What the main command (``python -m profiling.workbench.publish``) writes now, into a scratch copy
    of reports/: the HTML the current code makes (on a machine without a GPU: replay), not what was committed."""
    root = tmp_path_factory.mktemp("rendered")
    shutil.copytree(REPO / "reports", root / "reports", ignore=shutil.ignore_patterns("replay"))
    start = time.time()
    env = {**os.environ, "OASR_REPORTS_DIR": str(root / "reports"), "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "profiling.workbench.publish", "--jobs", "2"],  # replay, two at a time
            cwd=REPO, env=env, capture_output=True, text=True, timeout=PUBLISH_S,
        )  # fmt: skip
        returncode, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, output = -1, f"(killed after {PUBLISH_S} s) {exc.stdout or ''}"
    lines = [line for line in output.splitlines() if not re.search(r"cell/s|s/cell", line)]
    output = "\n".join(lines[-40:])
    written = [p for p in (root / "reports").rglob("index.html") if p.stat().st_mtime >= start - 1]
    assert written, f"the main command (exit {returncode}) wrote no index.html under {root / 'reports'}:\n{output}"
    return Rendered(max(written, key=lambda p: p.stat().st_mtime), returncode, output)


# ---------------------------------------------------------------------------
# The notebook and its sweep panel in JupyterLab
# ---------------------------------------------------------------------------

# "done" when every code cell shows an execution count, "stopped" when nothing is running
# or queued any more but some cell never ran (a cell failed), false while running.
_RUN_STATE_JS = """() => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
    .map(p => p.textContent || '');
  if (!prompts.length || prompts.some(t => t.includes('*'))) return false;
  if (prompts.every(t => /\\[\\d+\\]/.test(t))) return 'done';
  return prompts.some(t => /\\[\\d+\\]/.test(t)) ? 'stopped' : false;
}"""

# What the panel shows below its controls: its table rows, its images (loaded, with a
# fingerprint of their data to tell a new figure from a stale one), its notes (outputs
# of its Output area holding text but no table and no image) and any error outputs.
_PANEL_STATE_JS = """(root) => {
  const children = [...root.querySelectorAll('.widget-output .jp-OutputArea-child')];
  return {
    rows: root.querySelectorAll('table tbody tr').length,
    images: [...root.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0)
      .map(i => i.src.length + ':' + i.src.slice(-48)),
    notes: children.filter(c => !c.querySelector('table, img'))
      .map(c => (c.textContent || '').replace(/\\s+/g, ' ').trim()).filter(t => t),
    errors: root.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]').length,
    text: (root.innerText || '').slice(-3000),
  };
}"""


def _control(panel: Any, description: str) -> Any:
    """The ipywidgets control whose description label is ``description``."""
    label = panel.page.locator("label.widget-label", has_text=re.compile(rf"^\s*{re.escape(description)}\s*$"))
    return panel.locator(".widget-inline-hbox").filter(has=label).first


def _cell_errors(page: Any) -> str:
    texts = page.locator(".jp-OutputArea-output").all_inner_texts()
    return "\n---\n".join(t[-1500:] for t in texts if "Traceback" in t or "Error" in t)[-6000:]


def _wait_kernel_idle(lab: Lab) -> None:
    """Until the notebook's kernel has started and is idle (the page's own indicator says idle before that)."""
    deadline = time.monotonic() + KERNEL_START_S
    while True:
        try:
            with urllib.request.urlopen(f"{lab.base}/api/sessions?token={lab.token}", timeout=5) as answer:
                sessions = json.load(answer)
            if any(s["path"] == NOTEBOOK and s["kernel"]["execution_state"] == "idle" for s in sessions):
                return
        except (urllib.error.URLError, OSError, KeyError, ValueError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"the kernel of {NOTEBOOK} was not idle within {KERNEL_START_S} s:\n{lab.log_tail()}")
        time.sleep(0.25)


# What a Run must bring, as conditions on the panel's state before (``was``) and now (``now``) the Run.
GREW = ("a new table row", "now.rows > was.rows")
NEW_FIGURE = ("a new figure (an image not shown before)", "now.images.some(i => !was.images.includes(i))")
NOTE = ("a note", "now.notes.length > 0")


def _gone(images: list[str], what: str) -> tuple[str, str]:
    return (f"{what} to go", f"!now.images.some(i => {json.dumps(images)}.includes(i))")


def _run_panel(
    page: Any, panel: Any, run_button: Any, shot: str, awaited: tuple[tuple[str, str], ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Press Run and wait (up to PANEL_RUN_S, polling) until every ``awaited`` condition holds; the panel's
    state before and after. A timeout names the conditions still unmet and what the panel shows."""
    root = panel.element_handle()
    before = page.evaluate(_PANEL_STATE_JS, root)
    every = " && ".join(f"({condition})" for _, condition in awaited)
    run_button.click()
    try:
        page.wait_for_function(
            f"([root, was]) => {{ const now = ({_PANEL_STATE_JS})(root); return {every}; }}",
            arg=[root, before],
            timeout=PANEL_RUN_S * 1000,
            polling=250,
        )
    except Exception as exc:
        now = page.evaluate(_PANEL_STATE_JS, root)
        unmet = [
            what for what, condition in awaited if not page.evaluate(f"([now, was]) => {condition}", [now, before])
        ]
        raise AssertionError(
            f"{PANEL_RUN_S} s after Run, still waiting for {', '.join(unmet) or 'nothing (it came at the end)'} "
            f"({before['rows']} -> {now['rows']} rows, {len(now['images'])} images); it shows:\n{now['text']}"
        ) from exc
    finally:
        panel.scroll_into_view_if_needed()
        _shot(panel, shot)
    after = page.evaluate(_PANEL_STATE_JS, root)
    assert not after["errors"], f"error output in the panel after Run:\n{after['text']}"
    return before, after


def test_notebook_panel_in_jupyterlab(browser: Any, lab: Lab) -> None:
    notebook_path = REPO / NOTEBOOK
    notebook_before = notebook_path.read_bytes()
    checkpoints = REPO / "notebooks" / ".ipynb_checkpoints"
    checkpoints_before = checkpoints.exists()
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        page.goto(lab.url, wait_until="domcontentloaded", timeout=PAGE_LOAD_S * 1000)
        page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(state="visible", timeout=PAGE_LOAD_S * 1000)
        _wait_kernel_idle(lab)
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
        state = page.wait_for_function(_RUN_STATE_JS, timeout=NOTEBOOK_RUN_S * 1000, polling=500).json_value()
        _shot(page, "01_notebook_after_run_all")
        assert state == "done", f"a cell of {NOTEBOOK} did not run (Run All stopped):\n{_cell_errors(page)}"

        run_button = page.locator(".jp-OutputArea-output .widget-button", has_text=RUN_LABEL).first
        panel = page.locator(".jp-OutputArea-output").filter(has=page.locator(".widget-button", has_text=RUN_LABEL))
        panel = panel.first
        panel.wait_for(state="visible", timeout=30_000)
        panel.scroll_into_view_if_needed()
        for description in ("op", "size", "dtype", "backends", "metrics"):
            assert _control(panel, description).count() == 1, f"the panel has no widget described {description!r}"
        _shot(panel, "02_panel_before_run")

        # size: one step right on the slider, by keyboard on its handle (checked on the handle's value).
        handle = _control(panel, "size").locator(".noUi-handle").first
        size_before = handle.get_attribute("aria-valuenow")
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "([el, old]) => el.getAttribute('aria-valuenow') !== old",
            arg=[handle.element_handle(), size_before],
            timeout=10_000,
        )
        # dtype: float16 first, the dtype the H200 recordings profile, so a roofline image comes back in replay.
        dtype = _control(panel, "dtype").locator("select")
        values = dtype.locator("option").evaluate_all("options => options.map(o => o.value)")
        float16 = next((v for v in values if v.startswith("float16")), None)
        assert float16, f"no float16 in the dtype dropdown: {values}"
        others = [v for v in values if v != float16]
        if others:  # through another dtype, so that choosing float16 is a real change
            dtype.select_option(value=others[0])
        dtype.select_option(value=float16)

        before, after = _run_panel(page, panel, run_button, "03_panel_after_run_float16", (GREW, NEW_FIGURE))
        new_images = [i for i in after["images"] if i not in before["images"]]

        # A dtype the panel marks in its label (replay: "not profiled" or the like): the run
        # must still add rows, say why in a note, and not leave the float16 figure behind.
        marked = [v for v in others if " " in v.strip()]
        if marked:
            dtype.select_option(value=marked[0])
            awaited = (GREW, NOTE, _gone(new_images, "the float16 figure"))
            _run_panel(page, panel, run_button, "04_panel_after_run_marked_dtype", awaited)
        else:  # live: every dtype is offered as is; a note is only shown when there is something to say
            assert after["notes"] or after["images"], "neither a note nor an image after Run"
        _shot(page, "05_notebook_after_panel_runs")
    finally:
        context.close()
    assert notebook_path.read_bytes() == notebook_before, f"JupyterLab rewrote {NOTEBOOK} (autosave should be off)"
    assert checkpoints_before or not checkpoints.exists(), f"JupyterLab wrote {checkpoints} into the checkout"


# ---------------------------------------------------------------------------
# The static reports, offline
# ---------------------------------------------------------------------------


def _slug(url: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", urlsplit(url).path.strip("/"))[:100]


@pytest.mark.parametrize("which", ["committed", "rendered"])
def test_reports_offline(browser: Any, which: str, request: pytest.FixtureRequest) -> None:
    """reports/index.html (committed) or the index the main command writes now, and every page it links."""
    if which == "committed":
        directory, index_path = REPO, REPO / "reports" / "index.html"
    else:
        rendered = request.getfixturevalue("rendered_reports")
        index_path = rendered.index
        directory = index_path.parent
        while directory.name != "reports":
            directory = directory.parent
        directory = directory.parent
    problems: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)

    def route(request_route: Any) -> None:
        parts = urlsplit(request_route.request.url)
        if parts.scheme in ("data", "blob", "about") or parts.hostname in LOCAL_HOSTS:
            request_route.continue_()
        else:
            problems.append(f"{page.url}: request off localhost (blocked; must work offline): {parts.geturl()}")
            request_route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and problems.append(f"{page.url}: console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"{page.url}: uncaught exception: {e}"))
    page.on(
        "requestfailed",
        lambda r: (
            urlsplit(r.url).hostname in LOCAL_HOSTS
            and problems.append(f"{page.url}: request failed ({r.failure}): {r.url}")
        ),
    )
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{page.url}: HTTP {r.status}: {r.url}"))

    def visit(url: str, name: str, full_page: bool) -> None:
        page.goto(url, wait_until="load", timeout=PAGE_LOAD_S * 1000)
        with contextlib.suppress(Exception):  # a page that keeps polling never goes idle: bounded
            page.wait_for_load_state("networkidle", timeout=10_000)
        _shot(page, name, full_page=full_page)
        widgets = page.locator(".jp-OutputArea-output").filter(has=page.locator(".widget-button"))
        if widgets.count():  # the sweep panel as a static report shows it (its Run button's icon, fonts)
            widgets.first.scroll_into_view_if_needed()
            _shot(widgets.first, f"{name}.panel")

    number = 10 if which == "committed" else 30
    try:
        with _serve(directory) as server:
            index = f"{server}/{index_path.relative_to(directory).as_posix()}"
            visit(index, f"{number}_{which}_index", full_page=True)
            hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
            pages = list(
                dict.fromkeys(
                    urljoin(index, h).split("#")[0]
                    for h in hrefs
                    if urlsplit(h).hostname in LOCAL_HOSTS and urlsplit(h).path.endswith(".html")
                )
            )
            pages = [p for p in pages if p != index]
            assert pages, f"{index_path} links no report (links: {hrefs})"
            for offset, url in enumerate(pages, start=1):
                visit(url, f"{number + offset}_{which}_{_slug(url)}", full_page=False)
        unique = list(dict.fromkeys(problems))
        assert not unique, f"{len(unique)} problems on {len(pages) + 1} pages ({which}):\n" + "\n".join(unique[:40])
        if which == "rendered":  # the pages are fine; did every notebook run?
            assert rendered.returncode == 0, f"the main command exited with {rendered.returncode}:\n{rendered.output}"
    finally:
        context.close()
