"""What a family notebook calls: one :class:`Workbench` per notebook, thin cells on top.

Each step runs live on a GPU machine and stores what it measured under
``reports/<gpu>/`` (tables as CSV with a provenance sidecar; profiles through
:mod:`profiling.nsight.recordings`). On a machine without a GPU the same calls return those
recordings, and everything they return or show says it was replayed, from which
GPU, commit and date. ``OASR_WORKBENCH_MODE=live|replay`` forces a mode.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from IPython.display import HTML, Markdown, display

from oasr.jit import env
from oasr.jit.compilation_context import CompilationContext
from oasr.jit.families import Family

from .. import compare, provenance
from ..analysis import limiter, plots, roofline, timeline
from ..analysis import region as region_analysis
from ..files import ShownPath, atomic_write_text, reports_root, shown_path
from ..harness import correctness, device_state, regions, timing
from ..harness.measure import measure
from ..harness.ops import Config, OpSpec, get_op, ops_of
from ..nsight import plausibility, region, runner, source
from ..nsight.sweep import NoRecordingError, ProfileResult, profile_sweep
from ..readable import header
from . import headline
from .display import Table, config_in_op_order
from .pages import page_of
from .tables import REPLAY, load_table, report_gpu_slug, save_table, summary_path, workbench_mode


class Workbench:
    """The steps of a family's notebook, for the family's ops in the harness."""

    def __init__(self, family: Family) -> None:
        self.family = family
        self.page = page_of(family)
        self.notebook = self.page.notebook
        self.ops: list[OpSpec] = ops_of(family)
        self.title = self.page.title
        self.mode = workbench_mode()
        self.gpu_slug = report_gpu_slug()
        self.headlines: list[str] = []
        self.recorded: dict[str, Any] = {}

    @property
    def replayed(self) -> bool:
        return self.mode == REPLAY

    @property
    def op_names(self) -> list[str]:
        return [op.name for op in self.ops]

    # ------------------------------------------------------------ environment

    def environment(self) -> pd.DataFrame:
        """This machine: GPU, driver, CUDA, nvcc, ncu, target archs (and the mode), the GPU's state now (live), and
        its state around the recorded timing (clocks, power, temperature, L2 persisting state before -> after)."""
        info = dict(provenance.collect())
        if not self.replayed:
            info["GPU state now"] = device_state.describe({"before": device_state.reading()})
        recorded = self._recorded_meta()
        if recorded is not None:
            info["GPU state, timing"] = device_state.describe(recorded.get("device_state"))
        try:
            info["ncu"] = str(runner.find_ncu())
        except runner.NcuNotFoundError:  # shown, not raised: replay needs no ncu
            info["ncu"] = (
                "not found (replay needs none)" if self.replayed else "not found: profiling needs Nsight Compute"
            )
        info["target archs"] = " ".join(CompilationContext().arch_names())
        info["nvcc path"] = shutil.which("nvcc") or "not found"
        info["mode"] = self.mode
        return Table({"value": {k: str(v) for k, v in info.items()}})

    def banner(self) -> Any:
        """An HTML banner: live on which GPU, or replayed from which recordings."""
        meta = self._recorded_meta() if self.replayed else None
        return mode_banner(self.replayed, meta, f"reports/{self.gpu_slug}", "Kernels are still JIT-compiled here.")

    def _recorded_meta(self) -> dict[str, Any] | None:
        """Provenance of the first of this family's recorded timing tables, if any."""
        for op in self.ops:
            try:
                return load_table(self.gpu_slug, op.name, "timing")[1]
            except FileNotFoundError:
                continue
        return None

    # ------------------------------------------------------------ the kernel

    def kernel_source(self) -> Any:
        """The family's kernel headers (its page's ``headers``), as highlighted code."""
        blocks = [
            f"`include/{path}`\n\n```cpp\n{(env.OASR_INCLUDE_DIR / path).read_text()}\n```"
            for path in self.page.headers
        ]
        return Markdown("\n\n".join(blocks))

    def build(self) -> pd.DataFrame:
        """JIT-compile the family's module in this session: time, cache hit, flags."""
        info = self.family.jit_spec().build()
        row = {
            "module": info.name,
            "cache": "hit" if info.cache_hit else "miss (compiled)",
            "build_seconds": info.seconds,
            "key": info.key,
            "library": str(shown_path(info.library)),
            "nvcc flags": " ".join(f for f in info.nvcc_flags if not f.startswith("-I")),
        }
        return Table([row])

    # ------------------------------------------------------------ correctness

    def correctness(self, configs: dict[str, Sequence[Config]] | None = None) -> pd.DataFrame:
        """Max abs/rel error of oasr and torch against float64, per dtype and size."""
        frames = []
        for op in self.ops:
            if self.replayed:
                df, _ = load_table(self.gpu_slug, op.name, "correctness")
            else:
                chosen = (configs or {}).get(op.name) or correctness_configs(op)
                df = correctness.check_op(op, chosen, dtypes=op.dtypes)
                save_table(df, self.gpu_slug, op.name, "correctness", provenance.collect())
            frames.append(df)
        table = pd.concat(frames, ignore_index=True)
        self.recorded["correctness_passed"] = bool(table["passed"].all())
        shown = Table(table.reindex(columns=correctness.COLUMNS))
        older = [f.loc[0, "op"] for f in frames if correctness.RECORDED_BEFORE_SCALED_REL_ERR not in f]
        if older:  # their max_rel_err divided by each element's reference: 1e303 next to a near-zero one
            shown = Table(shown.assign(max_rel_err=shown["max_rel_err"].where(shown["err_over_tol"].notna())))
            shown.attrs["notes"] = [
                f"{header('max_rel_err')} and {header('err_over_tol')}: not in the recordings of {', '.join(older)}, "
                "made when the relative error was taken element by element (it blew up on near-zero references)"
            ]
        return shown

    # ------------------------------------------------------------ timing

    def timing(self, dtypes: Sequence[str] | None = None, configs: Sequence[Config] | None = None) -> pd.DataFrame:
        """oasr against torch over each op's sweep: median time, bandwidth, % of the copy ceiling, and the rows whose
        bandwidth passes 95% of that copy flagged (:func:`profiling.nsight.plausibility.flag_timing`), their likely
        cause beneath the table."""
        frames = []
        for op in self.ops:
            if self.replayed:
                df, _ = load_table(self.gpu_slug, op.name, "timing")
            else:
                with device_state.around() as state:
                    df = measure(op, configs or op.default_sweep, dtypes or op.dtypes)
                copy_bytes_per_s = float(df["copy_bytes_per_s"].iloc[0])
                cublas_flop_per_s = timing.measure_cublas_tflops() * 1e12
                meta = {**provenance.collect(), "copy_bytes_per_s": copy_bytes_per_s, "device_state": state}
                save_table(df, self.gpu_slug, op.name, "timing", {**meta, "cublas_flop_per_s": cublas_flop_per_s})
                roofline.save_measured_ceilings(
                    self.gpu_slug, copy_bytes_per_s, cublas_flop_per_s, provenance.collect()
                )
            frames.append(plausibility.flag_timing(df))  # each op against the copy timed with it
        table = pd.concat(frames, ignore_index=True)
        self.headlines += headline.headlines(self.ops, self.gpu_slug)  # from the recordings, live or replayed
        older = [f.loc[0, "op"] for f in frames if f.get("eager_seconds", pd.Series(dtype=float)).isna().all()]
        shown = table if "eager_seconds" in table else table.assign(eager_seconds=float("nan"))
        shown = Table(shown.drop(columns="flag_cause"))  # the causes go beneath the table, once per rule
        if older:  # the timing cell shows the column: its missing values are said, not left as dashes alone
            shown.attrs["notes"] = [
                f"eager (µs): not in the recordings of {', '.join(older)}, made before the eager latency was timed"
            ]
        shown.attrs["notes"] = [*shown.attrs.get("notes", []), *plausibility.notes(table)]
        return shown

    @staticmethod
    def speedup_table(table: pd.DataFrame) -> pd.DataFrame:
        """Per op, config and dtype: oasr and torch times (seconds; shown in µs), speedup, % of copy."""
        wide = table.pivot_table(
            index=["op", "config", "dtype"], columns="backend", values=["seconds", "pct_of_copy"], sort=False
        )
        return Table(
            {
                "oasr_seconds": wide[("seconds", "oasr")],
                "torch_seconds": wide[("seconds", "torch")],
                "speedup": wide[("seconds", "torch")] / wide[("seconds", "oasr")],
                "oasr_pct_of_copy": wide[("pct_of_copy", "oasr")],
                "torch_pct_of_copy": wide[("pct_of_copy", "torch")],
            }
        )

    def bandwidth_plot(self, table: pd.DataFrame) -> Any:
        """Each op's rate against size: bandwidth against the GPU's one measured copy ceiling (as on the roofline),
        or, for an op whose largest case is compute-bound (its headline's metric), TFLOP/s against cuBLAS's."""
        saved = roofline.load_measured_ceilings(self.gpu_slug)
        copy = float(saved["copy_bytes_per_s"]) if saved else float(table["copy_bytes_per_s"].iloc[0])
        flop_ceilings = {}
        for op in self.ops:
            rows, meta = table[table["op"] == op.name], load_table(self.gpu_slug, op.name, "timing")[1]
            ceilings = headline.recorded_ceilings(meta, self.gpu_slug)
            if ceilings.cublas_flop_per_s and headline.largest_is_compute_bound(op, rows, ceilings):
                flop_ceilings[op.name] = ceilings.cublas_flop_per_s
        figure = plots.rate_vs_size(table, copy_ceiling=copy, flop_ceilings=flop_ceilings, title="")
        what = "FLOP rate" if len(flop_ceilings) == len(self.ops) else "Bandwidth" if not flop_ceilings else "Rate"
        title = f"{what} vs size" + (f", replayed from {self.gpu_slug} recordings" if self.replayed else "")
        figure.suptitle(title, fontsize=10, color="#b06000" if self.replayed else "k")
        return figure

    # ------------------------------------------------------------ Nsight Compute

    def profile(
        self, op: str | None = None, dtypes: Sequence[str] = ("float16",), preset: str = "roofline"
    ) -> ProfileResult:
        """The op's sweep under ncu (both backends, one process), or its recordings."""
        return profile_sweep(op or self.op_names[0], dtypes=dtypes, preset=preset, live=not self.replayed)

    @staticmethod
    def analyze(result: Any) -> pd.DataFrame:
        return roofline.analyze(result)

    def launch_table(self, result: Any) -> pd.DataFrame:
        """One row per profiled launch: time, bytes and FLOP next to the op's own count, roof, and the figures
        flagged as implausible (:mod:`profiling.nsight.plausibility`), their likely causes beneath the table."""
        columns = [
            "op", "backend", "config", "dtype", "kernel", "grid_size", "block_size", "registers_per_thread",
            "duration_s", "dram_bytes", "expected_bytes", "bytes_vs_expected_pct", "flop", "expected_flop",
            "dram_bw_bytes_per_s", "pct_dram_peak", "bound", "pct_of_roof", "flagged",
        ]  # fmt: skip
        launches = config_in_op_order(self.analyze(result))
        if launches["op"].nunique() == 1:  # the section's heading names it
            columns.remove("op")
        table = Table(launches[[c for c in columns if c in launches]])
        states = dict.fromkeys(device_state.describe(p.get("device_state")) for p in result.provenance)
        table.attrs["notes"] = [*plausibility.notes(launches), *(f"GPU state, profile: {s}" for s in states)]
        return table

    def ceilings(self, result: Any) -> pd.DataFrame:
        """The roofline's ceilings (counters and measured); shown with each value in its unit."""
        return Table(roofline.ceilings(result.device))

    def roofline_plot(self, result: Any) -> Any:
        return plots.roofline_plot(
            config_in_op_order(roofline.analyze(result)), self.ceilings(result), title=f"{result.op}: {result.banner}"
        )

    def hierarchical_plot(self, result: Any, backend: str = "oasr") -> Any:
        launches = config_in_op_order(roofline.analyze(result))
        rows = launches[launches["backend"] == backend]
        largest = rows.loc[rows["dram_bytes"].idxmax()]
        return plots.hierarchical_roofline(largest, self.ceilings(result))

    @staticmethod
    def advice(result: Any) -> Any:
        """Nsight Compute's rule results for each backend's largest launch, messages in full."""
        launches, keys = result.launches, ["profile", "launch"]
        largest = launches.loc[launches.groupby("backend")["dram_bytes"].idxmax(), keys]
        columns = [c for c in ("backend", "kernel", "config", "dtype", "title", "message") if c in result.advice]
        table = config_in_op_order(result.advice.merge(largest, on=keys))[columns]
        styled = table.style.format(escape="html").format_index(escape="html", axis=1)  # ncu's text is data
        return styled.set_properties(subset=["message"], **{"text-align": "left", "white-space": "pre-wrap"})

    @staticmethod
    def limits(result: Any) -> pd.DataFrame:
        """Per launch, what limits it (:mod:`profiling.analysis.limiter`) next to ncu's own advice titles."""
        table = limiter.with_advice(limiter.limiters(result.launches), result.advice)
        columns = ["backend", "config", "dtype", "kernel", "sentence", "ncu_advice"]
        return Table(config_in_op_order(table)[columns])

    def hotspots(self, op: str | None = None, count: int = 8) -> Any:
        """The largest config's oasr kernel under the ``source`` preset: what limits it, its ``count``
        most-sampled source lines with their stall reasons, and its source with a heat bar per line.

        Live on a GPU it profiles (cached like every profile); in replay it shows the recording, or
        says how to make one."""
        spec = next(o for o in self.ops if o.name == (op or self.op_names[0]))
        config = dict(spec.default_sweep[-1])
        try:
            result = profile_sweep(spec.name, [config], backends=("oasr",), preset="source", live=not self.replayed)
        except NoRecordingError:
            flags = ",".join(f"{k}={v}" for k, v in config.items())
            return Markdown(
                f"*No `source`-preset recording of `{spec.name}` yet. On a GPU: "
                f"`python -m profiling.nsight --op {spec.name} --preset source --backends oasr --config {flags}`, "
                "then commit `reports/`.*"
            )
        try:
            lines = source.result_lines(result.launches, result.report_paths)
        except ValueError as exc:  # a damaged line table: said in one line, nothing of it shown
            return HTML(f"<p><b>No hotspots of {html.escape(spec.name)}:</b> {html.escape(str(exc))}</p>")
        launch = result.launches.loc[result.launches["duration_s"].idxmax()]  # the op's main kernel
        mine = lines[(lines["launch"] == launch["launch"]) & (lines["profile"] == launch["profile"])]
        verdict = limiter.limit(launch, limiter.stall_shares(mine))
        shown = config_in_op_order(pd.DataFrame([launch]))["config"].iloc[0]
        head = html.escape(f"{spec.name} {shown} {launch['dtype']} ({launch['kernel']}): {verdict.sentence}")
        page = f"<p><b>{head}</b><br><small>{html.escape(result.banner)}</small></p>"
        try:
            annotated = source.annotated_source_html(mine)
        except ValueError as exc:  # no line information in this launch
            return HTML(page + f"<p>{html.escape(str(exc))}</p>")
        top = source.top_lines(mine, count=count).rename(columns={"samples": "warp_samples"})
        top["file"] = top["file"].map(source.shown_file)
        if top["file"].nunique() == 1:  # one file: named once, in the heading
            page += f"<p><small>Top lines, all in {html.escape(top['file'].iloc[0])}:</small></p>"
            top = top.drop(columns="file")
        return HTML(page + Table(top)._repr_html_() + annotated)

    def compare(
        self,
        base: str | None = None,
        head: str = compare.WORKTREE,
        op: str | None = None,
        configs: Sequence[Config] | None = None,
    ) -> Any:
        """``op``'s kernel at revision ``base`` against ``head`` (default: the working tree, so an edit made in
        this session is compared with the last commit): per config both times, the ratio and the verdict
        (:mod:`profiling.compare`). Replay compares the recorded samples of the two source states; there the
        default ``base`` is the revision recorded against this tree's sources (``scripts/record_compare.sh``),
        else HEAD. ``configs`` is the sweep (default: the op's two largest configs, the recorded ones);
        :meth:`compare_plot` draws the returned table along it."""
        name = op or self.op_names[0]
        try:
            base = base or (self._recorded_base(name) if self.replayed else None) or "HEAD"
            table = compare.compare_states(name, base, head, configs, live=not self.replayed)
        except (ValueError, timing.NoGPUError) as exc:
            return Markdown(f"*No comparison of `{name}`: {exc}*")
        return Table(table)

    def compare_plot(self, table: Any) -> Any:
        """The ratio per config of a :meth:`compare` table with its bootstrap interval and 1 +- threshold band
        (:func:`profiling.analysis.plots.compare_ratios`); None for a "No comparison" note, which the cell has
        shown already."""
        if not isinstance(table, pd.DataFrame):
            return None
        op, base, head = (str(table[c].iloc[0]) for c in ("op", "base", "head"))
        where = f", replayed from {self.gpu_slug} recordings" if self.replayed else ""
        return plots.compare_ratios(table, title=f"{op}: {head} against {base}{where}")

    def _recorded_base(self, op: str) -> str | None:
        """The revision whose samples were recorded with this working tree's (``C~1`` for a compare of C against
        its parent recorded at C), None when none was."""
        with compare.checkout(compare.WORKTREE) as root:
            mine = compare.state_hash(get_op(op).family, root)
        states = compare.recorded_states(self.gpu_slug, op)
        here = next((s for s in states if s["hash"] == mine), None)
        if here is None:
            return None
        with_it = [
            s for s in states if s["commit"] == here["commit"] and s["hash"] != mine and s["state"] != "WORKTREE"
        ]
        return with_it[0]["revision"] if with_it else None

    # ------------------------------------------------------------ regions

    def profile_region(
        self, fn: object, name: str | None = None, preset: str = "roofline", **kwargs: Any
    ) -> pd.DataFrame:
        """Every kernel of one call of ``fn`` under one ncu run (:mod:`profiling.nsight.region`), or its recording.

        ``fn`` is a built-in region's name (``"conformer_layer_oasr"``, ``"conformer_layer_torch"``; ``shape=``
        changes its d, b, t, k) or an importable call (``"module:qualname"``, a module-level function, a
        ``functools.partial`` of one), which then needs ``name``. Returns the tidy per-launch table
        (:func:`profiling.analysis.region.region_table`), or with ``preset="full"`` every metric of every launch,
        long-format (metric, value, unit, section). In replay the recording is shown, labelled (``attrs["banner"]``);
        with none, :class:`~profiling.nsight.sweep.NoRecordingError` names the command that makes it on a GPU.
        """
        live = not self.replayed
        if isinstance(fn, str) and fn in regions.REGIONS:
            result = region.profile_builtin(fn, kwargs.pop("shape", None), preset=preset, live=live, **kwargs)
        elif name is None:
            raise ValueError(f"`name` is needed for a region that is not built in ({', '.join(regions.REGIONS)})")
        else:
            result = region.profile_region(fn, name, preset=preset, live=live, **kwargs)
        if result.metrics is not None:
            metrics = result.metrics.copy()
            metrics.attrs.update(region=result.op, banner=result.banner, replayed=result.replayed)
            return metrics
        table = region_analysis.region_table(result)
        shown = Table(table)
        shown.attrs.update(table.attrs)  # the constructor drops them; the plots read the wall time and device there
        return shown

    def full_metrics(
        self, op: str | None = None, config: Config | None = None, backend: str = "oasr", dtype: str = "float16"
    ) -> pd.DataFrame:
        """Every metric of ``ncu --set full`` for one launch of ``op`` at ``config`` (default: its largest), one row
        each (metric, value, unit, section; :func:`profiling.nsight.region.metrics_frame`). Live it profiles that one
        config (cached like every profile); in replay it shows the recording, or the
        :class:`~profiling.nsight.sweep.NoRecordingError` names the command that makes it on a GPU."""
        spec = next((o for o in self.ops if o.name == (op or self.op_names[0])), None)
        if spec is None:
            raise ValueError(f"`op` must be one of this notebook's ops {self.op_names}, got {op!r}")
        config = dict(config or spec.default_sweep[-1])
        try:
            result = profile_sweep(
                spec.name, [config], dtypes=(dtype,), backends=(backend,), preset="full", live=not self.replayed
            )
        except NoRecordingError:
            flags = ",".join(f"{k}={v}" for k, v in config.items())
            raise NoRecordingError(
                f"no 'full' recording of {spec.name} {flags} {dtype} ({backend}); on a GPU: "
                f"`python -m profiling.nsight --op {spec.name} --preset full --backends {backend} --dtypes {dtype} "
                f"--config {flags} --live`, then commit reports/"
            ) from None
        frames = []
        for path in result.report_paths:  # a cached report may hold other launches too: this config's alone
            name = path.name.removesuffix(".ncu-rep")
            mine = result.launches.loc[result.launches["profile"] == name, "launch"]
            metrics = region.report_metrics(path)
            frames.append(metrics[metrics["launch"].isin(mine)].assign(profile=name))
        metrics = pd.concat(frames, ignore_index=True)
        metrics.attrs.update(op=spec.name, banner=result.banner, replayed=result.replayed)
        return metrics

    @staticmethod
    def region_time_plot(table: pd.DataFrame) -> Any:
        """Where the region's time goes: per op and per kernel, stacked, against its wall time."""
        return region_analysis.time_plot(table)

    @staticmethod
    def region_roofline(table: pd.DataFrame) -> Any:
        """Every kernel of the region on the roofline, sized by its share of the time."""
        return region_analysis.roofline_points(table)

    @staticmethod
    def region_compare(tables: dict[str, pd.DataFrame]) -> Any:
        """Regions side by side (``{"oasr": table, "torch": table}``): the summary table, each region's banner,
        and the plot of their times and top kernels."""
        summary = region_analysis.region_summary(tables)
        caption = region_analysis.summary_caption(tables)
        display(HTML(f"<p><small>{caption}</small></p>" + Table(summary)._repr_html_()))
        return region_analysis.comparison_plot(tables)

    # ------------------------------------------------------------ timeline

    def trace_path(self, name: str) -> Path:
        """Where the Chrome trace of region ``name`` lies (:func:`trace_path`)."""
        return trace_path(self.gpu_slug, self.notebook, name)

    def timeline(self, fn: Callable[[], object] | None, name: str) -> Any:
        """One eager call of the region ``fn`` traced, or its saved trace in replay (:func:`trace_table`)."""
        return trace_table(self.trace_path(name), fn, self.replayed, name)

    def timeline_plot(self, name: str) -> Any:
        """The kernels of region ``name``'s saved trace along time (:func:`trace_plot`)."""
        return trace_plot(self.trace_path(name), name, self.gpu_slug if self.replayed else None)

    # ------------------------------------------------------------ summary

    def write_summary(self) -> Path:
        """Headline figures for the report index: ``reports/<gpu>/<notebook>.summary.json`` live,
        ``reports/replay/<gpu>/...`` in replay (git-ignored: replay never rewrites the committed ones)."""
        meta = self._recorded_meta()
        if not self.replayed:  # this machine's provenance, with the GPU state the timing just recorded ran in
            state = (meta or {}).get("device_state")
            meta = {**provenance.collect(), **({"device_state": state} if state else {})}
        if meta is None:
            raise FileNotFoundError(
                f"no recorded timing table for {', '.join(self.op_names)} in reports/{self.gpu_slug}"
            )
        return save_summary(self.notebook, self.title, self.mode, self.headlines, meta, self.recorded)


REPLAY_STYLE = "padding:.6em;background:#fff4e5;border-left:4px solid #f0a020"


def trace_path(gpu_slug: str, notebook: str, name: str) -> Path:
    """Where the Chrome trace of region ``name`` lies: beside the notebook's report,
    ``reports/<gpu>/<notebook>.<name>.trace.json.gz`` (the recordings' folder in replay too)."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"name must be letters, digits, '_', '.' or '-' (it names a file), not {name!r}")
    return reports_root() / gpu_slug / f"{notebook}.{name}.trace.json.gz"


def trace_table(path: Path, fn: Callable[[], object] | None, replayed: bool, name: str) -> Any:
    """One eager call of the region ``fn`` traced with torch.profiler (live; the trace saved at ``path``), or the
    saved trace (replay): its kernel count, the sum of their times, the idle gaps between them against the region's
    time (:mod:`profiling.analysis.timeline`). A note when replay has no saved trace."""
    if not replayed:
        timeline.record(fn, path)
    elif not path.is_file():
        return Markdown(f"*No saved trace of `{name}` in `{shown_path(path.parent)}`: trace it on a GPU.*")
    table = Table(timeline.summarize(path).summary())
    table.attrs["notes"] = [f"Chrome trace (chrome://tracing, Perfetto): {shown_path(path)}"]
    return table


def trace_plot(path: Path, name: str, replayed_from: str | None) -> Any:
    """The kernels of the saved trace at ``path`` along time, one row per stream, its idle gaps beneath; None when
    there is no saved trace (:func:`trace_table` has said so)."""
    if not path.is_file():
        return None
    where = f", replayed from {replayed_from}" if replayed_from else ""
    return plots.timeline_plot(timeline.summarize(path), title=f"{name}{where}")


def mode_banner(replayed: bool, meta: Mapping[str, Any] | None, recordings: str, note: str = "") -> HTML:
    """The banner every notebook opens with: live on this machine's GPU, or replayed from recordings.

    Parameters
    ----------
    replayed : bool
        Whether the notebook replays.
    meta : mapping, optional
        The replayed recordings' provenance (GPU, driver, CUDA, commit, date); None when none was found.
    recordings : str
        Where the recordings were looked for (said when none was found).
    note : str
        A sentence ending the replay banner.
    """
    if not replayed:
        gpu = html.escape(str(provenance.collect()["gpu"]))
        return HTML(f"<div style='padding:.6em;background:#e6f4ea'><b>Live</b> on {gpu}.</div>")
    ending = f" {html.escape(note)}" if note else ""
    if not meta:
        return HTML(
            f"<div style='{REPLAY_STYLE}'><b>Replayed</b>, but this machine has no CUDA GPU and no recording was found "
            f"in {html.escape(recordings)}: the steps below say what they need.{ending}</div>"
        )
    made = html.escape(  # provenance is data: escaped before it reaches HTML
        f"{meta.get('gpu', '?')} (driver {meta.get('driver', '?')}, CUDA {meta.get('cuda_runtime', '?')}), "
        f"commit {str(meta.get('git_commit', '?'))[:7]}, {meta.get('date', '?')}"
    )
    return HTML(
        f"<div style='{REPLAY_STYLE}'><b>Replayed.</b> This machine has no CUDA GPU, so every table and plot below "
        f"comes from recordings made on {made}.{ending}</div>"
    )


def save_summary(
    notebook: str,
    title: str,
    mode: str,
    headlines: Sequence[str],
    meta: Mapping[str, Any],
    recorded: Mapping[str, Any] | None = None,
) -> Path:
    """Write a notebook's headline figures for the report index: ``reports/<gpu>/<notebook>.summary.json`` live,
    ``reports/replay/<gpu>/...`` in replay (git-ignored: replay never rewrites the committed ones). ``meta``: the
    provenance of its figures; ``recorded``: further fields (``correctness_passed``)."""
    summary = {
        "title": title,
        "notebook": notebook,
        "mode": mode,
        "headline": list(headlines),
        "provenance": dict(meta),
        **(recorded or {}),
    }
    path = ShownPath(summary_path(notebook))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return path


def correctness_configs(op: OpSpec) -> list[Config]:
    """Tiny, odd and large sizes from the op's sweep (first, second and last)."""
    sweep = list(op.default_sweep)
    return [sweep[0], sweep[1], sweep[-1]] if len(sweep) > 2 else sweep
