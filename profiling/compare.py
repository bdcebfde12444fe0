"""Compare one op's kernels at two source states: faster, slower or the same, from the sample distributions.

A *state* is a checkout of the kernel sources: the working tree, or a git revision
checked out with ``git worktree`` into a temporary folder. Each state's family module
(for a family built per configuration, each variant that the calls use) is built from
that checkout's ``csrc/<family>*.cu`` and ``include/`` (the JIT cache is keyed by
content, so a state is built once), and both are timed **in one process, in turn** over
several rounds (:func:`profiling.harness.timing.time_interleaved`: drift
during the run falls on both alike). The Python API that calls the module is the
working tree's, so a revision whose launcher signature differs cannot be compared.

The verdict per config is drawn from the two distributions of per-replay samples,
as nvbench's ``compare`` does from its noise-aware ones, never from two medians alone:

- ``ratio`` = median(head) / median(base) (> 1: head is slower), with a bootstrap
  confidence interval (:data:`LEVEL`) of that ratio;
- a two-sided Mann-Whitney U test of "the two samples come from one distribution";
- a threshold: the larger of :data:`MIN_EFFECT` and each side's relative interquartile
  range (a noisier measurement needs a larger difference);
- ``slower`` when p < :data:`ALPHA`, the whole interval lies above 1 and the ratio exceeds
  1 + threshold; ``faster`` symmetrically;
- ``same`` only when the samples show it: the whole interval lies inside the band
  [1 / (1 + threshold), 1 + threshold] and the threshold is at most
  :data:`profiling.harness.timing.NOISY_IQR_REL` (10%: a noisier side would call a 12%
  change "same");
- otherwise ``insufficient data`` (:data:`INSUFFICIENT`): the interval reaches past the band
  without a verdict, or the noise is too wide. Time more rounds or on a quieter GPU
  (nvbench's false verdicts on identical reruns, nvbench #313/#316, came from calling this
  case "same" or a change). Fewer than 5 samples a side is an error, not a verdict: no
  interval can be drawn from them.

Samples are stored per state, keyed by the state's source hash (:func:`state_hash`:
its kernel sources and headers, not its path), under
``reports/<gpu>/timings/<op>/<hash>.json``; without a GPU (or with ``--replay``) a
comparison runs from those recordings.

    python -m profiling.compare --op scale --base HEAD~3                 # working tree vs HEAD~3
    python -m profiling.compare --op rms_norm --base v1 --head v2 --config b=16,t=1500,c=1024
"""

from __future__ import annotations

from . import commands

if __name__ == "__main__":
    commands.starting(commands.compare_parser())  # --help and usage errors before the imports below load torch

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from oasr.jit.core import Variant, hash_headers, headers_under
from oasr.jit.families import STAND_INS, Family

from . import provenance
from .commands import WORKTREE
from .files import atomic_write_text, reports_root, shown_path
from .harness import device_state, timing
from .harness.ops import OPS, Config, OpSpec, dtype_name, get_op, parse_dtype

MIN_EFFECT = 0.03
"""Differences below 3% are "same": ten times the round-to-round spread of one build on the H200 (0.1-0.3%
after the first round; measured: dev/harness/RESULTS.md), a third of the 10% the acceptance test must see."""
ALPHA = 0.01
"""Significance level of the Mann-Whitney test."""
LEVEL = 0.99
"""Confidence level of the bootstrap interval of the ratio."""
VERDICTS = ("faster", "slower", "same", "insufficient data")
INSUFFICIENT = VERDICTS[3]
"""The verdict when the samples can separate neither a change nor its absence (see the module docstring)."""
RESAMPLES = 2000
BOOTSTRAP_BLOCK = 1 << 20
"""The bootstrap draws this many values at a time (8 MiB), so its memory does not grow with samples x resamples
(a million samples would take 16 GB a side at once)."""
COMPARE_COLUMNS = (
    "op", "config", "dtype", "base", "head", "base_seconds", "head_seconds", "ratio", "ci_low", "ci_high",
    "p_value", "threshold", "verdict", "base_samples", "head_samples",
)  # fmt: skip


# ---------------------------------------------------------------------------
# The verdict from two distributions
# ---------------------------------------------------------------------------


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, tie-corrected, continuity)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n, m = len(a), len(b)
    ranks = pd.Series(np.concatenate([a, b])).rank(method="average").to_numpy()
    u = ranks[:n].sum() - n * (n + 1) / 2
    _, counts = np.unique(np.concatenate([a, b]), return_counts=True)
    total = n + m
    variance = n * m / 12 * ((total + 1) - (counts**3 - counts).sum() / (total * (total - 1)))
    if variance <= 0:
        return 1.0
    z = (abs(u - n * m / 2) - 0.5) / math.sqrt(variance)
    return float(math.erfc(max(z, 0.0) / math.sqrt(2)))


def ratio_interval(
    base: Sequence[float], head: Sequence[float], level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap (percentile) interval of median(head) / median(base) at ``level``."""
    rng = np.random.default_rng(seed)
    b = _resampled_medians(rng, np.asarray(base, float), resamples)
    h = _resampled_medians(rng, np.asarray(head, float), resamples)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(h / b, [tail, 100 - tail])
    return float(low), float(high)


def _resampled_medians(rng: np.random.Generator, samples: np.ndarray, resamples: int) -> np.ndarray:
    """The medians of ``resamples`` resamples (with replacement) of ``samples``, :data:`BOOTSTRAP_BLOCK` values
    drawn at a time."""
    rows = max(1, BOOTSTRAP_BLOCK // len(samples))
    blocks = (min(rows, resamples - start) for start in range(0, resamples, rows))
    return np.concatenate([np.median(rng.choice(samples, (count, len(samples))), axis=1) for count in blocks])


def relative_iqr(samples: Sequence[float]) -> float:
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    return float((q3 - q1) / median) if median > 0 else math.inf


@dataclass(frozen=True)
class Comparison:
    """The verdict on two sample sets of one config (seconds per launch)."""

    base_seconds: float
    head_seconds: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    threshold: float
    verdict: str


def compare_samples(
    base: Sequence[float],
    head: Sequence[float],
    *,
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """``"slower"``, ``"faster"``, ``"same"`` or ``"insufficient data"`` for ``head`` against ``base`` (see the
    module docstring for the rule).

    Raises
    ------
    ValueError
        When a side has fewer than 5 samples, or one that is not finite (NaN, infinity) or not positive.
    """
    for name, samples in (("base", base), ("head", head)):
        values = np.asarray(samples, float)
        if not np.isfinite(values).all():
            raise ValueError(
                f"{name}: {int((~np.isfinite(values)).sum())} of {len(values)} samples are not finite (NaN or "
                "infinity), and no verdict can be drawn from them; time the state again"
            )
        if len(values) < 5 or values.min() <= 0:
            raise ValueError(f"{name}: need at least 5 positive samples to compare, got {len(samples)}")
    ratio = float(np.median(head) / np.median(base))
    low, high = ratio_interval(base, head, resamples=resamples, seed=seed)
    p = mann_whitney_p(base, head)
    threshold = max(min_effect, relative_iqr(base), relative_iqr(head))
    if p < alpha and low > 1 and ratio > 1 + threshold:
        verdict = "slower"
    elif p < alpha and high < 1 and ratio < 1 / (1 + threshold):
        verdict = "faster"
    elif 1 / (1 + threshold) <= low and high <= 1 + threshold and threshold <= timing.NOISY_IQR_REL:
        verdict = "same"
    else:
        verdict = INSUFFICIENT
    return Comparison(float(np.median(base)), float(np.median(head)), ratio, low, high, p, threshold, verdict)


def compare_tables(
    op: str, base: str, head: str, samples: Mapping[tuple[str, str], Mapping[str, Sequence[float]]], **kwargs: Any
) -> pd.DataFrame:
    """One row per (config, dtype) of ``samples`` ({(config, dtype): {state: seconds}}), :data:`COMPARE_COLUMNS`."""
    rows = []
    for (config, dtype), by_state in samples.items():
        result = compare_samples(by_state[base], by_state[head], **kwargs)
        rows.append(
            {
                "op": op, "config": config, "dtype": dtype, "base": base, "head": head,
                **dataclasses.asdict(result),
                "base_samples": len(by_state[base]), "head_samples": len(by_state[head]),
            }
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))


# ---------------------------------------------------------------------------
# Source states
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    """Kernel sources to time: ``name`` (a revision or :data:`WORKTREE`), the checkout ``root``, its ``hash``."""

    name: str
    root: Path
    hash: str


def family_sources(family: Family, root: Path, variant: Variant | None = None) -> list[Path]:
    """``family``'s launcher sources (``variant``'s, else the default module's) in the checkout ``root``; ValueError
    when the checkout predates them."""
    sources = [root / "csrc" / source.name for source in family.sources_of(variant or family.default_variant)]
    missing = [f"csrc/{source.name}" for source in sources if not source.is_file()]
    if missing:
        raise ValueError(
            f"{', '.join(missing)}: not in the checkout {root.name} ({family.name} came later): compare against "
            "a revision that has the family"
        )
    return sources


def state_hash(family: Family, root: Path) -> str:
    """The content hash of ``family``'s kernel sources in the checkout ``root`` (sources, ``include/``, ``csrc/``)."""
    digest = hashlib.sha256(family.name.encode())
    for source in family_sources(family, root):
        digest.update(source.name.encode() + source.read_bytes())
    hash_headers(digest, headers_under(root / "include") + headers_under(root / "csrc"))
    return digest.hexdigest()[:16]


def git(*args: str, cwd: Path = provenance.REPO_ROOT) -> str:
    """``git args`` in the repository; ValueError with git's message when it fails or git is missing."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    except OSError as exc:
        raise ValueError(f"git {' '.join(args)} could not run ({exc}); install git to compare revisions") from None
    if done.returncode != 0:
        raise ValueError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


@contextlib.contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """The repository at ``revision`` (a temporary ``git worktree``), or the working tree for :data:`WORKTREE`."""
    if revision == WORKTREE:
        yield provenance.REPO_ROOT
        return
    commit = git("rev-parse", "--verify", f"{revision}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="oasr-compare-") as folder:
        path = Path(folder) / commit[:12]
        git("worktree", "add", "--detach", str(path), commit)
        try:
            yield path
        finally:
            git("worktree", "remove", "--force", str(path))


def build_state(family: Family, state: State, variant: Variant | None = None) -> Any:
    """``family``'s module (of ``variant``, else the default one) built from ``state``'s checkout, as the JIT
    module ``<module name>_<hash[:12]>``; the working tree's is the library's own module (built once for both)."""
    spec = family.jit_spec(variant=variant)
    if state.root != provenance.REPO_ROOT:
        spec = dataclasses.replace(
            spec,
            name=f"{family.module_name(variant or family.default_variant)}_{state.hash[:12]}",
            sources=family_sources(family, state.root, variant),
            include_dir=state.root / "include",
        )
    return spec.build_and_load()


# ---------------------------------------------------------------------------
# Timing and the recordings
# ---------------------------------------------------------------------------


class PerVariant:
    """A stand-in (:func:`stand_in`) that gives each variant its module: ``modules(variant)``, called once per variant
    (``None``: the family's default), e.g. each variant built from another checkout."""

    def __init__(self, modules: Callable[[Variant | None], Any]):
        self._modules = modules
        self._loaded: dict[str | None, Any] = {}

    def __call__(self, variant: Variant | None) -> Any:
        key = variant.name if variant is not None else None
        if key not in self._loaded:
            self._loaded[key] = self._modules(variant)
        return self._loaded[key]


@contextlib.contextmanager
def stand_in(family: Family, module: Any) -> Iterator[None]:
    """Within the block, ``family.module(variant)`` is ``module`` for every variant, or a :class:`PerVariant`'s module
    of that variant: how a comparison runs each state's build, and how the tests run the Python layer on CPU against
    torch stand-ins. Blocks nest; leaving one restores what stood in before (or the family's own modules)."""
    before = STAND_INS.get(family.name)
    STAND_INS[family.name] = module if isinstance(module, PerVariant) else lambda variant: module
    try:
        yield
    finally:
        if before is None:
            STAND_INS.pop(family.name, None)
        else:
            STAND_INS[family.name] = before


def state_modules(family: Family, state: State) -> PerVariant:
    """``state``'s modules of ``family``, each variant built from its checkout when a call first needs it (a family
    built per configuration calls the variant of the shape and dtype)."""
    return PerVariant(functools.partial(build_state, family, state))


def with_module(family: Family, module: Any, fn: Callable[[], Any]) -> Any:
    """``fn()`` with ``module`` (or a :class:`PerVariant`'s) standing in for the family's modules (graph capture
    records its kernel)."""
    with stand_in(family, module):
        return fn()


def time_modules(
    op: OpSpec,
    configs: Sequence[Config],
    dtypes: Sequence[str],
    modules: Mapping[str, Any],
    *,
    rounds: int = 6,
    iters: int = 120,
    warmup: int = 5,
) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per (config, dtype): each module's per-replay samples (seconds), the modules timed in turn."""
    samples: dict[tuple[str, str], dict[str, list[float]]] = {}
    for config in configs:
        for dtype in map(parse_dtype, dtypes):
            sets = timing.op_input_sets(op, config, dtype)
            fns = {
                name: [functools.partial(with_module, op.family, module, functools.partial(op.backends["oasr"], s))
                       for s in sets]
                for name, module in modules.items()
            }  # fmt: skip
            for calls in fns.values():  # each state's module of this case is built (and checked to run) untimed
                calls[0]()
            torch.cuda.synchronize()
            results = timing.time_interleaved(fns, rounds=rounds, iters=iters, warmup=warmup)
            key = (op.config_label(config), dtype_name(dtype))
            samples[key] = {name: [ms * 1e-3 for ms in result.samples_ms] for name, result in results.items()}
            del sets, fns
    return samples


def recording_path(gpu: str, op: str, source: str, root: Path | None = None) -> Path:
    return (root or reports_root()) / gpu / "timings" / op / f"{source}.json"


def save_samples(
    gpu: str,
    op: str,
    state: State,
    samples: Mapping[tuple[str, str], Mapping[str, Sequence[float]]],
    gpu_state: Mapping[str, Any] | None = None,
) -> Path:
    """Store ``state``'s samples (merged into what its hash already holds), with the GPU's state around the timing
    (:func:`profiling.harness.device_state.around`) in the provenance when given."""
    path = recording_path(gpu, op, state.hash)
    stored = load_samples(gpu, op, state.hash)
    stored.update({key: list(by_state[state.name]) for key, by_state in samples.items()})
    cases = [{"config": c, "dtype": d, "samples_s": s} for (c, d), s in stored.items()]
    meta = {"op": op, "source_hash": state.hash, "state": state.name, "provenance": provenance.collect()}
    if gpu_state is not None:
        meta["device_state"] = dict(gpu_state)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({**meta, "cases": cases}, indent=1) + "\n")
    return path


def load_samples(gpu: str, op: str, source: str) -> dict[tuple[str, str], list[float]]:
    """{(config, dtype): samples} recorded for the source hash ``source`` ({} when none).

    Raises
    ------
    ValueError
        When the file is not readable JSON of the shape :func:`save_samples` writes (one sentence naming it).
    """
    path = recording_path(gpu, op, source)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: nesting too deep
        problem: str | None = f"it is not readable JSON: {type(exc).__name__}: {str(exc)[:120]}"
    else:
        problem = timings_problem(data)
    if problem is not None:
        raise ValueError(
            f"{shown_path(path)} is not a timings file of profiling.compare ({problem}); delete it and time "
            f"the state again on a GPU (`python -m profiling.compare --op {op} --base ...`)"
        )
    return {(c["config"], c["dtype"]): list(c["samples_s"]) for c in data["cases"]}


def timings_problem(data: Any) -> str | None:
    """What is wrong with a timings file's content (None when it has the shape :func:`save_samples` writes)."""
    if not isinstance(data, dict):
        return f"it holds a JSON {type(data).__name__}, not an object"
    if not isinstance(data.get("cases"), list):
        return "its 'cases' are not a list"
    for case in data["cases"]:
        if not isinstance(case, dict) or not all(isinstance(case.get(k), str) for k in ("config", "dtype")):
            return "a case is not an object with a config and a dtype string"
        samples = case.get("samples_s")
        if not isinstance(samples, list) or not all(_is_seconds(v) for v in samples):
            return f"the samples of {case['config'][:80]},dtype={case['dtype'][:20]} are not positive finite seconds"
    return None


def _is_seconds(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value > 0


def compare_states(
    op: str,
    base: str,
    head: str = WORKTREE,
    configs: Sequence[Config] | None = None,
    dtypes: Sequence[str] = ("float16",),
    *,
    live: bool | None = None,
    gpu: str | None = None,
    **timing_kwargs: Any,
) -> pd.DataFrame:
    """Time ``op`` (its ``oasr`` backend) at revisions ``base`` and ``head`` and compare; see the module docstring.

    ``live=None`` times on a GPU when there is one, else compares the stored recordings of
    the two states' source hashes. ``gpu`` names the recordings' folder (default: this GPU,
    ``h200`` in replay).

    Raises
    ------
    ValueError
        For an unknown op or revision, or (in replay) when a state has no recording of a config.
    """
    spec = get_op(op)
    configs = list(configs or spec.default_sweep[-2:])
    dtypes = [dtype_name(parse_dtype(d)) for d in dtypes]
    live = torch.cuda.is_available() if live is None else live
    gpu = gpu or (provenance.gpu_slug(torch.cuda.get_device_name()) if live else "h200")
    with checkout(base) as base_root, checkout(head) as head_root:
        states = [State(base, base_root, state_hash(spec.family, base_root))]
        states.append(State(head, head_root, state_hash(spec.family, head_root)))
        if live:
            modules = {s.name: state_modules(spec.family, s) for s in states}
            with device_state.around() as gpu_state:
                samples = time_modules(spec, configs, dtypes, modules, **timing_kwargs)
            for state in states:
                save_samples(gpu, op, state, samples, gpu_state)
        else:
            samples = _recorded(gpu, op, states, [(spec.config_label(c), d) for c in configs for d in dtypes])
    return compare_tables(op, base, head, samples)


def recorded_states(gpu: str, op: str) -> list[dict[str, str]]:
    """The source states of ``op`` recorded for ``gpu``, newest first: each one's ``hash``, the ``revision`` it was
    timed as (a state named relative to HEAD, e.g. ``HEAD~1``, is written from the commit it was recorded at:
    ``45a9f8d~1``; the working tree as ``the working tree at 45a9f8d``), its ``date``, and the ``state`` name and
    ``commit`` it was recorded under."""
    states = []
    for path in sorted(recording_path(gpu, op, "-").parent.glob("*.json")):
        try:
            meta = json.loads(path.read_text())
            commit = str(meta.get("provenance", {}).get("git_commit", "?"))[:7]
            state, date = str(meta.get("state", "?")), str(meta.get("provenance", {}).get("date", "?"))
        except (OSError, ValueError, AttributeError):  # a damaged recording is not one to offer
            continue
        if state == WORKTREE:
            revision = f"the working tree at {commit}"
        else:
            revision = commit + state.removeprefix("HEAD") if state.startswith("HEAD") else state
        states.append({"hash": path.stem, "revision": revision, "date": date[:10], "state": state, "commit": commit})
    return sorted(states, key=lambda s: s["date"], reverse=True)


def _recorded(
    gpu: str, op: str, states: Sequence[State], keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], dict[str, list[float]]]:
    stored = {s.name: load_samples(gpu, op, s.hash) for s in states}
    for state in states:
        lacking = [f"{c},dtype={d}" for c, d in keys if (c, d) not in stored[state.name]]
        if lacking:
            there = recorded_states(gpu, op)
            known = (
                "recorded there: " + "; ".join(f"{s['revision']} ({s['hash']}, {s['date']})" for s in there)
                if there
                else f"nothing of {op} is recorded there"
            )
            raise ValueError(
                f"no recorded samples of {op} at {state.name} (source hash {state.hash}) for {', '.join(lacking)} "
                f"in {shown_path(recording_path(gpu, op, state.hash).parent)}; {known}. Time it on a GPU with "
                f"`python -m profiling.compare --op {op} --base {state.name if state.name != WORKTREE else 'HEAD'}` "
                "(`bash scripts/h200_session.sh compare` records every family's) and commit reports/."
            )
    return {key: {s.name: stored[s.name][key] for s in states} for key in keys}


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.compare_parser()
    args = parser.parse_args(argv)
    if args.op not in OPS:
        parser.error(f"argument --op: invalid choice: {args.op!r} (choose from {', '.join(OPS)})")
    try:
        table = compare_states(
            args.op, args.base, args.head, args.config, args.dtypes.split(","),
            live=False if args.replay else None, rounds=args.rounds, iters=args.iters,
        )  # fmt: skip
    except (ValueError, timing.NoGPUError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    shown = table.assign(base_us=table["base_seconds"] * 1e6, head_us=table["head_seconds"] * 1e6)
    columns = ["config", "dtype", "base_us", "head_us", "ratio", "ci_low", "ci_high", "p_value", "verdict"]
    print(shown[columns].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    commands.started()
    sys.exit(main())
