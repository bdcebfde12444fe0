"""The JIT cache under faults (issue 21): damaged libraries, odd paths, clearing, killed builds, bad folders.

Every compiling test builds the scale family (about 5 s on a CPU machine) or
stops a build long before it finishes.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oasr.jit import JitCompileError, core, env, gen_jit_spec
from oasr.jit import __main__ as jit_cli
from oasr.jit.families import SCALE

REPO = Path(__file__).resolve().parent.parent


def _subprocess_env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache holding one build of scale, made once; tests copy it."""
    root = tmp_path_factory.mktemp("built") / "jit"
    before = os.environ.get("OASR_JIT_DIR")
    os.environ["OASR_JIT_DIR"] = str(root)
    try:
        SCALE.jit_spec().build()
    finally:
        if before is None:
            del os.environ["OASR_JIT_DIR"]
        else:
            os.environ["OASR_JIT_DIR"] = before
    yield root


@pytest.fixture
def jit_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built_cache: Path) -> Path:
    """A private copy of the built cache, as OASR_JIT_DIR."""
    directory = tmp_path / "jit"
    shutil.copytree(built_cache, directory, symlinks=True)
    monkeypatch.setenv("OASR_JIT_DIR", str(directory))
    return directory


def _damage(library: Path, how: str) -> None:
    data = library.read_bytes()
    if how == "truncated":
        library.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        library.write_bytes(b"")
    else:  # same size, other bytes
        library.write_bytes(b"\x7fELF" + bytes(len(data) - 4))


# --- class 1: a damaged cached library is detected, rebuilt and reported in one line ---------------------


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_damaged_library_is_rebuilt_not_loaded(jit_dir: Path, how: str) -> None:
    spec = SCALE.jit_spec()
    _damage(spec.library_path, how)
    script = "from oasr.jit.families import SCALE\nprint(callable(SCALE.jit_spec().load().scale))\n"
    for attempt in range(2):  # the second run finds a sound library and says nothing
        result = subprocess.run(
            [sys.executable, "-c", script],
            env=_subprocess_env(OASR_JIT_DIR=str(jit_dir), OASR_CUDA_ARCH_LIST="9.0a"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip() == "True"
        said = [line for line in result.stderr.splitlines() if "damaged" in line]
        if attempt == 0:
            assert len(said) == 1 and "rebuilding 'scale'" in said[0], result.stderr
            assert str(spec.library_path) in said[0]
        else:
            assert said == [], result.stderr
    record = json.loads((spec.library_path.parent / "oasr-build.json").read_text())
    assert spec.library_path.stat().st_size == record["size"] > 0 and len(record["sha256"]) == 64


def test_build_reports_and_rebuilds_a_library_without_its_record(
    jit_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = SCALE.jit_spec()
    assert spec.build().cache_hit and capsys.readouterr().err == ""
    spec.manifest_path.unlink()  # a library the cache cannot vouch for
    info = SCALE.jit_spec().build()
    err = capsys.readouterr().err
    assert not info.cache_hit
    assert [line for line in err.splitlines() if "damaged" in line] == [
        f"oasr JIT: the cached library {spec.library_path} is damaged (no build record oasr-build.json); "
        "rebuilding 'scale'."
    ]
    assert SCALE.jit_spec().is_cached()


def test_a_changed_library_of_the_same_size_is_caught(jit_dir: Path) -> None:
    spec = SCALE.jit_spec()
    assert spec.library_problem() is None
    _damage(spec.library_path, "garbage")
    assert "SHA-256" in (SCALE.jit_spec().library_problem() or "")


# --- class 5: paths and flags are escaped for ninja and for the shells -------------------------------------


@pytest.mark.parametrize("folder", ["a b:c", "a b`echo x`$HOME'q"], ids=["space-colon", "backtick-dollar-quote"])
def test_builds_from_a_checkout_under_an_odd_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str) -> None:
    root = tmp_path / folder
    for name in ("csrc", "include"):
        shutil.copytree(REPO / name, root / name)
    monkeypatch.setattr(env, "OASR_CSRC_DIR", root / "csrc")
    monkeypatch.setattr(env, "OASR_INCLUDE_DIR", root / "include")
    monkeypatch.setenv("OASR_JIT_DIR", str(root / "jit"))
    spec = SCALE.jit_spec(name="scale_`echo x`$HOME v")
    info = spec.build()
    assert not info.cache_hit and info.library.is_file() and info.library.is_relative_to(root / "jit")
    assert spec.library_problem() is None
    # Nothing was substituted: no folder or file named after a command's output appeared.
    made = {p.name for p in tmp_path.rglob("*")}
    assert not any(name.startswith(("a bx", "scale_x")) or name == "x" for name in made), sorted(made)
    ninja = (spec.build_dir / "build.ninja").read_text()
    if "`" not in folder:
        assert "a$ b$:c" in ninja  # a path in a build line, escaped for ninja


def _scale_checkout(root: Path) -> None:
    """The scale family's sources and the headers they reach, laid out as a checkout under ``root``."""
    for name in ("scale.cu", "scale_jit_binding.cu", "tvm_ffi_utils.h"):
        (root / "csrc").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / "csrc" / name, root / "csrc" / name)
    shutil.copytree(REPO / "include" / "oasr" / "common", root / "include" / "oasr" / "common")
    shutil.copyfile(REPO / "include" / "oasr" / "scale.cuh", root / "include" / "oasr" / "scale.cuh")


def test_a_command_in_the_checkout_path_is_never_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvcc resolves symlinks and passes the real path through its own shell (``--orig_src_path_name``)."""
    root = tmp_path / "checkout `touch PWNED` $(touch PWNED2)"
    _scale_checkout(root)
    monkeypatch.setattr(env, "OASR_CSRC_DIR", root / "csrc")
    monkeypatch.setattr(env, "OASR_INCLUDE_DIR", root / "include")
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # nvcc's and the build's temporary files, to be searched
    (tmp_path / "tmp").mkdir()
    monkeypatch.chdir(tmp_path)
    spec = SCALE.jit_spec()
    info = spec.build()
    assert not info.cache_hit and spec.library_problem() is None
    assert not [p for p in tmp_path.rglob("PWNED*")], sorted(str(p) for p in tmp_path.rglob("PWNED*"))
    assert callable(spec.load().scale)


def test_a_command_in_tmpdir_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvcc names its intermediate files under TMPDIR to its shell."""
    temp = tmp_path / "tmp `touch PWNED`"
    temp.mkdir()
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JitCompileError, match=r"the temporary folder .* set TMPDIR to a plain path"):
        gen_jit_spec("scale_tmpdir", SCALE.sources).build()
    assert not list(tmp_path.rglob("PWNED"))


def test_ninja_escaping() -> None:
    assert core._ninja_path("/a b/c:d$e.cu") == "/a$ b/c$:d$$e.cu"
    assert core._ninja_value("x $y") == "x $$y"
    with pytest.raises(JitCompileError, match="newline"):
        core._ninja_value("a\nb")


@pytest.mark.parametrize("flag", ["-DTAG=$(echo x)", "-DTAG=`echo x`", "-DTAG='a'"])
def test_a_flag_nvcc_would_hand_to_a_shell_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str):
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    spec = gen_jit_spec("scale_flagged", SCALE.sources, extra_cuda_cflags=[flag])
    with pytest.raises(JitCompileError, match=r"the flag .* contains a character"):
        spec.build()
    assert not list((tmp_path / "jit").rglob("*.o"))


# --- class 6: clear removes only what the cache made -----------------------------------------------------


def _fake_cache(root: Path) -> tuple[list[Path], list[Path]]:
    """Two builds and their locks in the cache's layout; returns (made by the cache, unrelated)."""
    made = []
    for module, key in (("scale", "0123456789abcdef0123"), ("norm", "fedcba9876543210fedc")):
        build = root / module / key
        build.mkdir(parents=True)
        (build / "build.ninja").write_text("# oasr JIT build\n")
        (build / f"{module}.so").write_bytes(b"\0" * 64)
        files = ["build.ninja", f"{module}.so"]
        record = {"module": module, "key": key, "library": f"{module}.so", "size": 64, "sha256": "0", "files": files}
        (build / core.MANIFEST_NAME).write_text(json.dumps(record))
        (root / module / f"{key}.lock").write_text("")
        made += [build, root / module / f"{key}.lock"]
    unrelated = [root / "notes.txt", root / "scale" / "mine.txt", root / "photos" / "cat.jpg"]
    unrelated.append(root / "scale" / "not_a_key_folder" / "build.ninja")
    # Shaped like a build, but no record of the cache's says it built them.
    unrelated.append(root / "photos" / "0123456789abcdef0123" / "build.ninja")
    unrelated.append(root / "scale" / "00000000000000000000" / "build.ninja")
    (root / "scale" / "11111111111111111111").mkdir()
    unrelated.append(root / "scale" / "11111111111111111111" / core.MANIFEST_NAME)  # another key's record
    other = {"module": "scale", "key": "0123456789abcdef0123", "library": "scale.so", "files": ["thesis.tex"]}
    unrelated.append(root / "scale" / "11111111111111111111" / "thesis.tex")
    for path in unrelated:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("keep me")
    (root / "scale" / "11111111111111111111" / core.MANIFEST_NAME).write_text(json.dumps(other))
    return made, unrelated[:-2] + unrelated[-1:]


def test_clear_removes_builds_and_locks_and_keeps_everything_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "jit"
    made, unrelated = _fake_cache(root)
    monkeypatch.setenv("OASR_JIT_DIR", str(root))
    assert jit_cli.main(["clear"]) == 0
    assert not any(path.exists() for path in made)
    assert all(path.read_text() == "keep me" for path in unrelated)
    assert not (root / "norm").exists()  # emptied module folders go
    assert "2 builds" in capsys.readouterr().out


def test_clear_refuses_a_folder_that_is_not_a_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    (home / "documents").mkdir(parents=True)
    (home / "documents" / "thesis.tex").write_text("keep me")
    (home / ".bashrc").write_text("keep me")
    monkeypatch.setenv("OASR_JIT_DIR", str(home))
    assert jit_cli.main(["clear"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not look like an Oasr JIT cache" in err and "OASR_JIT_DIR" in err
    assert (home / "documents" / "thesis.tex").read_text() == "keep me" and (home / ".bashrc").exists()


def test_clear_refuses_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    target = tmp_path / "jit"
    target.write_text("keep me")
    monkeypatch.setenv("OASR_JIT_DIR", str(target))
    assert jit_cli.main(["clear"]) == 1
    assert "OASR_JIT_DIR" in capsys.readouterr().err and target.read_text() == "keep me"


def test_clear_of_a_real_build_leaves_no_folder(jit_dir: Path) -> None:
    assert jit_cli.main(["clear"]) == 0
    assert not jit_dir.exists()


def test_clear_keeps_a_file_its_build_did_not_make(jit_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = SCALE.jit_spec()
    (spec.build_dir / "mine.txt").write_text("keep me")
    assert jit_cli.main(["clear"]) == 0
    assert (spec.build_dir / "mine.txt").read_text() == "keep me"
    assert sorted(p.name for p in spec.build_dir.iterdir()) == ["mine.txt"]
    assert "other files in it were kept" in capsys.readouterr().out


def _gated_compiler(folder: Path, gate: Path, started: Path) -> Path:
    """A host compiler that says it started, then waits for ``gate`` before compiling for real."""
    wait = f'touch "{started}"\nwhile [ ! -e "{gate}" ]; do sleep 0.1; done\nexec /usr/bin/g++ "$@"'
    return _fake_compiler(folder, "g++ (Gated) 1.0", wait)


def test_clear_keeps_a_build_in_progress_which_then_succeeds(tmp_path: Path) -> None:
    gate, started = tmp_path / "go", tmp_path / "started"
    compiler = _gated_compiler(tmp_path / "bin", gate, started)
    root = tmp_path / "jit"
    script = textwrap.dedent(
        f"""
        from oasr.jit import gen_jit_spec
        from oasr.jit.families import SCALE
        spec = gen_jit_spec("scale_busy", SCALE.sources, extra_cuda_cflags=["-ccbin", {str(compiler)!r}])
        print(spec.build().library)
        """
    )
    environment = _subprocess_env(OASR_JIT_DIR=str(root), OASR_CUDA_ARCH_LIST="9.0a")
    build = subprocess.Popen([sys.executable, "-c", script], env=environment, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), build.communicate()[1][-2000:]
        cleared = subprocess.run([sys.executable, "-m", "oasr.jit", "clear"], env=environment, capture_output=True,
                                 text=True, timeout=60)  # fmt: skip
        gate.write_text("")
        out, err = build.communicate(timeout=300)
    finally:
        gate.write_text("")
        if build.poll() is None:
            build.kill()
    assert cleared.returncode == 0 and "Traceback" not in cleared.stderr, cleared.stderr
    assert build.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "1 being built" in cleared.stdout, cleared.stdout
    library = Path(out.strip())
    assert library.is_file() and core._check_library(library, library.parent / core.MANIFEST_NAME) is None


def test_a_lock_file_deleted_while_held_is_taken_again(tmp_path: Path) -> None:
    """clear deletes a lock file holding it: a build that waited on the deleted file must not hold it beside
    the build that took the new one."""
    path = tmp_path / "scale" / f"{'0' * core.KEY_HEX_DIGITS}.lock"
    held: list[str] = []

    def wait_for_the_lock() -> None:
        with core.build_lock(path, timeout_s=60):
            held.append("waiter")

    with core.build_lock(path, timeout_s=0):
        waiter = threading.Thread(target=wait_for_the_lock)
        waiter.start()
        time.sleep(0.5)  # the waiter now polls the first file
        path.unlink()
        newcomer = core.build_lock(path, timeout_s=0)
        newcomer.__enter__()  # a new file at the same path
    try:
        time.sleep(1.0)  # the first file is free: a waiter that kept it would hold it now
        assert held == []
    finally:
        newcomer.__exit__(None, None, None)
    waiter.join(timeout=30)
    assert held == ["waiter"]


# --- class 8: the cache key sees nvcc's environment and the host compiler ----------------------------------


@pytest.mark.parametrize("variable", ["NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "NVCC_CCBIN"])
def test_nvcc_environment_changes_the_key(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    for name in core.NVCC_ENV_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    base = SCALE.jit_spec().key
    monkeypatch.setenv(variable, "/usr/bin" if variable == "NVCC_CCBIN" else "-DOASR_FROM_ENV=1")
    assert SCALE.jit_spec().key != base


def _fake_compiler(folder: Path, version: str, body: str = 'exec /usr/bin/g++ "$@"') -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("gcc", "g++"):
        path = folder / name
        path.write_text(f'#!/bin/sh\ncase "$*" in *--version*) echo "{version}"; exit 0;; esac\n{body}\n')
        path.chmod(0o755)
    return folder / "g++"


def test_host_compiler_on_path_changes_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVCC_CCBIN", raising=False)
    base = SCALE.jit_spec().key
    _fake_compiler(tmp_path / "bin", "g++ (Fake) 99.1")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert SCALE.jit_spec().key != base


def test_ccbin_compiler_version_changes_the_key(tmp_path: Path) -> None:
    compiler = _fake_compiler(tmp_path / "bin", "g++ (Fake) 1.0")
    first = gen_jit_spec("scale", SCALE.sources, extra_cuda_cflags=["-ccbin", str(compiler)]).key
    _fake_compiler(tmp_path / "bin", "g++ (Fake) 2.0 upgraded")
    later = time.time() + 10
    os.utime(compiler, (later, later))
    second = gen_jit_spec("scale", SCALE.sources, extra_cuda_cflags=["-ccbin", str(compiler)]).key
    assert second != first


# --- class 8: a stopped build stops ninja, nvcc and the host compiler ---------------------------------------


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2 :].split()[0] != "Z"


def _wait_for_pids(pid_file: Path, timeout_s: float = 120) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pid_file.is_file() and pid_file.read_text().strip():
            return [int(p) for p in pid_file.read_text().split()]
        time.sleep(0.1)
    raise AssertionError("the slow host compiler never started")


def _all_gone(pids: list[int], timeout_s: float = 15) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(map(_alive, pids)):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def slow_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A host compiler that records its pid and hangs; (its path, the pid file)."""
    pid_file = tmp_path / "compiler.pids"
    compiler = _fake_compiler(tmp_path / "slow", "g++ (Slow) 1.0", f'echo $$ >> "{pid_file}"\nexec sleep 60')
    return compiler, pid_file


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


@needs_proc
def test_build_timeout_kills_ninja_and_nvcc(tmp_path, monkeypatch, slow_compiler) -> None:
    compiler, pid_file = slow_compiler
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    monkeypatch.setattr(core, "BUILD_TIMEOUT_S", 3)
    spec = gen_jit_spec("scale_slow", SCALE.sources, extra_cuda_cflags=["-ccbin", str(compiler)])
    with pytest.raises(JitCompileError, match=r"took more than 3 s and was stopped"):
        spec.build()
    assert _all_gone([int(p) for p in pid_file.read_text().split()], timeout_s=2)
    assert not (spec.build_dir / core.PID_NAME).exists()


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_a_killed_build_leaves_nothing_running(tmp_path, slow_compiler, sig) -> None:
    compiler, pid_file = slow_compiler
    script = textwrap.dedent(
        f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever started pytest
        from oasr.jit import gen_jit_spec
        from oasr.jit.families import SCALE
        gen_jit_spec("scale_slow", SCALE.sources, extra_cuda_cflags=["-ccbin", {str(compiler)!r}]).build()
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        env=_subprocess_env(OASR_JIT_DIR=str(tmp_path / "jit")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pids = _wait_for_pids(pid_file)
        process.send_signal(sig)
        process.communicate(timeout=60)
        assert _all_gone(pids), "the host compiler outlived the killed build"
        assert _all_gone(_ninjas_in(tmp_path), timeout_s=5), "ninja outlived the killed build"
    finally:
        if process.poll() is None:
            process.kill()
        for pid in [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@needs_proc
def test_next_build_stops_a_leftover_ninja(tmp_path, monkeypatch, capsys) -> None:
    """A ninja left running by a build killed without a chance to clean up is stopped, not built beside."""
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    spec = gen_jit_spec("scale_leftover", SCALE.sources)
    spec.build_dir.mkdir(parents=True)
    (spec.build_dir / "build.ninja").write_text(
        "rule hang\n  command = sh -c 'echo $$$$ > sleeper.pid; exec sleep 60'\nbuild never: hang\n"
    )
    leftover = subprocess.Popen(["ninja", "-C", str(spec.build_dir)], start_new_session=True, stdout=subprocess.DEVNULL)
    sleeper: list[int] = []
    try:
        (spec.build_dir / "ninja.pid").write_text(f"{leftover.pid}\n")
        sleeper = _wait_for_pids(spec.build_dir / "sleeper.pid", timeout_s=30)
        info = spec.build()
        assert not any(map(_alive, sleeper)), "the leftover build's command still runs"
        assert leftover.poll() is not None or not _alive(leftover.pid)
        assert not info.cache_hit and spec.library_problem() is None
        assert "left running by a killed process" in capsys.readouterr().err
    finally:
        if leftover.poll() is None:
            os.killpg(leftover.pid, signal.SIGKILL)
        leftover.wait()
        for pid in sleeper:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _ninjas_in(folder: Path) -> list[int]:
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return [pid for pid in pids if _cmdline(pid).startswith("ninja") and str(folder) in _cmdline(pid)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# --- class 8: an unusable OASR_JIT_DIR is one sentence naming it ---------------------------------------------


def _unusable(tmp_path: Path, kind: str) -> Path:
    if kind == "file":
        target = tmp_path / "jit"
        target.write_text("not a folder")
        return target
    if kind == "under-a-file":
        (tmp_path / "file").write_text("not a folder")
        return tmp_path / "file" / "jit"
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    target = tmp_path / "readonly"
    target.mkdir()
    target.chmod(stat.S_IRUSR | stat.S_IXUSR)
    return target


@pytest.mark.parametrize("kind", ["file", "under-a-file", "read-only"])
def test_unusable_cache_folder_is_one_sentence(tmp_path, monkeypatch, kind) -> None:
    target = _unusable(tmp_path, kind)
    monkeypatch.setenv("OASR_JIT_DIR", str(target))
    with pytest.raises(RuntimeError) as info:
        SCALE.jit_spec().build()
    message = str(info.value)
    assert isinstance(info.value, env.JitCacheDirError)
    assert len(message.splitlines()) == 1 and f"OASR_JIT_DIR={target}" in message
    assert "set OASR_JIT_DIR to a folder you can write to" in message


@pytest.mark.parametrize("value", ["", "   "], ids=["empty", "blank"])
def test_an_empty_cache_folder_setting_is_refused(tmp_path, monkeypatch, value: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OASR_JIT_DIR", value)
    with pytest.raises(env.JitCacheDirError) as info:
        SCALE.jit_spec().build()
    message = str(info.value)
    assert len(message.splitlines()) == 1 and "OASR_JIT_DIR is set but empty" in message and "unset it" in message
    for command in ("list", "clear", "build"):
        result = subprocess.run([sys.executable, "-m", "oasr.jit", command], env=_subprocess_env(OASR_JIT_DIR=value),
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 1 and result.stderr.strip() == message, result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["key", "module"])
def test_a_file_where_a_cache_folder_should_be_is_one_sentence(tmp_path, monkeypatch, where: str) -> None:
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    spec = SCALE.jit_spec()
    blocking = spec.build_dir if where == "key" else spec.build_dir.parent
    blocking.parent.mkdir(parents=True)
    blocking.write_text("keep me")
    with pytest.raises(env.JitCacheDirError) as info:
        spec.build()
    message = str(info.value)
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"oasr JIT: {blocking} is a file where the cache keeps a folder"), message
    assert "delete it" in message
    assert blocking.read_text() == "keep me"


def test_a_full_disk_is_named_when_the_linker_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ld's own words on a full disk (ENOSPC writing the library), from a host compiler that fails the link so."""
    full = 'echo "/usr/bin/ld: final link failed: No space left on device" >&2'
    fail = 'echo "collect2: error: ld returned 1 exit status" >&2; exit 1'
    body = f'case "$*" in *module.partial.so*) {full}; {fail};; esac'
    _fake_compiler(tmp_path / "bin", "g++ (Full disk) 1.0", f'{body}\nexec /usr/bin/g++ "$@"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("NVCC_CCBIN", raising=False)
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    spec = SCALE.jit_spec()
    with pytest.raises(JitCompileError) as info:
        spec.build()
    first = str(info.value).splitlines()[0]
    assert "failed: no space left on device in the build folder" in first and str(spec.build_dir) in first, first
    assert "OASR_JIT_DIR" in first and "MiB free" in first


def test_a_full_disk_while_recording_the_build_is_one_sentence(jit_dir: Path, monkeypatch: pytest.MonkeyPatch):
    def full(spec: object, library: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(library))

    spec = SCALE.jit_spec()
    spec.library_path.unlink()
    monkeypatch.setattr(core, "_write_manifest", full)
    with pytest.raises(JitCompileError, match=r"^oasr JIT: building module 'scale' failed: no space left on device in"):
        spec.build()
    assert not spec.library_path.exists()


def test_cli_build_with_a_bad_arch_list_is_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "oasr.jit", "build"],
        env=_subprocess_env(OASR_JIT_DIR=str(tmp_path / "jit"), OASR_CUDA_ARCH_LIST="9.0a sm_100"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        "OASR_CUDA_ARCH_LIST entry 'sm_100' is not a CUDA architecture; expected entries such as '8.0 9.0a 10.0a'."
    ]


def test_cli_build_with_an_unusable_cache_folder_is_one_line(tmp_path: Path) -> None:
    target = _unusable(tmp_path, "file")
    result = subprocess.run(
        [sys.executable, "-m", "oasr.jit", "build"],
        env=_subprocess_env(OASR_JIT_DIR=str(target)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "OASR_JIT_DIR=" in line]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
