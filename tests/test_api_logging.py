"""CPU tests for oasr.api_logging (no GPU needed).

The level and destination are read from the environment at import, so most
tests run a small script in a subprocess with OASR_LOGLEVEL / OASR_LOGDEST set.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from oasr import api_logging
from oasr.api_logging import describe_tensor, describe_value

REPO_ROOT = Path(__file__).resolve().parents[1]

# A toy API taking CPU tensors. x is a non-contiguous view with a storage
# offset; y contains a NaN and an Inf.
SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from oasr.api_logging import oasr_api

    def toy(x, factor=2.0, out=None):
        return x * factor

    api = oasr_api(toy)
    if MODE == "identity":
        sys.stderr.write(f"IDENTITY={api is toy}\\n")
    if MODE == "call":
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3)[:, 1:]
        api(x, 3)
        y = torch.tensor([1.0, float("nan"), -2.0, float("inf"), 4.0])
        api(y, factor=0.5, out=None)
    """
)

NAME = "[oasr] __main__.toy"
X = "Tensor(shape=(2, 2), dtype=torch.float32, stride=(3, 1), device=cpu, storage_offset=1, contiguous=False{})"
X_OUT = "Tensor(shape=(2, 2), dtype=torch.float32, stride=(2, 1), device=cpu, storage_offset=0, contiguous=True{})"
Y = "Tensor(shape=(5,), dtype=torch.float32, stride=(1,), device=cpu, storage_offset=0, contiguous=True{})"
EXPECTED = {
    1: [NAME, NAME],
    3: [
        NAME,
        "[oasr]   x: " + X.format(""),
        "[oasr]   factor: 3",
        "[oasr]   out: None",
        "[oasr]   -> " + X_OUT.format(""),
        NAME,
        "[oasr]   x: " + Y.format(""),
        "[oasr]   factor: 0.5",
        "[oasr]   out: None",
        "[oasr]   -> " + Y.format(""),
    ],
    5: [
        NAME,
        "[oasr]   x: " + X.format(", min=1.0, max=5.0, mean=3.0, nan=0, inf=0"),
        "[oasr]   factor: 3",
        "[oasr]   out: None",
        "[oasr]   -> " + X_OUT.format(", min=3.0, max=15.0, mean=9.0, nan=0, inf=0"),
        NAME,
        # Statistics are over the finite elements 1, -2, 4.
        "[oasr]   x: " + Y.format(", min=-2.0, max=4.0, mean=1.0, nan=1, inf=1"),
        "[oasr]   factor: 0.5",
        "[oasr]   out: None",
        "[oasr]   -> " + Y.format(", min=-1.0, max=2.0, mean=0.5, nan=1, inf=1"),
    ],
}


def run_script(mode, level=None, dest=None):
    env = dict(os.environ)
    env.pop("OASR_LOGLEVEL", None)
    env.pop("OASR_LOGDEST", None)
    if level is not None:
        env["OASR_LOGLEVEL"] = str(level)
    if dest is not None:
        env["OASR_LOGDEST"] = str(dest)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run(
        [sys.executable, "-c", f"MODE = {mode!r}\n" + SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )


@pytest.mark.parametrize("level", [None, 0])
def test_level0_returns_function_unchanged_and_prints_nothing(level):
    res = run_script("identity", level=level, dest="stdout")
    assert res.returncode == 0, res.stderr
    assert res.stderr == "IDENTITY=True\n"
    res = run_script("call", level=level, dest="stdout")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "" and res.stderr == ""


@pytest.mark.parametrize("level", [1, 3, 5])
def test_level_stdout(level):
    res = run_script("call", level=level, dest="stdout")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == EXPECTED[level]
    assert res.stderr == ""


@pytest.mark.parametrize("level,expected_level", [(2, 1), (4, 3), (9, 5)])
def test_levels_between_thresholds(level, expected_level):
    res = run_script("call", level=level, dest="stdout")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == EXPECTED[expected_level]


@pytest.mark.parametrize("dest", [None, "stderr"])
def test_default_dest_is_stderr(dest):
    res = run_script("call", level=3, dest=dest)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    assert res.stderr.splitlines() == EXPECTED[3]


def test_file_dest_appends(tmp_path):
    log = tmp_path / "oasr.log"
    for _ in range(2):
        res = run_script("call", level=1, dest=log)
        assert res.returncode == 0, res.stderr
        assert res.stdout == "" and res.stderr == ""
    assert log.read_text().splitlines() == EXPECTED[1] * 2


def test_bad_level_is_rejected():
    res = run_script("identity", level="verbose")
    assert res.returncode != 0
    assert "OASR_LOGLEVEL must be an integer" in res.stderr


# ---------------------------------------------------------------------------
# In-process tests of the helpers.
# ---------------------------------------------------------------------------


@pytest.fixture
def log_config(monkeypatch):
    """Set the logging env and re-read it; restore the config afterwards."""

    def set_config(level, dest="stdout"):
        monkeypatch.setenv("OASR_LOGLEVEL", str(level))
        monkeypatch.setenv("OASR_LOGDEST", dest)
        return api_logging._reload_config()

    yield set_config
    monkeypatch.delenv("OASR_LOGLEVEL", raising=False)
    monkeypatch.delenv("OASR_LOGDEST", raising=False)
    api_logging._reload_config()


def test_reload_config(log_config):
    assert log_config(4, "/tmp/x.log") == (4, "/tmp/x.log")


def test_wrapper_preserves_metadata_and_result(log_config, capsys):
    log_config(1)

    def toy(x, out=None):
        """Toy doc."""
        return x + 1

    api = api_logging.oasr_api(toy)
    assert api is not toy
    assert api.__name__ == "toy" and api.__doc__ == "Toy doc."
    assert api.__wrapped__ is toy
    assert torch.equal(api(torch.zeros(2)), torch.ones(2))
    assert capsys.readouterr().out == (
        "[oasr] test_api_logging.test_wrapper_preserves_metadata_and_result.<locals>.toy\n"
    )


def test_oasr_functions_logged_by_public_name(log_config, capsys):
    log_config(1)

    def glu(x):
        return x

    glu.__module__ = "oasr.activation"
    glu.__qualname__ = "glu"
    api_logging.oasr_api(glu)(1)
    assert capsys.readouterr().out == "[oasr] oasr.glu\n"


def test_arguments_logged_before_a_failing_call(log_config, capsys):
    log_config(3)

    def boom(x):
        raise RuntimeError("kernel failed")

    with pytest.raises(RuntimeError, match="kernel failed"):
        api_logging.oasr_api(boom)(torch.zeros(1))
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[1].startswith("[oasr]   x: Tensor(shape=(1,)")


def test_bad_call_falls_back_to_raw_arguments(log_config, capsys):
    log_config(3)

    def one(x):
        return x

    with pytest.raises(TypeError):
        api_logging.oasr_api(one)(1, 2, y=3)
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["[oasr]   arg0: 1", "[oasr]   arg1: 2", "[oasr]   y: 3"]


def test_describe_tensor_levels():
    t = torch.tensor([[1.0, float("-inf")], [3.0, float("nan")]], dtype=torch.float16)
    base = "Tensor(shape=(2, 2), dtype=torch.float16, stride=(2, 1), device=cpu, storage_offset=0, contiguous=True"
    assert describe_tensor(t, 3) == base + ")"
    assert describe_tensor(t, 5) == base + ", min=1.0, max=3.0, mean=2.0, nan=1, inf=1)"


def test_describe_tensor_skips_stats():
    ints = torch.arange(4, dtype=torch.int32)
    assert "min=" not in describe_tensor(ints, 5)
    assert "nan=" not in describe_tensor(ints, 5)
    empty = torch.empty(0, 3)
    assert describe_tensor(empty, 5).endswith("contiguous=True, nan=0, inf=0)")
    all_nan = torch.full((2,), float("nan"))
    assert describe_tensor(all_nan, 5).endswith("contiguous=True, nan=2, inf=0)")
    meta = torch.empty(2, device="meta")
    assert describe_tensor(meta, 5).endswith("device=meta, storage_offset=0, contiguous=True)")


def test_describe_value():
    assert describe_value(None, 3) == "None"
    assert describe_value(2.5, 3) == "2.5"
    assert describe_value("cutlass", 3) == "'cutlass'"
    assert describe_value(torch.float16, 3) == "torch.float16"
    pair = describe_value((torch.zeros(1), 1), 3)
    assert pair.startswith("(Tensor(shape=(1,)") and pair.endswith(", 1)")
    assert describe_value([1], 3) == "[1]"
    assert describe_value((1,), 3) == "(1,)"
    assert len(describe_value("x" * 1000, 3)) == 200


def test_compiled_calls_are_traced_without_logging(log_config, capsys):
    """torch.compile traces the op itself: logging (I/O) would break the graph."""
    log_config(3)

    def toy(x):
        return x * 2

    api = api_logging.oasr_api(toy)
    compiled = torch.compile(lambda x: api(x) + 1, backend="eager", fullgraph=True)
    assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 3.0))
    assert capsys.readouterr().out == ""
    api(torch.ones(1))  # eager calls still log
    assert capsys.readouterr().out.startswith("[oasr] test_api_logging.")
