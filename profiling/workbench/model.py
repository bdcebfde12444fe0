"""What a model's notebook (notebook 10, the Conformer encoder) calls: one :class:`ModelWorkbench`, thin cells on top.

Live on a GPU every step runs :mod:`profiling.harness.encoder`, the functions ``benchmarks/encoder.py`` runs, on the
configuration the notebook chose, and records nothing: the recordings are that script's, one speed table and one per-op
breakdown per configuration in ``reports/<gpu>/encoder/``. In replay the speed table, the breakdown and the panel read
those recordings and, where there are none, say so in one sentence naming the command that makes them; the
correctness check needs the GPU (the oasr ops run on nothing else) and shows only what the reference computes.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as w
import pandas as pd
import torch
from IPython.display import HTML, Markdown, display
from matplotlib.figure import Figure

from oasr.models import CONFIGS, ConformerEncoder, ReferenceConformerEncoder, random_state_dict

from .. import provenance
from ..analysis import region as region_analysis
from ..harness import device_state, regions
from ..harness import encoder as harness
from ..nsight import region
from ..nsight.sweep import NoRecordingError
from ..readable import significant
from .display import Table, to_html
from .notebook import mode_banner, save_summary, trace_path, trace_plot, trace_table
from .pages import CONFORMER_PAGE
from .panel import ERROR_STYLE, NOTE_STYLE
from .tables import REPLAY, load_table, report_gpu_slug, workbench_mode

RECORD_COMMAND = "bash scripts/h200_session.sh encoder"
"""What records the encoder's tables on the H200 (``benchmarks/encoder.py`` and the encoder's GPU tests)."""
WHAT = {harness.SPEED: "speed table", harness.BREAKDOWN: "per-op breakdown"}
SPEED_SHOWN = (
    "config", "workload", "backend", "method", "batch", "frames", "seconds", "rtfx", "speedup_vs_torch_eager",
    "speedup_vs_torch_graph", "speedup_vs_torch_compile", "iqr_rel",
)  # fmt: skip
"""The speed table's columns a notebook shows (``audio_seconds`` is in the RTFx)."""
CHECK_FRAMES = (1001, 800, 250, 7)
"""The correctness check's batch (input frames per utterance: padded, and one utterance of a single output frame)."""


def recorded_table(kind: str, gpu_slug: str) -> tuple[pd.DataFrame, dict[str, Any]] | None:
    """Every configuration's recorded ``kind`` table (:data:`profiling.harness.encoder.SPEED` or ``BREAKDOWN``),
    concatenated in :data:`oasr.models.CONFIGS` order, and the first one's provenance; None when none is recorded."""
    if kind not in WHAT:
        raise ValueError(f"recorded_table: `kind` must be one of {list(WHAT)}, got {kind!r}")
    tables, metas = [], []
    for name in CONFIGS:
        try:
            table, meta = load_table(gpu_slug, name, kind, harness.RECORDINGS)
        except FileNotFoundError:
            continue
        tables.append(table)
        metas.append(meta)
    return (pd.concat(tables, ignore_index=True), metas[0]) if tables else None


def missing(kind: str, gpu_slug: str) -> str:
    """The one sentence said where no ``kind`` table is recorded."""
    return (
        f"No encoder {WHAT[kind]} is recorded in reports/{gpu_slug}/{harness.RECORDINGS}/ yet: "
        f"`{RECORD_COMMAND}` on the H200 records it."
    )


def speed_headlines(speed: pd.DataFrame) -> list[str]:
    """One index line per configuration and workload of a speed table: the oasr encoder in a CUDA graph, its RTFx and
    its speedups over torch (eager, graph, and ``torch.compile`` when it was timed)."""
    lines = []
    for row in speed[speed["backend"] == "oasr graph"].itertuples(index=False):
        text = (
            f"{row.config} {row.workload}: oasr in a CUDA graph {significant(1e6 * row.seconds)} µs, "
            f"RTFx {significant(row.rtfx)}, {row.speedup_vs_torch_eager:.2f}x torch eager, "
            f"{row.speedup_vs_torch_graph:.2f}x torch in a graph"
        )
        if pd.notna(row.speedup_vs_torch_compile):
            text += f", {row.speedup_vs_torch_compile:.2f}x torch.compile in a graph"
        lines.append(text)
    return lines


def per_op(breakdown: pd.DataFrame) -> pd.DataFrame:
    """A breakdown's rows summed per op (every ``gemm`` of the layer together), per configuration and workload (in
    their recorded order), the op largest over all of them first: ``seconds``, ``calls`` and ``share_pct`` (of the
    ops' sum)."""
    grouped = breakdown.groupby(["config", "workload", "op"], sort=False).agg(
        seconds=("seconds", "sum"), calls=("op", "size")
    )
    grouped = grouped.reset_index()
    total = grouped.groupby(["config", "workload"], sort=False)["seconds"].transform("sum")
    grouped["share_pct"] = 100 * grouped["seconds"] / total
    largest = grouped.groupby("op")["seconds"].sum().sort_values(ascending=False).index
    order = {"op": list(largest)} | {key: list(dict.fromkeys(grouped[key])) for key in ("config", "workload")}
    ranks = {key: pd.Categorical(grouped[key], values, ordered=True) for key, values in order.items()}
    ranked = grouped.assign(**ranks)
    shown = grouped.loc[ranked.sort_values(["config", "workload", "op"], kind="stable").index]  # as recorded, then op
    return shown.reset_index(drop=True)


def breakdown_figure(breakdown: pd.DataFrame, title: str = "") -> Figure:
    """One stacked horizontal bar per configuration and workload: the layer's time (µs) split by op."""
    table = per_op(breakdown)
    bars = list(dict.fromkeys(zip(table["config"], table["workload"], strict=True)))
    ops = list(dict.fromkeys(table["op"]))
    figure = Figure(figsize=(9.0, 1.0 + 0.6 * len(bars)), layout="constrained")
    ax = figure.subplots()
    left = [0.0] * len(bars)
    for op in ops:
        widths = []
        for config, workload in bars:
            rows = table[(table["config"] == config) & (table["workload"] == workload) & (table["op"] == op)]
            widths.append(1e6 * float(rows["seconds"].sum()))
        ax.barh(range(len(bars)), widths, left=left, label=op)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(range(len(bars)), [f"{config} {workload}" for config, workload in bars])
    ax.invert_yaxis()
    ax.set_xlabel("time of one layer's ops, each alone in a CUDA graph (µs)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    if title:
        figure.suptitle(title, fontsize=10)
    return figure


class ModelWorkbench:
    """The steps of the Conformer encoder's notebook, for one named configuration.

    Parameters
    ----------
    config : str
        A name of :data:`oasr.models.CONFIGS` (``"wenet"``, ``"conformer-l"``): the configuration built, checked,
        timed and broken down live (replay shows every recorded configuration).
    """

    def __init__(self, config: str = "wenet") -> None:
        if not isinstance(config, str):
            raise TypeError(
                f"ModelWorkbench: `config` must be a configuration's name (str), got {type(config).__name__}"
            )
        if config not in CONFIGS:
            raise ValueError(f"ModelWorkbench: unknown `config` {config!r}; the configurations are {list(CONFIGS)}")
        self.page = CONFORMER_PAGE
        self.notebook = self.page.notebook
        self.title = self.page.title
        self.config_name = config
        self.config = CONFIGS[config]
        self.mode = workbench_mode()
        self.gpu_slug = report_gpu_slug()
        self.headlines: list[str] = []
        self.recorded: dict[str, Any] = {}
        self.encoder: ConformerEncoder | None = None
        self.breakdown: pd.DataFrame | None = None
        """The last breakdown shown, one row per computing op of the first layer (live or recorded)."""
        self._models: dict[str, tuple[ConformerEncoder, ReferenceConformerEncoder]] = {}

    @property
    def replayed(self) -> bool:
        return self.mode == REPLAY

    @property
    def recordings(self) -> str:
        """Where the recordings of this GPU are (``reports/h200/encoder``)."""
        return f"reports/{self.gpu_slug}/{harness.RECORDINGS}"

    def _meta(self) -> dict[str, Any] | None:
        """The provenance of the first recorded table (speed, else breakdown), if any."""
        for kind in WHAT:
            found = recorded_table(kind, self.gpu_slug)
            if found is not None:
                return found[1]
        return None

    def banner(self) -> HTML:
        """An HTML banner: live on which GPU, or replayed from which recordings."""
        meta = self._meta() if self.replayed else None
        return mode_banner(self.replayed, meta, self.recordings, "The encoder itself is still built here, on the CPU.")

    def environment(self) -> Table:
        """This machine (GPU, driver, CUDA, torch, commit), the mode and the configuration."""
        info = {k: str(v) for k, v in provenance.collect().items()}
        if not self.replayed:
            info["GPU state now"] = device_state.describe({"before": device_state.reading()})
        recorded = self._meta()
        if recorded is not None:
            info["GPU state, timing"] = device_state.describe(recorded.get("device_state"))
        return Table({"value": {**info, "mode": self.mode, "config": self.config_name}})

    def models(self, name: str) -> tuple[ConformerEncoder, ReferenceConformerEncoder]:
        """The oasr encoder and its torch reference of configuration ``name`` (bfloat16 on the GPU, as
        :func:`profiling.harness.encoder.build`), kept for the next call; one configuration at a time (the other's
        memory is freed)."""
        if name not in self._models:
            self._models.clear()
            torch.cuda.empty_cache()
            self._models[name] = harness.build(name)
        return self._models[name]

    # ------------------------------------------------------------ build and correctness

    def build(self) -> Table:
        """Build the encoder of the chosen configuration (random weights: packing and BatchNorm folding happen at the
        load): bfloat16 on the GPU live, on the CPU in replay (its weights only: the oasr ops need a CUDA GPU)."""
        device = "cpu" if self.replayed else "cuda"
        self.encoder = ConformerEncoder.from_config(self.config_name, device=device)
        row = {
            "config": self.config_name,
            **{field: getattr(self.config, field) for field in ("d_model", "heads", "ff_dim", "layers", "kernel_size")},
            "position": self.config.position,
            "parameters": sum(p.numel() for p in self.encoder.parameters()),
            "dtype": str(self.encoder.dtype).removeprefix("torch."),
            "device": device,
        }
        return Table([row])

    def correctness(self) -> Any:
        """Live: every stage of the oasr encoder against the float64 reference on a padded batch
        (:func:`profiling.harness.encoder.layer_errors`, torch's own bfloat16 error beside it). Without a GPU: says
        that it needs one, and shows what the float64 reference computes on the CPU for one 1 s utterance."""
        config, generator = self.config, torch.Generator().manual_seed(7)
        state = random_state_dict(config)  # from_config's weights (seed 0)
        if self.replayed:
            reference = ReferenceConformerEncoder(config)
            reference.load_state_dict(state)
            feats = torch.randn(1, 100, config.input_dim, generator=generator, dtype=torch.float64)
            stages = harness.reference_stages(reference.double(), feats, torch.tensor([100]))
            return HTML(
                "<p><b>The comparison needs a CUDA GPU</b>: the oasr encoder's ops run only on one, and no comparison "
                "is recorded. On a GPU this cell compares the front end, each layer and the whole encoder with the "
                "float64 reference. Here, on the CPU, only what that reference computes for one 1 s utterance "
                f"({html.escape(self.config_name)}, random weights): each stage's output and its RMS.</p>"
                + to_html(stages)
            )
        encoder, own = self.models(self.config_name)
        reference = ReferenceConformerEncoder(config)
        reference.load_state_dict(state)
        reference = reference.to("cuda", torch.float64)
        feats = torch.randn(len(CHECK_FRAMES), max(CHECK_FRAMES), config.input_dim, generator=generator).cuda()
        errors = harness.layer_errors(encoder, reference, feats, torch.tensor(CHECK_FRAMES, device="cuda"), own)
        whole = errors[errors["stage"] == "encoder"].iloc[0]
        self.recorded |= {"encoder_rel_err": float(whole["rel_err"]), "torch_rel_err": float(whole["torch_rel_err"])}
        return Table(errors)

    # ------------------------------------------------------------ speed and breakdown

    def speed_table(self, compile_modes: tuple[str, ...] = ("default",)) -> Any:
        """The chosen configuration on each workload against torch, or every recorded configuration (replay).

        Live it runs :func:`profiling.harness.encoder.time_workload` with ``compile_modes`` of ``torch.compile``."""
        if self.replayed:
            found = recorded_table(harness.SPEED, self.gpu_slug)
            if found is None:
                self.headlines = [missing(harness.SPEED, self.gpu_slug)]
                return Markdown(f"*{missing(harness.SPEED, self.gpu_slug)}*")
            speed = found[0]
        else:
            models = self.models(self.config_name)
            rows = [
                row
                for workload in harness.WORKLOADS.values()
                for row in harness.time_workload(self.config_name, workload, models, compile_modes)
            ]
            speed = pd.DataFrame(rows, columns=list(harness.SPEED_COLUMNS))
        self.headlines = speed_headlines(speed)
        return Table(speed[list(SPEED_SHOWN)])

    def breakdown_table(self) -> Any:
        """The first layer's time per op (every call of an op summed), per configuration and workload: live for the
        chosen configuration (:func:`profiling.harness.encoder.breakdown`), else the recordings."""
        if self.replayed:
            found = recorded_table(harness.BREAKDOWN, self.gpu_slug)
            if found is None:
                self.breakdown = None
                return Markdown(f"*{missing(harness.BREAKDOWN, self.gpu_slug)}*")
            self.breakdown = found[0]
        else:
            encoder = self.models(self.config_name)[0]
            parts = [harness.breakdown(self.config_name, load, encoder) for load in harness.WORKLOADS.values()]
            self.breakdown = pd.concat(parts, ignore_index=True)
        table = Table(per_op(self.breakdown))
        layers = self.breakdown.groupby(["config", "workload"], sort=False)
        table.attrs["notes"] = [
            f"{config} {workload}: the ops' sum {significant(1e6 * rows['seconds'].sum())} µs, the layer in one CUDA "
            f"graph {significant(1e6 * rows['layer_seconds'].iloc[0])} µs"
            for (config, workload), rows in layers
        ]
        return table

    def breakdown_plot(self) -> Figure | None:
        """The breakdown as stacked bars (None when there is none: the table's cell said why)."""
        if self.breakdown is None:
            return None
        where = f", replayed from {self.gpu_slug} recordings" if self.replayed else ""
        return breakdown_figure(self.breakdown, title=f"One Conformer layer per op{where}")

    def _layer_shape(self) -> dict[str, int]:
        """The built-in layer regions' shape at this configuration's d and kernel size."""
        return {**regions.CONFORMER_SHAPE, "d": self.config.d_model, "k": self.config.kernel_size}

    def layer_timeline(self) -> None:
        """One eager call of each layer (oasr's, torch's; the shape of :meth:`layer_profile`) traced with
        torch.profiler, or its saved trace in replay: kernel count, kernel time and the idle gaps between kernels
        against the call's time (the launch-bound share a CUDA graph removes), then the timeline itself."""
        for impl in regions.IMPLEMENTATIONS:
            name = f"conformer_layer_{impl}"
            path = trace_path(self.gpu_slug, self.notebook, name)
            call = regions.region_call(name, self._layer_shape()) if not self.replayed else None
            display(Markdown(f"### {impl}"), trace_table(path, call, self.replayed, name))
            figure = trace_plot(path, name, self.gpu_slug if self.replayed else None)
            if figure is not None:
                display(figure)

    def layer_profile(self) -> Any:
        """Every kernel of one layer of the chosen configuration's d and kernel size (at the built-in regions' batch
        and length, :data:`profiling.harness.regions.CONFORMER_SHAPE`) under one ncu run each, oasr's layer and
        torch's: where their time goes, their kernels on the roofline, and the two side by side. Replay shows the
        recordings, or the sentence naming the command that makes them on a GPU."""
        shape = self._layer_shape()
        tables = {}
        for impl in regions.IMPLEMENTATIONS:
            try:
                result = region.profile_builtin(f"conformer_layer_{impl}", shape, live=not self.replayed)
            except NoRecordingError as error:
                return Markdown(f"*{html.escape(str(error))}*")
            tables[impl] = region_analysis.region_table(result)
        for impl, table in tables.items():
            display(Markdown(f"### {impl}"), Table(table.head(10)), region_analysis.time_plot(table))
            display(region_analysis.roofline_points(table))
        display(Table(region_analysis.region_summary(tables)))
        return region_analysis.comparison_plot(tables)

    # ------------------------------------------------------------ summary

    def write_summary(self) -> Any:
        """Headline figures for the report index, as every notebook writes them
        (:func:`profiling.workbench.notebook.save_summary`); in replay with nothing recorded, the sentence that says
        so, with this run's commit and date."""
        meta = provenance.collect() if not self.replayed else self._meta()
        if meta is None:
            meta = {k: v for k, v in provenance.collect().items() if k in ("git_commit", "date")}
        if not self.headlines and self.replayed and recorded_table(harness.SPEED, self.gpu_slug) is None:
            self.headlines = [missing(harness.SPEED, self.gpu_slug)]
        return save_summary(self.notebook, self.title, self.mode, self.headlines, meta, self.recorded)


class EncoderPanel:
    """Pick a configuration, a batch and a duration, press **Run**: live, the encoder and torch are timed on that many
    utterances of that length (every backend; ``torch.compile`` when ticked, slow to build); in replay, the recorded
    rows of that setting are shown, and a setting not recorded is named with those that are. Runs accumulate in one
    table. Built so that tests drive it without a browser: set the widgets' values, call ``run.click()``."""

    BATCHES = (1, 4, 16, 64)
    SECONDS = (2.5, 5.0, 10.0, 15.0, 30.0, 60.0)

    def __init__(self, workbench: ModelWorkbench) -> None:
        self.workbench = workbench
        self.history: list[pd.DataFrame] = []
        self.note = ""
        self.error = ""
        found = recorded_table(harness.SPEED, workbench.gpu_slug) if workbench.replayed else None
        self._recorded = None if found is None else found[0]
        if workbench.replayed and self._recorded is not None:
            rows = self._recorded
            configs = list(dict.fromkeys(rows["config"]))
            batches = sorted(set(rows["batch"].astype(int)))
            seconds = sorted(set(rows["frames"] / harness.FRAMES_PER_SECOND))
        elif workbench.replayed:
            configs, batches, seconds = [workbench.config_name], [self.BATCHES[0]], [self.SECONDS[0]]
        else:
            configs, batches, seconds = list(CONFIGS), list(self.BATCHES), list(self.SECONDS)
        self.config = w.Dropdown(
            options=configs, value=workbench.config_name if workbench.config_name in configs else configs[0],
            description="config",
        )  # fmt: skip
        self.batch = w.Dropdown(options=batches, description="batch")
        self.seconds = w.Dropdown(options=[(f"{s:g} s", s) for s in seconds], description="duration")
        self.compile = w.Checkbox(value=False, description="torch.compile", disabled=workbench.replayed)
        self.run = w.Button(description="Run", button_style="primary", tooltip="time this setting")
        self.output = w.Output()
        self.run.on_click(lambda _: self.execute())
        if not workbench.replayed:
            mode = "live"
        elif self._recorded is None:
            mode = html.escape(missing(harness.SPEED, workbench.gpu_slug))
            for control in (self.config, self.batch, self.seconds, self.run):
                control.disabled = True
        else:
            mode = (
                f"replaying recordings from {html.escape(workbench.gpu_slug)}: the choices are the recorded settings "
                "(a duration is the batch's longest utterance)"
            )
        controls = w.HBox([w.VBox([self.config, self.batch, self.seconds]), w.VBox([self.compile, self.run])])
        self.widget = w.VBox([w.HTML(f"<b>Encoder panel</b> ({mode})"), controls, self.output])

    def rows(self) -> pd.DataFrame:
        """The speed rows of the setting chosen: timed (live) or recorded (replay).

        Raises
        ------
        ValueError
            In replay, a setting that was not recorded (the message names those that were).
        """
        config, batch, seconds = self.config.value, int(self.batch.value), float(self.seconds.value)
        if not self.workbench.replayed:
            workload = harness.Workload.uniform(batch, seconds)
            modes = ("default",) if self.compile.value else ()
            timed = harness.time_workload(config, workload, self.workbench.models(config), modes)
            return pd.DataFrame(timed, columns=list(harness.SPEED_COLUMNS))
        if self._recorded is None:
            raise ValueError(missing(harness.SPEED, self.workbench.gpu_slug))
        table = self._recorded
        frames = round(seconds * harness.FRAMES_PER_SECOND)
        chosen = table[(table["config"] == config) & (table["batch"] == batch) & (table["frames"] == frames)]
        if chosen.empty:
            settings = table.drop_duplicates(["config", "batch", "frames"])
            held = ", ".join(
                f"{r.config} {r.batch} x {r.frames / harness.FRAMES_PER_SECOND:g} s" for r in settings.itertuples()
            )
            raise ValueError(f"{config}, {batch} x {seconds:g} s is not recorded; recorded: {held}")
        return chosen

    def execute(self) -> pd.DataFrame | None:
        """Run the setting chosen and show every run so far; None (and the reason, in the panel) when it cannot."""
        self.note = self.error = ""
        try:
            rows = self.rows()
        except ValueError as exc:
            self.note = str(exc)
            self._show(HTML(f"<div style='{NOTE_STYLE}'>{html.escape(self.note)}</div>"))
            return None
        except Exception as exc:  # shown in the panel, not lost in JupyterLab's log
            self.error = f"{type(exc).__name__}: {exc}"
            self._show(HTML(f"<div style='{ERROR_STYLE}'>{html.escape(self.error)}</div>"))
            return None
        self.history.append(rows.assign(run=len(self.history) + 1))
        table = pd.concat(self.history, ignore_index=True)
        self._show(Table(table[["run", *SPEED_SHOWN]]))
        return table

    def _show(self, shown: Any) -> None:
        self.output.clear_output()
        with self.output:
            display(shown)
