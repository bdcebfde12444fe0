"""The sweep panel: pick an op, size, dtype, backends and metric preset, press Run.

Each run times the chosen backends and profiles them under Nsight Compute (live),
or looks the same configuration up in the recordings (replay), then shows the
run next to every earlier one, so a kernel can be compared before and after an
edit (a live run rebuilds any kernel whose sources changed). Built by a factory
so tests can drive it without a browser: set widget values, call ``run.click()``.
"""

from __future__ import annotations

import io
from typing import Any

import ipywidgets as w
import pandas as pd
from IPython.display import HTML, Image

from oasr.jit.families import forget_loaded_modules

from ..harness.measure import measure
from ..harness.ops import OpSpec, parse_dtype
from ..nsight.sweep import profile_sweep
from .notebook import Workbench
from .tables import load_table

PRESETS = ("timing", "roofline", "full")


def _size_label(op: OpSpec, config: dict[str, int]) -> str:
    megabytes = op.work(config, parse_dtype(op_default_dtype(op))).bytes / 2**20
    return f"{op.config_label(config)}  ({megabytes:.3g} MiB fp16)"


def op_default_dtype(op: OpSpec) -> str:
    return "float16" if "float16" in op.dtypes else op.dtypes[0]


def _png(figure: Any) -> Image:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return Image(data=buffer.getvalue())


class SweepPanel:
    """Widgets and state of one panel; ``widget`` is what a notebook displays."""

    def __init__(self, workbench: Workbench) -> None:
        self.workbench = workbench
        self.history: list[pd.DataFrame] = []
        self.figures: list[Any] = []
        ops = {op.name: op for op in workbench.ops}
        first = workbench.ops[0]
        self.op = w.Dropdown(options=list(ops), value=first.name, description="op")
        self.size = w.SelectionSlider(
            options=[("", 0)], description="size", continuous_update=False, layout=w.Layout(width="520px")
        )
        self.dtype = w.Dropdown(description="dtype")
        self.backends = w.SelectMultiple(
            options=list(first.backends), value=tuple(first.backends), description="backends"
        )
        self.preset = w.Dropdown(options=PRESETS, value="roofline", description="metrics")
        self.run = w.Button(description="Run", button_style="primary", icon="play")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="idle")
        self.output = w.Output()
        self.note = ""
        self._ops = ops
        self.op.observe(lambda _: self._sync_op(), names="value")
        self._sync_op()
        self.run.on_click(lambda _: self.execute())
        controls = w.HBox([w.VBox([self.op, self.size, self.dtype]), w.VBox([self.backends, self.preset, self.run])])
        mode = "replaying recordings" if workbench.replayed else "live"
        self.widget = w.VBox([w.HTML(f"<b>Sweep panel</b> ({mode})"), controls, self.progress, self.output])

    def _sync_op(self) -> None:
        op = self._ops[self.op.value]
        self.size.options = [(_size_label(op, c), i) for i, c in enumerate(op.default_sweep)]
        self.size.value = 0
        self.dtype.options = list(op.dtypes)
        self.dtype.value = op_default_dtype(op)
        self.backends.options = list(op.backends)
        self.backends.value = tuple(op.backends)

    def _step(self, label: str) -> None:
        self.progress.description = label
        self.progress.value += 1

    def execute(self) -> pd.DataFrame:
        """One run with the current settings; returns the comparison table of all runs."""
        op = self._ops[self.op.value]
        config = op.default_sweep[self.size.value]
        dtype, backends, preset = self.dtype.value, list(self.backends.value), self.preset.value
        self.progress.value, self.progress.max = 0, 3
        self._step("timing")
        run = self._timing(op, config, dtype, backends)
        self._step("profiling")
        self.note = ""
        try:
            run = run.merge(self._profile(op, config, dtype, backends, preset), on="backend", how="left")
        except LookupError as exc:  # replay: this preset or config was never recorded
            self.note = f"No profile: {exc}"
        run.insert(0, "run", len(self.history) + 1)
        self.history.append(run)
        self._step("done")
        self._show()
        return self.comparison()

    def _timing(self, op: OpSpec, config: dict[str, int], dtype: str, backends: list[str]) -> pd.DataFrame:
        if self.workbench.replayed:
            table, _ = load_table(self.workbench.gpu_slug, op.name, "timing")
            mask = (table["dtype"] == dtype) & table["backend"].isin(backends)
            for key, value in config.items():
                mask &= table[key] == value
            rows = table[mask]
            if rows.empty:
                raise LookupError(f"no recorded timing for {op.config_label(config)},dtype={dtype}")
        else:
            forget_loaded_modules()  # a kernel edited since the last run is rebuilt
            rows = measure(op, [config], [dtype], backends)
        columns = ["backend", "config", "dtype", "seconds", "bandwidth_bytes_per_s", "pct_of_copy"]
        return rows[columns].assign(mode=self.workbench.mode).reset_index(drop=True)

    def _profile(
        self, op: OpSpec, config: dict[str, int], dtype: str, backends: list[str], preset: str
    ) -> pd.DataFrame:
        result = profile_sweep(
            op.name,
            configs=[config],
            dtypes=[dtype],
            backends=backends,
            preset=preset,
            live=not self.workbench.replayed,
        )
        launches = result.launches
        keep = [c for c in ("backend", "kernel", "duration_s", "dram_bytes", "registers") if c in launches]
        if preset != "timing":
            self.figures.append(self.workbench.roofline_plot(result))
        return launches[keep].drop_duplicates("backend")

    def comparison(self) -> pd.DataFrame:
        return pd.concat(self.history, ignore_index=True) if self.history else pd.DataFrame()

    def _show(self) -> None:
        self.output.outputs = ()
        if self.note:
            self.output.append_display_data(HTML(f"<i>{self.note}</i>"))
        self.output.append_display_data(HTML(self.comparison().to_html(index=False, float_format="{:.4g}".format)))
        if self.figures:
            self.output.append_display_data(_png(self.figures[-1]))
