"""The sweep panel: pick an op, size, dtype, backends and metric preset, press Run.

Each run times the chosen backends and profiles them under Nsight Compute (live),
or looks the same configuration up in the recordings (replay), then shows the
run next to every earlier one, so a kernel can be compared before and after an
edit (a live run rebuilds any kernel whose sources changed). Built by a factory
so tests can drive it without a browser: set widget values, call ``run.click()``.

Everything a run has to say appears in the panel's output area: a setting that
cannot run (no backend, or in replay something that was not recorded) is named
with what *is* recorded and what to do, before anything runs; an error inside a
run is shown with its cause, never only in JupyterLab's log. In replay the
dtype and preset lists mark what the recordings lack, and the size readout says
whether the chosen size and dtype were recorded. Each run shows its own figure
or none: a failed or figure-less run never leaves the previous one standing.

``SweepPanel(wb, gpus="all")`` uses several GPUs (live): the timing runs in a worker
on the first GPU while ncu profiles on the second, at the same time
(:mod:`profiling.scaleout`; ``engine="ray"`` for Ray), and each row says which GPU
it ran on.
"""

from __future__ import annotations

import html
import io
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as w
import pandas as pd
import torch
from IPython.display import HTML, Image

from oasr.jit.families import forget_loaded_modules

from ..harness.measure import measure
from ..harness.ops import OpSpec, parse_dtype
from ..nsight import recordings
from ..nsight.sweep import profile_sweep
from ..readable import binary_size
from ..scaleout.engine import check_engine
from ..scaleout.gpus import GpuSpec, resolve
from ..scaleout.timing import measure_sweep
from .display import to_html
from .notebook import Workbench
from .tables import load_table

PRESETS = ("timing", "roofline", "full")
TABLE_COLUMNS = (
    "run", "backend", "config", "dtype", "seconds", "bandwidth_bytes_per_s", "pct_of_copy", "kernel", "duration_s",
    "dram_bytes", "registers_per_thread", "mode", "gpu_device",
)  # fmt: skip
"""The comparison table's columns (those present), in base units; shown for people."""
NOTE_STYLE = "padding:.5em .7em;margin:.3em 0;background:#fff8e1;border-left:4px solid #f0a020"
ERROR_STYLE = "padding:.5em .7em;margin:.3em 0;background:#fdecea;border-left:4px solid #d93025"


class PanelError(Exception):
    """A run that cannot go ahead as set; the message says why and what to choose instead."""


def op_default_dtype(op: OpSpec) -> str:
    return "float16" if "float16" in op.dtypes else op.dtypes[0]


def _png(figure: Any) -> Image:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return Image(data=buffer.getvalue())


def _words(items: list[str]) -> str:
    """``["a"]`` -> ``"a"``, ``["a", "b", "c"]`` -> ``"a, b and c"``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


@dataclass
class Recorded:
    """What the recordings of one op hold (replay): timed and profiled (backend, config, dtype) entries."""

    op: OpSpec
    gpu: str
    timed: set[recordings.Entry] = field(default_factory=set)
    profiled: dict[str, set[recordings.Entry]] = field(default_factory=dict)

    @classmethod
    def load(cls, op: OpSpec, gpu: str) -> Recorded:
        found = cls(op, gpu)
        try:
            table, _ = load_table(gpu, op.name, "timing")
        except FileNotFoundError:
            table = pd.DataFrame(columns=["backend", "dtype", *op.config_fields])
        for row in table.itertuples(index=False):
            config = {f: int(getattr(row, f)) for f in op.config_fields}
            found.timed.add(recordings.make_entry(str(row.backend), config, str(row.dtype)))
        for profile in recordings.ProfileStore(gpu, op.name).profiles():
            found.profiled.setdefault(str(profile.meta.get("preset")), set()).update(profile.entries)
        return found

    def timed_dtypes(self, config: dict[str, int] | None = None) -> list[str]:
        """The op's dtypes with any timing recorded (at ``config`` when given)."""
        return self._dtypes(self.timed, config)

    def profiled_dtypes(self, preset: str, config: dict[str, int] | None = None) -> list[str]:
        return self._dtypes(self.profiled.get(preset, set()), config)

    def _dtypes(self, entries: set[recordings.Entry], config: dict[str, int] | None) -> list[str]:
        key = None if config is None else recordings.make_entry("", config, "")[1]
        held = {d for _, c, d in entries if key is None or c == key}
        return [d for d in self.op.dtypes if d in held]

    def presets(self) -> list[str]:
        return [p for p in PRESETS if self.profiled.get(p)]

    def sizes(self, entries: set[recordings.Entry], dtype: str) -> list[str]:
        """Config labels of ``entries`` in ``dtype``, in the op's sweep order."""
        keys = {c for _, c, d in entries if d == dtype}
        return [self.op.config_label(c) for c in self.op.default_sweep if recordings.make_entry("", c, "")[1] in keys]


class SweepPanel:
    """Widgets and state of one panel; ``widget`` is what a notebook displays."""

    def __init__(self, workbench: Workbench, gpus: GpuSpec = None, engine: str = "local") -> None:
        self.workbench = workbench
        self.engine = check_engine(engine)
        self.gpus = self._split_gpus(gpus)
        """(GPUs of the timing, GPUs of the profile), or None to run both here, one after the other."""
        self.history: list[pd.DataFrame] = []
        self.figure: Any = None
        """The last run's figure, or None when it drew none (or failed)."""
        self.note = ""
        self.error = ""
        ops = {op.name: op for op in workbench.ops}
        first = workbench.ops[0]
        self.op = w.Dropdown(options=list(ops), value=first.name, description="op")
        self.size = w.SelectionSlider(
            options=[("", 0)], description="size", readout=False, continuous_update=False,
            layout=w.Layout(width="400px"),
        )  # fmt: skip
        self.size_readout = w.HTML(layout=w.Layout(margin="0 0 4px 92px"))  # under the slider, its full width
        self.dtype = w.Dropdown(description="dtype", layout=w.Layout(width="400px"))
        self.backends = w.SelectMultiple(
            options=list(first.backends), value=tuple(first.backends), description="backends", rows=2
        )
        self.preset = w.Dropdown(options=PRESETS, value="roofline", description="metrics")
        self.run = w.Button(description="Run", button_style="primary", tooltip="time and profile this setting")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="idle")
        self.output = w.Output()
        self._ops = ops
        self._recorded: dict[str, Recorded] = {}
        self._syncing = False
        self.op.observe(lambda _: self._sync_op(), names="value")
        self.preset.observe(lambda _: None if self._syncing else self._sync_labels(), names="value")
        self.size.observe(lambda _: self._sync_readout(), names="value")
        self.dtype.observe(lambda _: self._sync_readout(), names="value")
        self._sync_op()
        self.run.on_click(lambda _: self.execute())
        controls = w.HBox(
            [
                w.VBox([self.op, self.size, self.size_readout, self.dtype]),
                w.VBox([self.backends, self.preset, self.run]),
            ]
        )
        if workbench.replayed:
            mode = (
                f"replaying recordings from {html.escape(workbench.gpu_slug)}: only what was recorded can be shown; "
                "choices marked <i>not recorded</i> need a live run on a GPU"
            )
        else:
            mode = "live"
        self.widget = w.VBox([w.HTML(f"<b>Sweep panel</b> ({mode})"), controls, self.progress, self.output])

    def _split_gpus(self, gpus: GpuSpec) -> tuple[GpuSpec, GpuSpec] | None:
        if gpus is None or self.workbench.replayed:
            return None
        if self.engine == "ray":
            return 1, 1  # Ray places each on a GPU of its own
        ids = resolve(gpus)
        return ids[:1], ids[1:2] or ids[:1]

    # ------------------------------------------------------------ controls

    def _op(self) -> OpSpec:
        return self._ops[self.op.value]

    def recorded(self, op: OpSpec | None = None) -> Recorded | None:
        """What the recordings hold for ``op`` (default: the chosen one); None when live."""
        if not self.workbench.replayed:
            return None
        op = op or self._op()
        if op.name not in self._recorded:
            self._recorded[op.name] = Recorded.load(op, self.workbench.gpu_slug)
        return self._recorded[op.name]

    def _sync_op(self) -> None:
        op = self._op()
        self._syncing = True
        try:
            self.size.options = [(op.config_label(c), i) for i, c in enumerate(op.default_sweep)]
            self.size.value = 0
            self.backends.options = list(op.backends)
            self.backends.value = tuple(op.backends)
            recorded = self.recorded(op)
            if recorded is not None:
                self.preset.options = [(p if p in recorded.presets() else f"{p} (not recorded)", p) for p in PRESETS]
            self.preset.value = "roofline"
        finally:
            self._syncing = False
        self._sync_labels(default=True)

    def _sync_labels(self, default: bool = False) -> None:
        """Dtype choices, marked in replay by what the recordings hold for the chosen preset."""
        op, recorded = self._op(), self.recorded()
        chosen = None if default else self.dtype.value
        if recorded is None:
            options: list[Any] = list(op.dtypes)
        else:
            timed, profiled = recorded.timed_dtypes(), recorded.profiled_dtypes(self.preset.value)
            options = [
                (d if d in profiled else f"{d} (timing only, not profiled)" if d in timed else f"{d} (not recorded)", d)
                for d in op.dtypes
            ]
        syncing, self._syncing = self._syncing, True
        try:
            self.dtype.options = options
            self.dtype.value = chosen if chosen in op.dtypes else op_default_dtype(op)
        finally:
            self._syncing = syncing
        self._sync_readout()

    def _sync_readout(self) -> None:
        """``n=536870912 · float16 · 2.00 GiB moved``, and in replay whether that was recorded."""
        if self._syncing or self.dtype.value is None:
            return
        op = self._op()
        config = op.default_sweep[self.size.value]
        moved = binary_size(op.work(config, parse_dtype(self.dtype.value)).bytes)
        text = f"{op.config_label(config)} · {self.dtype.value} · {moved} moved"
        recorded = self.recorded()
        if recorded is not None:
            timed = self.dtype.value in recorded.timed_dtypes(config)
            profiled = self.dtype.value in recorded.profiled_dtypes(self.preset.value, config)
            text += " · " + ("recorded" if profiled else "timing recorded, not profiled" if timed else "not recorded")
        self.size_readout.value = f"<span style='font-size:12px'>{html.escape(text)}</span>"

    def _step(self, label: str) -> None:
        self.progress.description = label
        self.progress.value += 1

    # ------------------------------------------------------------ a run

    def execute(self) -> pd.DataFrame:
        """One run with the current settings; returns the comparison table of all runs.

        Never raises: whatever stops the run is shown in the panel (and kept in ``error``).
        """
        self.note, self.error, self.figure = "", "", None
        self.output.outputs = ()
        self.progress.bar_style = ""
        try:
            self._execute()
        except PanelError as exc:
            self._fail(str(exc), started=False)
        except Exception as exc:  # shown in the panel: a callback's traceback would only reach the log
            detail = "".join(traceback.format_exception(exc))
            message = f"{type(exc).__name__}: {exc}"
            if not self.workbench.replayed and not torch.cuda.is_available():
                message += (
                    " This panel runs live (OASR_WORKBENCH_MODE=live) on a machine without a CUDA GPU: "
                    "unset OASR_WORKBENCH_MODE to replay the recordings, or run on a GPU machine."
                )
            self._fail(message, started=True, detail=detail)
        return self.comparison()

    def _execute(self) -> None:
        op = self._op()
        config = op.default_sweep[self.size.value]
        dtype, backends, preset = self.dtype.value, list(self.backends.value), self.preset.value
        if not backends:
            raise PanelError(
                "No backend selected: select oasr, torch or both in the backends list "
                "(Ctrl-click or Cmd-click for several), then press Run."
            )
        self._check_timing_recorded(op, config, dtype, backends)
        self.progress.value, self.progress.max = 0, 3
        if self.gpus is None:
            self._step("timing")
            run = self._timing(op, config, dtype, backends)
            self._step("profiling")
            profile = self._profile(op, config, dtype, backends, preset)
        else:
            self._step("timing + profiling")
            with ThreadPoolExecutor(1) as pool:  # timing on one GPU while ncu profiles on another
                timed = pool.submit(self._timing, op, config, dtype, backends, self.gpus[0])
                profile = self._profile(op, config, dtype, backends, preset, self.gpus[1])
                run = timed.result()
            self._step("profiled")
        if profile is not None:
            run = run.merge(profile, on="backend", how="left")
        run.insert(0, "run", len(self.history) + 1)
        self.history.append(run)
        self._step("done")
        self.progress.bar_style = "success"
        self._show()

    def _check_timing_recorded(self, op: OpSpec, config: dict[str, int], dtype: str, backends: list[str]) -> None:
        """Replay: the timing of every chosen backend must be recorded, else say what is."""
        recorded = self.recorded(op)
        if recorded is None:
            return
        lacking = [b for b in backends if recordings.make_entry(b, config, dtype) not in recorded.timed]
        if not lacking:
            return
        label = op.config_label(config)
        here = recorded.timed_dtypes(config)
        if here:
            hint = f"at {label} the recordings hold the timing of {_words(here)}; pick {here[0]}"
        else:
            sizes = recorded.sizes(recorded.timed, dtype)
            hint = (
                f"in {dtype} they hold {_words(sizes)}; pick one of those sizes"
                if sizes
                else f"they hold no timing of {op.name} at all"
            )
        raise PanelError(
            f"Nothing recorded for {op.name} {label} in {dtype} ({_words(lacking)}) in the {recorded.gpu} "
            f"recordings: {hint}, or run live on a GPU machine."
        )

    def _timing(
        self, op: OpSpec, config: dict[str, int], dtype: str, backends: list[str], gpus: GpuSpec = None
    ) -> pd.DataFrame:
        columns = ["backend", "config", "dtype", "seconds", "bandwidth_bytes_per_s", "pct_of_copy"]
        if gpus is not None:  # a pooled worker: each sweep reloads the kernels, so an edited one is rebuilt
            rows = measure_sweep(op, [config], [dtype], backends, gpus=gpus, engine=self.engine)
            return rows[[*columns, "gpu_device"]].assign(mode=self.workbench.mode).reset_index(drop=True)
        if self.workbench.replayed:
            table, _ = load_table(self.workbench.gpu_slug, op.name, "timing")
            mask = (table["dtype"] == dtype) & table["backend"].isin(backends)
            for key, value in config.items():
                mask &= table[key] == value
            rows = table[mask]
        else:
            forget_loaded_modules()  # a kernel edited since the last run is rebuilt
            rows = measure(op, [config], [dtype], backends)
        return rows[columns].assign(mode=self.workbench.mode).reset_index(drop=True)

    def _profile(
        self, op: OpSpec, config: dict[str, int], dtype: str, backends: list[str], preset: str, gpus: GpuSpec = None
    ) -> pd.DataFrame | None:
        """The chosen backends' launches (and the roofline as ``figure``), or None with a ``note`` saying why."""
        replayed = self.workbench.replayed
        if replayed:
            backends = self._recorded_backends(op, config, dtype, backends, preset)
            if not backends:
                return None
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                spread = {} if gpus is None else {"gpus": gpus, "engine": self.engine}
                result = profile_sweep(
                    op.name, configs=[config], dtypes=[dtype], backends=backends, preset=preset, live=not replayed,
                    **spread,
                )  # fmt: skip
        except Exception as exc:  # the timing above stands; say why there is no profile
            self.note = f"No profile ({type(exc).__name__}): {exc} The timing below was measured."
            return None
        extra = [str(c.message) for c in caught if issubclass(c.category, UserWarning)]
        if extra:
            self.note = " ".join(filter(None, [self.note, *extra]))
        launches = result.launches
        if launches.empty:
            self.note = self.note or f"The {preset} profile of {op.name} holds no launch for this setting."
            return None
        if preset != "timing":
            self.figure = self.workbench.roofline_plot(result)
        keep = [c for c in ("backend", "kernel", "duration_s", "dram_bytes", "registers_per_thread") if c in launches]
        return launches[keep].drop_duplicates("backend")

    def _recorded_backends(
        self, op: OpSpec, config: dict[str, int], dtype: str, backends: list[str], preset: str
    ) -> list[str]:
        """Replay: the chosen backends with a recorded profile here; a ``note`` names what is recorded instead."""
        recorded = self.recorded(op)
        assert recorded is not None
        held = recorded.profiled.get(preset, set())
        found = [b for b in backends if recordings.make_entry(b, config, dtype) in held]
        if found == backends:
            return found
        label, presets = op.config_label(config), recorded.presets()
        if not held:
            where = f"pick {presets[0]}" if presets else "no preset was profiled for it"
            recorded_presets = _words(presets) if presets else "none"
            self.note = (
                f"No {preset} profile: the {recorded.gpu} recordings of {op.name} hold only the "
                f"{recorded_presets} preset; {where}, or run live on a GPU to profile with {preset}."
            )
        elif dtype not in recorded.profiled_dtypes(preset):
            profiled = recorded.profiled_dtypes(preset)
            self.note = (
                f"No {preset} profile in {dtype}: only {_words(profiled)} was profiled for {op.name}; "
                f"pick {profiled[0]}, or run live on a GPU."
            )
        elif not found:
            sizes = recorded.sizes(held, dtype)
            self.note = (
                f"No {preset} profile of {op.name} at {label} in {dtype}: the recordings hold "
                f"{_words(sizes)}; pick one of those sizes, or run live on a GPU."
            )
        else:
            missing = [b for b in backends if b not in found]
            self.note = f"Only {_words(found)} was profiled at {label} in {dtype}; {_words(missing)} was not."
        if not found:
            self.note += " The timing below is recorded."
        return found

    # ------------------------------------------------------------ showing it

    def comparison(self) -> pd.DataFrame:
        """Every run so far, one row per backend, in base units."""
        if not self.history:
            return pd.DataFrame()
        table = pd.concat(self.history, ignore_index=True)
        return table[[c for c in TABLE_COLUMNS if c in table] + [c for c in table if c not in TABLE_COLUMNS]]

    def _fail(self, message: str, *, started: bool, detail: str = "") -> None:
        self.error = message
        self.figure = None
        self.progress.description = "failed" if started else "not run"
        self.progress.bar_style = "danger"
        title = "Run failed" if started else "Not run"
        block = f"<div style='{ERROR_STYLE}'><b>{title}.</b> {html.escape(message)}"
        if detail:
            block += f"<details><summary>traceback</summary><pre>{html.escape(detail)}</pre></details>"
        self.output.outputs = ()
        self.output.append_display_data(HTML(block + "</div>"))
        if self.history:
            self.output.append_display_data(HTML("<b>Earlier runs</b>" + to_html(self.comparison())))

    def _show(self) -> None:
        self.output.outputs = ()
        if self.note:
            self.output.append_display_data(HTML(f"<div style='{NOTE_STYLE}'>{html.escape(self.note)}</div>"))
        self.output.append_display_data(HTML(to_html(self.comparison())))
        if self.figure is not None:
            self.output.append_display_data(_png(self.figure))
