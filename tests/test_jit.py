"""The JIT machinery on a CPU machine: nvcc builds for sm_90a, caching, locking, errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import torch

from oasr.jit import CompilationContext, JitCompileError, core, env, gen_jit_spec
from oasr.jit import families as F
from oasr.jit.compilation_context import parse_arch_list
from oasr.jit.families import FAMILIES, SCALE

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def jit_dir(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "jit"
    monkeypatch.setenv("OASR_JIT_DIR", str(directory))
    return directory


@pytest.fixture
def source_copy(tmp_path, monkeypatch) -> Path:
    """A private copy of csrc/ and include/ that a test may edit."""
    root = tmp_path / "src"
    for folder in ("csrc", "include"):
        shutil.copytree(REPO / folder, root / folder)
    monkeypatch.setattr(env, "OASR_CSRC_DIR", root / "csrc")
    monkeypatch.setattr(env, "OASR_INCLUDE_DIR", root / "include")
    return root


def _subprocess_env(*front: Path, **extra: str) -> dict[str, str]:
    """This environment with ``front`` and the repository first on PYTHONPATH."""
    path = os.pathsep.join([*map(str, front), str(REPO), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **extra}


def test_scale_module_exports_its_launcher(jit_dir):
    module = SCALE.jit_spec().build_and_load()
    assert callable(module.scale)


def test_second_build_is_a_cache_hit_without_nvcc(jit_dir, monkeypatch):
    first = SCALE.jit_spec().build()
    assert not first.cache_hit

    def no_compiler(*args, **kwargs):
        raise AssertionError(f"a cache hit ran a command: {args}")

    monkeypatch.setattr(core.subprocess, "run", no_compiler)
    second = SCALE.jit_spec().build()
    assert second.cache_hit and second.library == first.library
    assert second.library.stat().st_mtime_ns == first.library.stat().st_mtime_ns


def test_editing_a_header_invalidates(jit_dir, source_copy):
    before = SCALE.jit_spec()
    assert not before.build().cache_hit
    header = source_copy / "include" / "oasr" / "common" / "math.cuh"
    header.write_text(header.read_text() + "\n// an edit\n")
    after = SCALE.jit_spec()
    assert after.key != before.key
    assert not after.build().cache_hit


def test_another_familys_header_keeps_the_key(source_copy):
    """A module's key hashes the headers its sources reach, so editing conv1d's rebuilds conv1d alone."""
    scale, conv1d = SCALE.jit_spec().key, F.CONV1D.jit_spec().key
    header = source_copy / "include" / "oasr" / "conv1d" / "tensor_core.cuh"
    header.write_text(header.read_text() + "\n// an edit\n")
    assert SCALE.jit_spec().key == scale
    assert F.CONV1D.jit_spec().key != conv1d


def test_included_headers_resolve_as_the_preprocessor(tmp_path):
    first, second = tmp_path / "include", tmp_path / "csrc"
    (first / "lib").mkdir(parents=True)
    second.mkdir()
    (first / "lib" / "a.h").write_text('#include "near.h"\n#if 0\n#include <lib/unused.h>\n#endif\n')
    (first / "lib" / "near.h").write_text("")
    (first / "lib" / "unused.h").write_text("")
    (first / "other.h").write_text("")  # reached by nothing
    (second / "util.h").write_text('#include <cuda_runtime.h>\n#include "lib/a.h"\n')  # a cycle back to a.h
    source = second / "op.cu"
    source.write_text('#include <lib/a.h>\n#include "util.h"\n#include "shadowed.h"\n')
    (second / "shadowed.h").write_text("")

    def found():
        return core.included_headers([source], [first, second])

    names = [str(path.relative_to(root)) for root, path in found()]
    assert names == ["shadowed.h", "util.h", "lib/a.h", "lib/near.h", "lib/unused.h"]
    # A quoted name is looked up beside the including file first: csrc's shadowed.h stays the one read.
    (first / "shadowed.h").write_text("")
    assert (second, second / "shadowed.h") in found() and (first, first / "shadowed.h") not in found()
    # An angle-bracket name takes the first root that has it.
    (first / "util.h").write_text("")
    source.write_text("#include <util.h>\n")
    assert found() == [(first, first / "util.h")]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_included_headers_hold_what_nvcc_reads(family):
    """Every project header in nvcc's own dependency list is in the key (nvcc -M, no build)."""
    spec = family.jit_spec()
    roots = [spec.include_dir.resolve(), env.OASR_CSRC_DIR.resolve()]
    flags = [flag for flag in spec.nvcc_flags if flag.startswith(("-I", "-D", "-std"))]
    read = set()
    for source in spec.sources:
        listed = subprocess.run(["nvcc", "-M", *flags, str(source)], capture_output=True, text=True, check=True)
        for word in listed.stdout.replace("\\\n", " ").split():
            path = Path(word).resolve()
            if path.suffix in core.HEADER_SUFFIXES and any(path.is_relative_to(r) for r in roots):
                read.add(path)
    hashed = {path for _, path in core.included_headers(spec.sources, [spec.include_dir, env.OASR_CSRC_DIR])}
    assert read and read <= hashed, sorted(map(str, read - hashed))


def test_flags_and_sources_change_the_key(jit_dir):
    base = SCALE.jit_spec()
    flagged = gen_jit_spec("scale", base.sources, extra_cuda_cflags=["-DOASR_TEST_FLAG=1"])
    assert flagged.key != base.key
    assert SCALE.jit_spec().key == base.key


def test_include_dir_builds_against_a_copy(jit_dir, tmp_path):
    """A dev/ variant names its own copy of include/: the key, the -I flag and the build follow it."""
    copy = tmp_path / "variant_include"
    shutil.copytree(env.OASR_INCLUDE_DIR, copy)
    base = SCALE.jit_spec()
    same = SCALE.jit_spec(name="scale_variant", include_dir=copy)
    assert f"-I{copy}" in same.nvcc_flags and f"-I{env.OASR_INCLUDE_DIR}" not in same.nvcc_flags
    same_key = same.key  # computed now, before the edit (the key is cached on the spec)
    header = copy / "oasr" / "scale.cuh"
    header.write_text(header.read_text() + "\n#error variant header in use\n")
    variant = SCALE.jit_spec(name="scale_variant", include_dir=copy)
    assert variant.key not in (base.key, same_key)
    with pytest.raises(JitCompileError, match="variant header in use"):
        variant.build()


def test_family_module_is_loaded_once_until_forgotten(monkeypatch):
    built: list[str] = []

    def fake_build_and_load(spec):
        built.append(spec.name)
        return object()

    monkeypatch.setattr(F, "_LOADED", {})
    monkeypatch.setattr(core.JitSpec, "build_and_load", fake_build_and_load)
    first = SCALE.module()
    assert SCALE.module() is first and built == ["scale"]
    monkeypatch.setitem(F.STAND_INS, "scale", lambda variant: ("stand-in", variant))  # the hook compare.stand_in sets
    assert SCALE.module() == ("stand-in", None) and built == ["scale"]
    monkeypatch.delitem(F.STAND_INS, "scale")
    assert SCALE.module() is first and built == ["scale"]
    F.forget_loaded_modules()
    assert SCALE.module() is not first and built == ["scale", "scale"]


def test_families_name_their_sources_and_ops():
    import oasr

    for family in FAMILIES:
        assert all(source.is_file() for source in family.sources), family.name
        assert all(F.family_of(op) is family for op in family.ops) and F.family_named(family.name) is family
        for variant in family.prebuild(False) if family.prebuild else ():  # a schedule's own launcher too
            assert all(source.is_file() for source in family.sources_of(variant)), variant.name
    assert sorted(oasr.__all__) == sorted(op for family in FAMILIES for op in family.ops)
    with pytest.raises(ValueError, match=r"no family has an op 'nope'; the ops are: .*rms_norm"):
        F.family_of("nope")
    with pytest.raises(ValueError, match=r"no family is named 'nope'; the families are: scale, .*group_gemm"):
        F.family_named("nope")


def test_two_processes_build_once_and_both_load(jit_dir):
    script = textwrap.dedent(
        """
        from oasr.jit.families import SCALE
        spec = SCALE.jit_spec()
        info = spec.build()
        spec.load()
        print("HIT" if info.cache_hit else "BUILT")
        """
    )
    env_vars = _subprocess_env(OASR_JIT_DIR=str(jit_dir))
    processes = [
        subprocess.Popen([sys.executable, "-c", script], env=env_vars, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0].strip() for p in processes]
    assert all(p.returncode == 0 for p in processes)
    assert sorted(outputs) == ["BUILT", "HIT"]
    assert len(list(jit_dir.glob("scale/*/scale.so"))) == 1


def test_compile_error_shows_file_and_line(jit_dir, tmp_path):
    broken = tmp_path / "broken_kernel.cu"
    broken.write_text("#include <cuda_runtime.h>\n\n__global__ void k(float* x) { x[0] = undefined_name; }\n")
    with pytest.raises(JitCompileError) as info:
        gen_jit_spec("broken", [broken]).build()
    message = str(info.value)
    assert "building module 'broken' failed" in message
    assert "broken_kernel.cu(3): error" in message and "undefined_name" in message
    assert "ninja" not in message.splitlines()[1]


def test_verbose_build_prints_the_commands(jit_dir):
    script = "from oasr.jit.families import SCALE; SCALE.jit_spec().build()"
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=_subprocess_env(OASR_JIT_DIR=str(jit_dir), OASR_JIT_VERBOSE="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "nvcc" in result.stderr and "-gencode=arch=compute_90a" in result.stderr


def test_static_template_stub_flag_on_recent_cuda(jit_dir):
    (major, minor), _ = core.nvcc_version()
    flags = SCALE.jit_spec().nvcc_flags
    assert ("-static-global-template-stub=false" in flags) == ((major, minor) >= (12, 8))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8.0 9.0a", {(8, "0"), (9, "0a")}),
        ("  9.0a   10.0a  ", {(9, "0a"), (10, "0a")}),
        ("9.0a;8.6", {(9, "0a"), (8, "6")}),
    ],
)
def test_arch_list_parsing(text, expected):
    assert parse_arch_list(text) == expected


@pytest.mark.parametrize("text", ["9.x", "sm_90", "ninety", "9", " "])
def test_bad_arch_list_is_explained(text, monkeypatch):
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", text)
    with pytest.raises(ValueError, match="OASR_CUDA_ARCH_LIST"):
        CompilationContext()


def test_arch_override_and_supported_majors(monkeypatch):
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "8.0 9.0a")
    context = CompilationContext()
    assert context.get_nvcc_flags_list() == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
    ]
    assert context.get_nvcc_flags_list(supported_major_versions=[9, 10]) == ["-gencode=arch=compute_90a,code=sm_90a"]
    with pytest.raises(RuntimeError, match=r"No supported CUDA architectures found for major versions \[10, 12\]"):
        context.get_nvcc_flags_list(supported_major_versions=[10, 12])


def test_no_gpu_defaults_to_sm90a_and_says_so_once():
    script = "from oasr.jit import CompilationContext as C; C(); C(); print(sorted(C().TARGET_CUDA_ARCHS))"
    environment = _subprocess_env()
    environment.pop("OASR_CUDA_ARCH_LIST", None)
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: detection is used instead of the default")
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True)
    assert result.stdout.strip() == "[(9, '0a')]"
    assert result.stderr.count("building for sm_90a") == 1


def _jit_cli(*args: str, **env: str) -> str:
    """``python -m oasr.jit ARGS`` in a subprocess (``env``: variables to set), its output."""
    return subprocess.run(
        [sys.executable, "-m", "oasr.jit", *args],
        env=_subprocess_env(**env),
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.slow  # every module, three of them CUTLASS instantiations: the full tier
def test_every_module_compiles_for_sm90a_and_loads():
    """Every family's current module, in the cache the notebooks and the other tests use: the CLI's `build` compiles
    what it lacks in parallel (on CI's cold cache all of them, the suite's costliest step, so done in one place), then
    each loads and `list` marks it current."""
    built = _jit_cli("build")
    specs = [family.jit_spec() for family in FAMILIES]
    for spec in specs:
        assert re.search(rf"^{re.escape(spec.name)}: (built in|cached)", built, re.MULTILINE), built
        assert "-gencode=arch=compute_90a,code=sm_90a" in spec.nvcc_flags
        info = spec.build()
        assert info.cache_hit and info.library.is_file() and info.library.is_relative_to(env.jit_cache_dir())
        assert spec.load() is not None
    bmm = F.BMM.jit_spec()
    assert "-DOASR_GEMM_B_NMAJOR=0" in bmm.nvcc_flags and callable(bmm.load().bmm)
    listed = _jit_cli("list").splitlines()
    for spec in specs:
        assert any(line.startswith(f"* {spec.name} ") for line in listed), listed


def test_cache_command_lists_and_clears(jit_dir):
    SCALE.jit_spec().build()
    listed = _jit_cli("list", OASR_JIT_DIR=str(jit_dir))
    assert "scale" in listed and "(1 builds)" in listed
    _jit_cli("clear", OASR_JIT_DIR=str(jit_dir))
    assert not jit_dir.exists()


@pytest.mark.slow
def test_installed_wheel_carries_kernel_sources(tmp_path):
    """A plain `pip install .` must find csrc/ and include/ inside the package."""
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheel_dir),
            str(REPO),
        ],
        check=True,
        timeout=600,
    )
    (wheel,) = wheel_dir.glob("oasr-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "oasr/_data/csrc/scale.cu" in names and "oasr/_data/include/oasr/scale.cuh" in names
    assert "oasr/_data/csrc/tvm_ffi_utils.h" in names and "profiling/harness/ops/scale.py" in names
    zipfile.ZipFile(wheel).extractall(target)
    script = textwrap.dedent(
        """
        from oasr.jit import env
        from oasr.jit.families import SCALE
        print(env.OASR_CSRC_DIR)
        print(SCALE.jit_spec().build().library)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=_subprocess_env(target, OASR_JIT_DIR=str(tmp_path / "jit")),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    csrc, library = result.stdout.split()
    assert Path(csrc) == target / "oasr" / "_data" / "csrc"
    assert Path(library).is_file()


def test_build_in_parallel_reports_each_module_and_counts_failures(capsys) -> None:
    """``python -m oasr.jit build``'s report: every module's line in order, a failure with its error, and the count."""

    class Spec:
        def __init__(self, name: str, error: str | None = None) -> None:
            self.name, self.error = name, error

        def build(self) -> core.BuildInfo:
            if self.error:
                raise RuntimeError(self.error)
            return core.BuildInfo(self.name, Path("x.so"), self.name == "a", 45.2, "k", ())

    assert core.build_in_parallel([Spec("a"), Spec("b", "nvcc: out of memory"), Spec("c")], jobs=2) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "building 3 modules, 2 at a time"
    assert lines[1:5] == ["a: cached", "b: FAILED", "nvcc: out of memory", "c: built in 45 s"]
    assert lines[5].endswith("1 failed")
