"""Tests of benchmarks/peers.py and benchmarks/peer_libraries.py: the peers benchmark's plan, budget, rows,
checks and tables, on CPU.

A unit runs here for real on CPU tensors (the harness's inputs and float64 references, the one checker)
with the GPU timer replaced; oasr's backend then fails on CPU, which is one more row, not a crash. The
GPU test runs the command on one op.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from benchmarks import peers as P
from benchmarks.peer_libraries import PEERS, Impl, Library, Peer, Unsupported
from profiling.harness.ops import OPS
from profiling.harness.ops.norm import EPS
from profiling.harness.timing import TimingResult

REPO = Path(__file__).resolve().parent.parent
PENDING_OPS = {"attention", "rel_pos_attention"}
"""Ops the peers know that land with the attention issue."""
TINY = {"b": 2, "t": 3, "c": 64}


def fake_timer(launches, **settings):
    """Each backend's launch run once on CPU; its 'time' is a fixed per-name number (ms)."""
    results = {}
    for index, (name, fns) in enumerate(launches.items()):
        fns[0]()
        results[name] = TimingResult((0.01 * (index + 1),) * 3, "graph", 1, len(fns))
    return results


def cpu_sets(unit: P.Unit) -> list[dict]:
    return [unit.op.make_inputs(unit.config, torch.float32, torch.device("cpu"), seed) for seed in range(2)]


def run_cpu(op_name: str, peers: list[Peer], config=TINY, dtype="float32", timer=fake_timer) -> dict[str, dict]:
    unit = P.Unit(OPS[op_name], config, dtype, 0)
    rows = P.run_unit(
        unit, P.Peers(peers), P.Options(), (4e12, 7e14), P.Budget(100), device="cpu", input_sets=cpu_sets, timer=timer
    )
    return {row["backend"]: row for row in rows}


def torch_library() -> Library:
    return Library("torch", "torch", lambda: torch)


def peer(name: str, op_name: str, make, **impl) -> Peer:
    return Peer(name=name, library=torch_library(), impls={op_name: Impl(make, **impl)})


def rms_norm_right(ctx, i):
    return lambda: F.rms_norm(i["x"], (i["x"].shape[-1],), i["weight"], EPS)


def rms_norm_without_weight(ctx, i):
    return lambda: F.rms_norm(i["x"], (i["x"].shape[-1],), None, EPS)


def rms_norm_eps_outside(ctx, i):  # x / (sqrt(mean x^2) + eps): another eps placement
    x = i["x"]
    return lambda: x / (x.square().mean(-1, keepdim=True).sqrt() + 0.5) * i["weight"]


# ---------------------------------------------------------------------------------------------- plan, budget


def test_plan_takes_every_ops_first_shape_before_any_second():
    ops = [OPS["rms_norm"], OPS["gemm"]]
    units = P.plan_units(ops, ["float32", "bfloat16"])
    first_round = [(u.op.name, u.dtype) for u in units if u.index == 0]
    assert first_round == [("rms_norm", "float32"), ("rms_norm", "bfloat16"), ("gemm", "bfloat16")]  # gemm: no fp32
    assert [u.index for u in units] == sorted(u.index for u in units)
    for op in ops:
        for dtype in ("float32", "bfloat16"):
            if dtype in op.dtypes:
                planned = [u.config for u in units if u.op is op and u.dtype == dtype]
                assert planned == op.benchmark_configs(dtype)
    conv = OPS["conv2d"]  # its large case is also the sweep's ninth shape: timed once
    planned = [u.config for u in P.plan_units([conv], ["float16"])]
    assert len(planned) == len(conv.benchmark_configs()) - 1 and all(planned.count(c) == 1 for c in planned)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_budget_refuses_a_shape_that_does_not_fit_and_learns_from_earlier_shapes():
    clock = Clock()
    budget = P.Budget(100, prior=20, margin=10, clock=clock)
    assert budget.refuse("rms_norm") is None  # 90 left, prior 20
    budget.record("rms_norm", 30)
    clock.now = 65  # 35 left, 25 past the margin: a 30 s shape does not fit, a first shape (20 s) does
    reason = budget.refuse("rms_norm")
    assert reason is not None and "time budget" in reason and "30 s" in reason and "earlier shapes" in reason
    assert budget.refuse("glu") is None
    clock.now = 85
    assert "prior" in budget.refuse("glu")
    with pytest.raises(ValueError, match="positive"):
        P.Budget(0)


def test_a_run_over_budget_skips_shapes_and_keeps_every_ops_first(monkeypatch, tmp_path):
    """The main loop with a unit that 'takes' 40 s of a 100 s budget: the later shapes are skipped rows."""
    clock = Clock()
    monkeypatch.setattr(P.time, "monotonic", clock)
    monkeypatch.setattr(P.timing, "require_cuda", lambda what: None)
    monkeypatch.setattr(P, "prebuild_oasr", lambda jobs: "skipped in the test")
    monkeypatch.setattr(P.timing, "measure_copy_bandwidth", lambda: 4.0)
    monkeypatch.setattr(P.timing, "measure_cublas_tflops", lambda: 700.0)

    def fake_unit(unit, peers, options, ceilings, budget):
        clock.now += 40
        return [P.base_row(unit, "oasr", "oasr", "ok") | {"seconds": 1e-5, "pct_of_ceiling": 50.0}]

    monkeypatch.setattr(P, "run_unit", fake_unit)
    output = tmp_path / "peers.md"
    code = P.main(["--ops", "rms_norm", "glu", "--dtypes", "float16", "--peers", "inductor",
                   "--time-budget", "100", "--output", str(output)])  # fmt: skip
    assert code == 0
    frame = pd.read_csv(output.with_suffix(".csv"))
    timed = frame[frame["status"] == "ok"]
    assert list(timed["op"]) == ["rms_norm", "glu"]  # the first shape of each op, then the budget is spent
    skipped = frame[frame["status"] == "skipped"]
    assert not skipped.empty and skipped["reason"].str.contains("time budget").all()
    assert "2 shapes timed" in output.read_text()


# ---------------------------------------------------------------------------------------------- rows


def test_a_missing_peer_is_a_row_with_its_reason_not_a_crash():
    def absent():
        raise ImportError("No module named 'nothing_here'")

    library = Library("nothing", "nothing-here", absent, cannot_travel="its wheel is 90 MB")
    missing = Peer(name="nothing", library=library, impls={"rms_norm": Impl(rms_norm_right)})
    rows = run_cpu("rms_norm", [missing])
    assert rows["nothing"]["status"] == "missing"
    assert "does not import" in rows["nothing"]["reason"] and "nothing_here" in rows["nothing"]["reason"]
    assert "its wheel is 90 MB" in rows["nothing"]["reason"]
    assert rows["torch"]["status"] == "ok"  # the others still run
    if not torch.cuda.is_available():
        assert rows["oasr"]["status"] == "error" and "cuda" in rows["oasr"]["reason"].lower()


def test_the_float64_check_flags_a_peer_that_computes_another_function():
    rows = run_cpu(
        "rms_norm",
        [
            peer("right", "rms_norm", rms_norm_right),
            peer("no_weight", "rms_norm", rms_norm_without_weight),
            peer("eps_outside", "rms_norm", rms_norm_eps_outside),
        ],
    )
    assert rows["right"]["status"] == "ok" and rows["right"]["check"] == "pass"
    for wrong in ("no_weight", "eps_outside"):
        assert rows[wrong]["status"] == "fail" and rows[wrong]["check"] == "fail"
        assert "max abs error" in rows[wrong]["reason"]
        assert math.isfinite(rows[wrong]["seconds"])  # timed all the same, marked
    frame = pd.DataFrame(list(rows.values()))
    assert P.best_peer(frame)["backend"] in ("right", "torch")  # a wrong peer is never the best one


def test_add_norm_peer_without_the_residual_is_flagged():
    def norm_of_x_alone(ctx, i):
        return lambda: F.rms_norm(i["x"], (i["x"].shape[-1],), i["weight"], EPS)

    rows = run_cpu("add_rms_norm", [peer("no_residual", "add_rms_norm", norm_of_x_alone)])
    assert rows["no_residual"]["status"] == "fail"
    assert rows["torch"]["status"] == "ok"


def test_unsupported_dtypes_shapes_and_errors_are_rows():
    def odd_shape(ctx, i):
        raise Unsupported("takes c divisible by 128 only")

    def broken(ctx, i):
        def launch():
            raise RuntimeError("illegal memory access\nsecond line")

        return launch

    rows = run_cpu(
        "rms_norm",
        [
            peer("bf16_only", "rms_norm", rms_norm_right, dtypes=("bfloat16",)),
            peer("odd", "rms_norm", odd_shape),
            peer("broken", "rms_norm", broken),
        ],
    )
    assert rows["bf16_only"]["status"] == "unsupported" and "bfloat16" in rows["bf16_only"]["reason"]
    assert rows["odd"] == rows["odd"] | {"status": "unsupported", "reason": "takes c divisible by 128 only"}
    assert rows["broken"]["status"] == "error"
    assert rows["broken"]["reason"] == "RuntimeError: illegal memory access"


def test_a_backend_that_breaks_the_timing_is_timed_alone_and_gets_the_error():
    def timer(launches, **settings):
        if "uncapturable" in launches:
            raise RuntimeError("CUDA graph capture failed")
        return fake_timer(launches, **settings)

    rows = run_cpu(
        "rms_norm", [peer("uncapturable", "rms_norm", rms_norm_right), peer("fine", "rms_norm", rms_norm_right)],
        timer=timer,
    )  # fmt: skip
    assert rows["uncapturable"]["status"] == "error" and "capture failed" in rows["uncapturable"]["reason"]
    assert rows["fine"]["status"] == "ok" and rows["torch"]["status"] == "ok"


def test_static_statuses_lacks_optional_and_dtypes():
    lacking = Peer(name="lacking", library=torch_library(), impls={}, lacks={"rms_norm": "no RMSNorm"})
    slow = Peer(name="slow", library=torch_library(), impls={"rms_norm": Impl(rms_norm_right)}, optional_flag="--slow")
    peers = P.Peers([lacking, slow])
    op = OPS["rms_norm"]
    assert peers.static_status(lacking, op, "float16") == ("lacks", "no RMSNorm")
    assert peers.static_status(slow, op, "float16")[0] == "not requested"
    assert P.Peers([slow], enabled_flags={"--slow"}).static_status(slow, op, "float16") is None
    assert peers.static_status(lacking, OPS["glu"], "float16") is None and lacking not in peers.columns(OPS["glu"])
    rows = P.skipped_rows(P.Unit(op, TINY, "float16", 0), peers, "time budget: 0 s left")
    by_name = {r["backend"]: r["status"] for r in rows}
    assert by_name == {"oasr": "skipped", "torch": "skipped", "lacking": "lacks", "slow": "not requested"}


def test_every_peer_names_real_ops_and_absent_ones_become_rows():
    for p in PEERS:
        for name in [*p.impls, *p.lacks]:
            assert name in OPS or name in PENDING_OPS, (p.name, name)
    ghost = Peer(name="ghost", library=torch_library(), impls={"no_such_op": Impl(rms_norm_right)})
    assert P.absent_ops([ghost], OPS) == ["no_such_op"]
    row = P.absent_row("no_such_op", ghost)
    assert row["status"] == "absent" and "not in this checkout" in row["reason"]
    if "attention" not in OPS:
        assert "attention" in P.absent_ops(PEERS, OPS)


def test_ceiling_is_the_longer_of_bytes_at_copy_and_tensor_flop_at_cublas():
    norm, gemm = OPS["rms_norm"], OPS["gemm"]
    config = {"b": 16, "t": 1500, "c": 1024}
    assert P.ceiling_seconds(norm, config, "float16", 4e12, 7e14) == norm.work(config, torch.float16).bytes / 4e12
    g = {"m": 16000, "n": 2048, "k": 256}
    work = gemm.work(g, torch.bfloat16)
    expected = max(work.bytes / 4e12, work.flops["tensor_bf16"] / 7e14)
    assert P.ceiling_seconds(gemm, g, "bfloat16", 4e12, 7e14) == expected


def test_clean_reason_is_one_bounded_line():
    assert P.clean_reason(ValueError("first\nsecond")) == "ValueError: first"
    assert P.clean_reason(Unsupported("just why")) == "just why"
    long = P.clean_reason("x " * 500)
    assert len(long) <= P.REASON_CHARS and "\n" not in long


# ---------------------------------------------------------------------------------------------- tables


def unit_rows(config, dtype, **backends):
    """Rows of one shape: backend -> (status, seconds)."""
    out = []
    for name, (status, seconds) in backends.items():
        kind = "oasr" if name == "oasr" else "peer"
        out.append(
            {"op": "rms_norm", "config": config, "dtype": dtype, "backend": name, "kind": kind, "status": status,
             "reason": "" if status == "ok" else f"why {name}", "seconds": seconds,
             "pct_of_ceiling": None if seconds is None else 1e-5 / seconds * 100}
        )  # fmt: skip
    return out


def frame_of(rows):
    return pd.DataFrame(rows, columns=list(P.CSV_COLUMNS))


def test_shape_table_ratio_best_peer_and_cells():
    rows = unit_rows("b=1", "float16", oasr=("ok", 2e-5), torch=("ok", 4e-5), fast_wrong=("fail", 1e-5),
                     quack=("missing", None))  # fmt: skip
    rows += unit_rows("b=2", "float16", oasr=("ok", 4e-5), torch=("ok", 3e-5), fast_wrong=("skipped", None),
                      quack=("missing", None))  # fmt: skip
    table = P.shape_table(frame_of(rows), "rms_norm")
    first, second = table.iloc[0], table.iloc[1]
    assert first["best peer"] == "torch" and first["best / oasr"] == "2.00x"  # the wrong one is faster, not best
    assert first["fast_wrong"] == "10.00 ✗" and first["quack"] == "–" and first["oasr"] == "20.00"
    assert first["oasr % of ceiling"] == "50%" and first["best % of ceiling"] == "25%"
    assert second["best / oasr"] == "0.75x" and second["fast_wrong"] == "skip"
    summary = P.summary(frame_of(rows), ["rms_norm"]).iloc[0]
    assert summary["worst best peer / oasr"] == "0.75x" and "b=2" in summary["at"] and "torch" in summary["at"]
    missing = P.not_run(frame_of(rows), "rms_norm")
    quack = missing[missing["backend"] == "quack"].iloc[0]
    assert quack["where"] == "all shapes" and quack["reason"] == "why quack"


def test_markdown_escapes_reasons():
    hostile = "<img src=x onerror=alert(1)> a|b `code` *bold* _it_ [link](x)\nsecond line"
    escaped = P.md_escape(hostile)
    assert "<" not in escaped and "&lt;img" in escaped and "\n" not in escaped
    assert "|" not in escaped.replace("\\|", "") and "\\`" in escaped and "\\*" in escaped and "\\[" in escaped
    rows = unit_rows("b=1", "float16", oasr=("ok", 2e-5), evil=("error", None))
    rows[-1]["reason"] = hostile
    text = P.render_markdown(frame_of(rows), {"machine": "a <b>GPU</b> | x"}, [])
    assert "<img" not in text and "<b>" not in text
    line = next(row for row in text.splitlines() if "onerror" in row)
    assert line.replace("\\|", "").count("|") == 5  # four cells: backend, status, reason, where


def test_write_outputs_writes_markdown_and_csv_beside_it(tmp_path):
    rows = unit_rows("b=1", "float16", oasr=("ok", 2e-5), torch=("ok", 3e-5))
    P.write_outputs(rows, {"commit": "abc123", "machine": "NVIDIA H200"}, [], tmp_path / "out" / "peers.md")
    text = (tmp_path / "out" / "peers.md").read_text()
    assert "commit: abc123" in text and "## rms\\_norm" in text and "1.50x" in text
    csv = pd.read_csv(tmp_path / "out" / "peers.csv")
    assert list(csv.columns) == [*P.CSV_COLUMNS, "commit", "machine"] and len(csv) == 2
    assert not list((tmp_path / "out").glob("*.tmp"))


# ---------------------------------------------------------------------------------------------- command line


def test_dry_run_lists_what_would_run_and_why_not(capsys):
    assert P.main(["--dry-run", "--ops", "rms_norm", "scale", "--dtypes", "float16"]) == 0
    out = capsys.readouterr().out
    assert "rms_norm" in out and "inductor" in out
    assert "quack" in out and ("missing" in out or "quack-kernels" in out)
    assert "inductor_max (not requested" in out
    assert "flashinfer (lacks: no scale op)" in out


def test_bad_command_lines_exit_2(capsys):
    for argv in (["--ops", "nope"], ["--peers", "nope"], ["--time-budget", "0"], ["--dtypes", "int8"]):
        with pytest.raises(SystemExit) as exit_info:
            P.main(argv)
        assert exit_info.value.code == 2


def test_slim_wheel_keeps_what_it_is_told_and_rewrites_record(tmp_path):
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    files = {"pkg/__init__.py": b"x = 1\n", "pkg/data/kernel.cu": b"// used\n", "pkg/data/other.cu": b"// not\n",
             "pkg/big/huge.py": b"y = 2\n", "pkg/table.json": b"{}"}  # fmt: skip
    with zipfile.ZipFile(wheel, "w") as zout:
        for name, data in files.items():
            zout.writestr(name, data)
        zout.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\n")
        zout.writestr("pkg-1.0.dist-info/RECORD", "stale\n")
    keep = tmp_path / "keep.json"
    keep.write_text(json.dumps({"pkg": {"dirs": ["pkg/", "pkg/data/"], "files": ["pkg/data/kernel.cu"]}}))
    dest = tmp_path / "slim"
    script = REPO / "scripts" / "slim_wheel.py"
    cmd = [sys.executable, str(script), str(wheel), str(dest), "--keep-json", str(keep), "--distribution", "pkg"]
    subprocess.run(cmd, check=True, capture_output=True)
    with zipfile.ZipFile(dest / wheel.name) as z:
        names = set(z.namelist())
        assert names == {"pkg/__init__.py", "pkg/data/kernel.cu", "pkg/table.json", "pkg-1.0.dist-info/METADATA",
                         "pkg-1.0.dist-info/RECORD"}  # fmt: skip
        record = dict(line.split(",", 1) for line in z.read("pkg-1.0.dist-info/RECORD").decode().splitlines())
        digest = base64.urlsafe_b64encode(hashlib.sha256(b"x = 1\n").digest()).rstrip(b"=").decode()
        assert record["pkg/__init__.py"] == f"sha256={digest},6"
        assert "pkg/data/other.cu" not in record


# ---------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_one_op_against_inductor_on_the_gpu(tmp_path):
    output = tmp_path / "peers.md"
    start = time.monotonic()
    code = P.main(["--ops", "rms_norm", "--peers", "inductor", "--dtypes", "bfloat16", "--time-budget", "120",
                   "--output", str(output)])  # fmt: skip
    assert code == 0 and time.monotonic() - start < 150
    frame = pd.read_csv(output.with_suffix(".csv"))
    oasr = frame[(frame["backend"] == "oasr") & (frame["status"] == "ok")]
    assert not oasr.empty and (oasr["check"] == "pass").all()
    assert set(frame["backend"]) >= {"oasr", "torch", "inductor"}
