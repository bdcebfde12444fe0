"""The command lines a user meets first: ``python -m oasr.jit`` and ``python -m profiling.nsight``.

Their help is plain text, every flag says what it does, ops are listed, and a wrong
flag value gets one line naming the flag and the form it expects.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import torch

from oasr.jit import __main__ as jit_cli
from oasr.jit.families import FAMILIES
from profiling import commands
from profiling.harness.ops import OPS
from profiling.nsight import runner, sweep

RST = re.compile(r"``|:(func|mod|class|data|meth):`")


def test_jit_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        jit_cli.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert not RST.search(text), text
    for command in ("list", "build", "clear"):
        assert re.search(rf"^\s+{command}\s+\S", text, re.MULTILINE), f"no help line for {command}:\n{text}"


def test_jit_list_marks_the_current_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    family = FAMILIES[0]
    try:
        key = family.jit_spec().key
    except Exception as exc:  # the key hashes nvcc's version
        pytest.skip(f"the cache key needs the CUDA toolkit: {exc}")
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path))
    for build in (key, "0" * 20):
        (tmp_path / family.name / build).mkdir(parents=True)
        (tmp_path / family.name / build / f"{family.name}.so").write_bytes(b"\0" * 1024)
    assert jit_cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    current = [line for line in lines if key in line]
    old = [line for line in lines if "0" * 20 in line]
    assert current and current[0].startswith("*"), lines
    assert old and not old[0].startswith("*"), lines
    others = [f.name for f in FAMILIES[1:]]
    if others:  # families with no build of their current sources are named
        assert any("not built" in line and others[0] in line for line in lines), lines


def test_jit_build_scopes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``build`` builds each family's default module; ``--tests`` and ``--all`` add the variants of each family's
    ``prebuild``, in one parallel batch, each module once."""
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path))
    batches = []
    monkeypatch.setattr(jit_cli.core, "build_in_parallel", lambda specs, jobs: batches.append((specs, jobs)) or 0)
    for argv in (["build"], ["build", "--tests", "--jobs", "3"], ["build", "--all"]):
        assert jit_cli.main(argv) == 0
    (default, _), (tests, jobs), (everything, _) = [([s.name for s in specs], jobs) for specs, jobs in batches]
    assert default == [family.jit_spec().name for family in FAMILIES] and jobs == 3
    for names in (tests, everything):
        assert len(names) == len(set(names)) and set(default) <= set(names)
    prebuilt = [f for f in FAMILIES if f.prebuild is not None]
    assert {f.name for f in prebuilt} == {"conv2d", "gemm", "bmm", "group_gemm"}
    for family in prebuilt:
        for variants, names in ((family.prebuild(True), tests), (family.prebuild(False), everything)):
            assert {family.module_name(v) for v in variants} <= set(names), family.name
    assert set(tests) <= set(everything)
    with pytest.raises(SystemExit):
        jit_cli.main(["build", "--tests", "--all"])


def test_nsight_help_has_every_flag_and_list_shows_the_ops(capsys: pytest.CaptureFixture[str]) -> None:
    parser = commands.nsight_parser()
    for action in parser._actions:
        assert action.help, f"{action.option_strings} has no help"
    with pytest.raises(SystemExit):
        sweep.main(["--help"])
    assert "--list" in capsys.readouterr().out
    assert sweep.main(["--list"]) == 0
    text = capsys.readouterr().out
    for name, spec in OPS.items():
        assert re.search(rf"^{name}\s+{','.join(spec.config_fields)}\s", text, re.MULTILINE), text


@pytest.mark.parametrize(
    ("value", "expected"),
    [("n", "field=int"), ("n=abc", "is not an integer"), ("=3", "field=int"), ("b=1,t=2", "scale's fields n")],
)
def test_nsight_bad_config_is_one_argparse_line(value: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        sweep.main(["--op", "scale", "--config", value])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("python -m profiling.nsight: error: argument --config:"), error
    assert expected in error
    assert "Traceback" not in error and "unpack" not in error and "invalid literal" not in error


def test_parse_config() -> None:
    assert commands.parse_config("b=16, t=1500,c=1024") == {"b": 16, "t": 1500, "c": 1024}
    with pytest.raises(argparse.ArgumentTypeError):
        commands.parse_config("n=1.5")


def test_nsight_unknown_op_lists_the_ops(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sweep.main(["--op", "nope"])
    error = capsys.readouterr().err
    assert "argument --op: invalid choice" in error and "scale" in error


@pytest.mark.skipif(torch.cuda.is_available(), reason="about machines without a CUDA GPU")
def test_live_without_gpu_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert sweep.main(["--op", "scale", "--live"]) == 1
    error = capsys.readouterr().err
    assert "--replay" in error and "python -m profiling.nsight --op scale" in error
    assert "profile_sweep(" not in error
    # Python callers are told the argument (and where the flag is).
    with pytest.raises(runner.NoGpuError, match=r"live=False"):
        sweep.profile_sweep("scale", live=True)
