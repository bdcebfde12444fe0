"""Comparing revisions (profiling.compare): the verdict from two sample distributions, the source
states (hashes, git worktrees, builds), the recordings keyed by source hash, and the CLI."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from oasr.jit import env, families, gemm_config
from oasr.jit.core import JitSpec
from oasr.jit.families import GROUP_GEMM, SCALE
from profiling import compare
from profiling.harness import timing
from profiling.harness.measure import measure
from profiling.harness.ops import get_op
from profiling.provenance import REPO_ROOT
from profiling.workbench.notebook import Workbench


def _samples(median: float, spread: float, count: int = 120, seed: int = 0) -> list[float]:
    """Per-replay times as the H200 gives them: a tight body and a few slow outliers."""
    rng = np.random.default_rng(seed)
    body = median * (1 + spread * rng.standard_normal(count))
    body[rng.choice(count, count // 20, replace=False)] *= 1 + 5 * spread  # occasional slow replays
    return list(body)


@pytest.mark.parametrize("seed", range(20))
def test_ten_percent_slower_is_slower_with_its_ratio(seed: int) -> None:
    result = compare.compare_samples(_samples(60e-6, 0.005, seed=seed), _samples(66e-6, 0.005, seed=seed + 100))
    assert result.verdict == "slower"
    assert result.ratio == pytest.approx(1.10, abs=0.01) and result.ci_low > 1.08 and result.ci_high < 1.12


@pytest.mark.parametrize("seed", range(20))
def test_the_same_distribution_is_same(seed: int) -> None:
    result = compare.compare_samples(_samples(60e-6, 0.005, seed=seed), _samples(60e-6, 0.005, seed=seed + 100))
    assert result.verdict == "same" and abs(result.ratio - 1) < 0.01


def test_faster_and_a_shift_below_the_threshold() -> None:
    assert compare.compare_samples(_samples(60e-6, 0.005), _samples(50e-6, 0.005, seed=1)).verdict == "faster"
    small = compare.compare_samples(_samples(60e-6, 0.002), _samples(60.9e-6, 0.002, seed=1))
    assert small.p_value < compare.ALPHA and small.verdict == "same"  # significant, but 1.5% < MIN_EFFECT


def test_noisy_samples_need_a_larger_difference_and_are_never_same() -> None:
    # an IQR of ~20% of the median: a 10% shift of the medians is within the noise, and so would a 15% one be
    result = compare.compare_samples(_samples(60e-6, 0.15, seed=3), _samples(66e-6, 0.15, seed=4))
    assert result.threshold > 0.15 and result.verdict == compare.INSUFFICIENT
    alike = compare.compare_samples(_samples(60e-6, 0.15, seed=3), _samples(60e-6, 0.15, seed=4))
    assert alike.verdict == compare.INSUFFICIENT  # not "same": a band of +-15% hides the changes that matter


@pytest.mark.parametrize("seed", range(5))
def test_an_interval_reaching_past_the_band_is_insufficient_data(seed: int) -> None:
    """Eight samples a side, 2% noise, a 2.5% shift: the interval reaches past 1 + threshold but not wholly beyond
    it, so the samples separate neither "slower" nor "same"."""
    result = compare.compare_samples(_samples(60e-6, 0.02, 8, seed), _samples(61.5e-6, 0.02, 8, seed + 50))
    assert result.ci_high > 1 + result.threshold and result.verdict == compare.INSUFFICIENT
    assert result.verdict in compare.VERDICTS


def test_too_few_or_bad_samples() -> None:
    with pytest.raises(ValueError, match="base: need at least 5 positive samples"):
        compare.compare_samples([1.0, 1.0], [1.0] * 10)
    with pytest.raises(ValueError, match="head: need at least 5"):
        compare.compare_samples([1.0] * 10, [1.0, 0.0, 1.0, 1.0, 1.0])


@pytest.mark.parametrize("bad", [math.nan, math.inf], ids=["nan", "inf"])
def test_samples_that_are_not_numbers_reach_no_verdict(bad: float) -> None:
    with pytest.raises(ValueError, match=r"base: 3 of 120 samples are not finite"):
        compare.compare_samples(_samples(60e-6, 0.005)[:-3] + [bad] * 3, _samples(60e-6, 0.005, seed=1))


def test_the_bootstrap_holds_a_block_of_resamples_at_a_time() -> None:
    """A million samples must not take samples x resamples of memory (16 GB a side at 2000 resamples)."""
    base, head = _samples(60e-6, 0.005, count=10_000), _samples(66e-6, 0.005, count=10_000, seed=1)
    tracemalloc.start()
    try:
        low, high = compare.ratio_interval(base, head)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 1.09 < low < 1.1 < high < 1.11
    assert peak < 4 * compare.BOOTSTRAP_BLOCK * 8, f"{peak / 2**20:.0f} MiB"  # not 2000 x 10000 x 8 B = 153 MiB


def test_mann_whitney_agrees_with_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for seed in range(5):
        a, b = _samples(1.0, 0.01, 40, seed), _samples(1.003, 0.01, 50, seed + 7)
        a[:5] = b[:5]  # ties
        expected = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
        assert compare.mann_whitney_p(a, b) == pytest.approx(expected, rel=1e-9)


def _tree(tmp_path: Path, name: str, edit: str = "") -> Path:
    root = tmp_path / name
    shutil.copytree(REPO_ROOT / "include", root / "include")
    shutil.copytree(REPO_ROOT / "csrc", root / "csrc")
    header = root / "include" / "oasr" / "scale.cuh"
    header.write_text(header.read_text() + edit)
    return root


HAS_GIT = (REPO_ROOT / ".git").exists()
needs_git = pytest.mark.skipif(not HAS_GIT, reason="this copy of the repository has no .git (a device run)")


@needs_git
def test_state_hash_follows_content_not_path(tmp_path: Path) -> None:
    here = compare.state_hash(SCALE, REPO_ROOT)
    assert compare.state_hash(SCALE, _tree(tmp_path, "copy")) == here
    assert compare.state_hash(SCALE, _tree(tmp_path, "edited", "\n// an edit\n")) != here
    with compare.checkout("HEAD") as root:
        assert root != REPO_ROOT and (root / "include" / "oasr" / "scale.cuh").is_file()
        head = compare.state_hash(SCALE, root)
    assert not root.exists()
    dirty = compare.git("status", "--porcelain", "--", "include", "csrc")
    assert (head == here) == (dirty == "")
    with pytest.raises(ValueError, match="git rev-parse"), compare.checkout("no-such-revision"):
        pass
    with pytest.raises(ValueError, match=r"csrc/scale.cu.*: not in the checkout empty \(scale came later\)"):
        compare.state_hash(SCALE, tmp_path / "empty")  # a revision before the family: the notebook says so


def test_a_state_builds_as_its_own_module(tmp_path: Path) -> None:
    root = _tree(tmp_path, "edited", "\n// built apart\n")
    state = compare.State("edited", root, compare.state_hash(SCALE, root))
    module = compare.build_state(SCALE, state)
    assert callable(module.scale)  # the launcher oasr.scale calls
    built = Path(env.jit_cache_dir()) / f"scale_{state.hash[:12]}"
    assert built.is_dir() and any(built.rglob("*.so"))


def test_a_state_gives_each_variant_its_own_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A family built per configuration (group_gemm) calls the variant of the dtype and shape: each state builds
    that one, once (a single stand-in module would be called with the wrong dtype)."""
    built = []

    def build(family, state, variant=None):
        built.append((state.name, variant.name if variant else None))
        return object()

    monkeypatch.setattr(compare, "build_state", build)
    modules = compare.state_modules(GROUP_GEMM, compare.State("old", tmp_path, "0" * 16))
    fp16 = gemm_config.group_gemm_variant("float16", gemm_config.DIRECT)
    seen = compare.with_module(GROUP_GEMM, modules, lambda: [GROUP_GEMM.module(v) for v in (fp16, fp16, None)])
    assert seen[0] is seen[1] and seen[2] is not seen[0]
    assert built == [("old", fp16.name), ("old", None)]


def test_stand_ins_nest_and_leave_the_family_as_it_was() -> None:
    outer, inner = object(), object()
    with compare.stand_in(SCALE, outer):
        with compare.stand_in(SCALE, inner):
            assert SCALE.module() is inner
        assert SCALE.module() is outer
    assert "scale" not in families.STAND_INS


def test_the_working_tree_state_is_the_library_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(JitSpec, "build_and_load", lambda spec: spec)
    tree = compare.State("worktree", REPO_ROOT, compare.state_hash(SCALE, REPO_ROOT))
    assert compare.build_state(SCALE, tree).name == "scale"  # built once, for the library and the comparison
    root = _tree(tmp_path, "edited", "\n// edited\n")
    edited = compare.State("edited", root, compare.state_hash(SCALE, root))
    spec = compare.build_state(SCALE, edited)
    assert spec.name == f"scale_{edited.hash[:12]}" and spec.include_dir == root / "include"


@pytest.fixture
def recorded_states(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, compare.State]:
    """Two checkouts, "old" and "new" (10% slower), as revisions, each with its samples of scale n=2048 recorded."""
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    roots = {"old": _tree(tmp_path, "old", "\n// old\n"), "new": _tree(tmp_path, "new")}

    @contextlib.contextmanager
    def fake_checkout(revision: str):
        yield roots[revision]

    monkeypatch.setattr(compare, "checkout", fake_checkout)
    states = {name: compare.State(name, root, compare.state_hash(SCALE, root)) for name, root in roots.items()}
    samples = {("n=2048", "float16"): {"old": _samples(60e-6, 0.005), "new": _samples(66e-6, 0.005, seed=5)}}
    for state in states.values():
        compare.save_samples("h200", "scale", state, samples)
    return states


def test_compare_from_recordings_and_what_is_missing(recorded_states: dict[str, compare.State]) -> None:
    states, config = recorded_states, {"n": 2048}
    assert compare.recording_path("h200", "scale", states["old"].hash).is_file()
    table = compare.compare_states("scale", "old", "new", [config], live=False)
    assert list(table["verdict"]) == ["slower"] and table.loc[0, "ratio"] == pytest.approx(1.1, abs=0.01)
    assert list(table.columns) == list(compare.COMPARE_COLUMNS)
    with pytest.raises(ValueError, match=r"no recorded samples of scale at old .* for n=8192,dtype=float16"):
        compare.compare_states("scale", "old", "new", [{"n": 8192}], live=False)


def _one_case(samples: object) -> dict:
    return {"op": "scale", "cases": [{"config": "n=2048", "dtype": "float16", "samples_s": samples}]}


DEEP = 1000
TAMPERED_TIMINGS = {
    "not JSON": "{",
    "a JSON list": "[]",
    "no cases": json.dumps({"op": "scale"}),
    "cases as an object": json.dumps({"cases": {"n=2048": [1e-6]}}),
    "a case that is a number": json.dumps({"cases": [7]}),
    "a case without samples": json.dumps({"cases": [{"config": "n=2048", "dtype": "float16"}]}),
    "a case without a config": json.dumps({"cases": [{"dtype": "float16", "samples_s": [1e-6] * 10}]}),
    "a config that is a number": json.dumps({"cases": [{"config": 2048, "dtype": "float16", "samples_s": [1e-6]}]}),
    "samples as a string": json.dumps(_one_case("fast")),
    "a sample that is a string": json.dumps(_one_case([1e-6] * 9 + ["1e-6"])),
    "a sample that is null": json.dumps(_one_case([1e-6] * 9 + [None])),
    "a sample that is true": json.dumps(_one_case([1e-6] * 9 + [True])),
    "a NaN sample": json.dumps(_one_case([1e-6] * 9 + [math.nan])),
    "a negative sample": json.dumps(_one_case([1e-6] * 9 + [-1e-6])),
    "the whole file nested": "[" * DEEP + "]" * DEEP,
    "samples nested": json.dumps(_one_case("DEEP")).replace('"DEEP"', "[" * DEEP + "]" * DEEP),
}


@pytest.mark.parametrize("case", list(TAMPERED_TIMINGS))
def test_a_tampered_timings_file_is_one_sentence_naming_it(recorded_states, capsys, case: str) -> None:
    tampered = compare.recording_path("h200", "scale", recorded_states["old"].hash)
    tampered.write_text(TAMPERED_TIMINGS[case])
    assert compare.main(["--op", "scale", "--base", "old", "--head", "new", "--replay", "--config", "n=2048"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and len(err) < 600, err
    assert err.startswith(f"error: {tampered} is not a timings file of profiling.compare") and "delete it" in err, err


@needs_git
def test_cli_replay_without_recordings_says_what_to_do(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    assert compare.main(["--op", "scale", "--base", "HEAD", "--replay", "--config", "n=2048"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no recorded samples of scale at HEAD") and "python -m profiling.compare" in err


@pytest.mark.gpu
def test_live_compare_of_a_state_with_itself_is_same(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    table = compare.compare_states("scale", compare.WORKTREE, compare.WORKTREE, [{"n": 2**24}], rounds=4, iters=80)
    assert list(table["verdict"]) == ["same"] and abs(table.loc[0, "ratio"] - 1) < compare.MIN_EFFECT
    assert list((tmp_path / "reports").rglob("timings/scale/*.json"))


@pytest.mark.gpu
def test_eager_latency_beside_device_time() -> None:
    """A 2 MiB scale runs in a few microseconds on the GPU; an eager call costs Python, checks and a launch more."""
    table = measure(get_op("scale"), [{"n": 2**20}], ["float16"], iters=10, rounds=2)
    assert (table["eager_seconds"] > 0).all() and (table["eager_seconds"] < 1e-3).all()
    assert (table["eager_seconds"] > table["seconds"]).all()


def test_eager_seconds_cycles_the_input_sets_on_cpu() -> None:
    calls: list[int] = []
    fns = [lambda i=i: calls.append(i) for i in range(3)]
    assert timing.eager_seconds(fns, calls=30, warmup=3) > 0
    assert calls == [0, 1, 2] + [0, 1, 2] * 10


def _has_parent() -> bool:
    try:
        compare.git("rev-parse", "--verify", "HEAD~1^{commit}")
    except ValueError:
        return False
    return True


def _record(monkeypatch, name: str, source_hash: str, median: float, commit: str) -> None:
    """Samples of scale's default compare configs recorded for ``source_hash`` as state ``name`` at ``commit``."""
    monkeypatch.setattr(compare.provenance, "collect", lambda: {"git_commit": commit, "date": "2026-12-05T10:00:00"})
    spec = get_op("scale")
    keys = [(spec.config_label(c), "float16") for c in spec.default_sweep[-2:]]
    state = compare.State(name, REPO_ROOT, source_hash)
    compare.save_samples("h200", "scale", state, {key: {name: _samples(median, 0.005)} for key in keys})


@pytest.mark.skipif(not _has_parent(), reason="needs git and a parent commit (a clone deeper than one commit)")
def test_the_readme_compare_example_runs_in_replay_given_samples(monkeypatch, tmp_path, capsys) -> None:
    """README: `python -m profiling.compare --op scale --base HEAD~1 --replay` reads the samples recorded for the two
    states' source hashes (scripts/h200_session.sh compare records them on the H200) and prints a verdict per config."""
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    with compare.checkout("HEAD~1") as parent:
        _record(monkeypatch, "HEAD~1", compare.state_hash(SCALE, parent), 60e-6, "abc1234")
    _record(monkeypatch, compare.WORKTREE, compare.state_hash(SCALE, REPO_ROOT), 60e-6, "abc1234")
    assert compare.main(["--op", "scale", "--base", "HEAD~1", "--replay"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "verdict" in lines[0] and len(lines) == 3 and all(line.split()[-1] == "same" for line in lines[1:])


@needs_git
def test_a_state_without_samples_is_named_with_the_recorded_ones(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    _record(monkeypatch, "HEAD~1", "0123456789abcdef", 60e-6, "abc1234")
    _record(monkeypatch, compare.WORKTREE, "fedcba9876543210", 60e-6, "abc1234")
    with pytest.raises(ValueError) as error:
        compare.compare_states("scale", "HEAD", compare.WORKTREE, live=False)
    message = str(error.value)
    assert "recorded there: " in message and "abc1234~1 (0123456789abcdef, " in message
    assert "the working tree at abc1234 (fedcba9876543210, " in message


@pytest.mark.skipif(not _has_parent(), reason="needs git and a parent commit (a clone deeper than one commit)")
def test_the_replayed_notebook_compares_the_revision_recorded_with_its_tree(monkeypatch, tmp_path) -> None:
    """In replay, ``wb.compare()`` compares the working tree with the revision whose samples were recorded with it
    (``C~1`` for this tree timed against its parent at C), not with a HEAD whose sources are the tree's own."""
    monkeypatch.setenv("OASR_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("OASR_WORKBENCH_MODE", "replay")
    commit = compare.git("rev-parse", "--short=7", "HEAD")
    with compare.checkout("HEAD~1") as parent:
        parent_hash = compare.state_hash(SCALE, parent)
    mine = compare.state_hash(SCALE, REPO_ROOT)
    _record(monkeypatch, "HEAD~1", parent_hash if parent_hash != mine else "0123456789abcdef", 60e-6, commit)
    _record(monkeypatch, compare.WORKTREE, mine, 60e-6, commit)
    table = Workbench(SCALE).compare()
    assert hasattr(table, "columns"), table.data  # a table, not a "No comparison" note
    assert set(table["base"]) == {f"{commit}~1"} and set(table["verdict"]) == {"same"}
