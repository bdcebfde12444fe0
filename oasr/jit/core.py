"""JIT builds: a ninja build per module, cached by content, shared across processes.

A module's cache key hashes everything that can change the binary: its sources,
the headers of ``include/`` and ``csrc/`` they reach (``included_headers``: editing
one family's header rebuilds that family's modules, not every CUTLASS module), the
compiler flags (architectures included), the nvcc version and the tvm-ffi version.
A build lives in ``<cache>/<name>/<key>/`` and is made once, under a file lock
(:func:`build_lock`, which ``python -m oasr.jit clear`` takes too), however many
processes ask for it at the same time; its record lists the files it made there.

Reliability: a build records its library's size and SHA-256 in
``oasr-build.json``; a library that no longer matches (truncated, emptied,
overwritten) is rebuilt with one line on stderr instead of being loaded. Every
path and flag is escaped for ninja and for the shell ninja runs commands
through. nvcc itself hands paths to a shell inside double quotes, and resolves a
source's symlinks first: a folder whose path holds ``$``, a backtick, a quote or a
backslash reaches it through a plain-named symlink, and a source under one through a
one-line file in the build folder that includes it by that link (the preprocessor
opens includes as named). Such a CUDA toolkit or TMPDIR is refused. ninja runs
in its own session, killed with everything it started on Ctrl-C, on a timeout
or when Python dies. The key also hashes ``NVCC_PREPEND_FLAGS``,
``NVCC_APPEND_FLAGS``, ``NVCC_CCBIN`` and the host compiler's path and version.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import env
from .compilation_context import current_compilation_context

LOCK_TIMEOUT_S = 1800
BUILD_TIMEOUT_S = 1500
"""A build running longer is stopped (ninja, nvcc and the host compiler killed); below the lock's wait."""
KEY_HEX_DIGITS = 20
"""A module's cache key: this many hex digits of a SHA-256 (the name of its build folder)."""
MANIFEST_NAME = "oasr-build.json"
"""The record each build leaves beside its library: module, key, library size and SHA-256, the files it made."""
PID_NAME = "ninja.pid"
"""Present while a build runs: ninja's process (and session) id, so a later build can stop a leftover one."""
COMMON_NVCC_FLAGS = (
    "-O3",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "-lineinfo",
    "-DNDEBUG",
    "-Xcompiler=-fPIC",
    # Each module keeps its own function-local statics (the launchers' "shared memory allowed" and occupancy
    # caches): GCC would make them GNU-unique symbols, bound once per process, so that two modules instantiating
    # one launcher template (gemm and bmm of one tile, a variant and production) would share them.
    "-Xcompiler=-fno-gnu-unique",
)
# nvcc prints "file.cu(12): error: ..." and host compilers "file.cc:12:3: error: ...".
_DIAGNOSTIC = re.compile(r"^(?P<loc>\S+?(\(\d+\)|:\d+(:\d+)?)): (fatal )?error\b")


class JitCompileError(RuntimeError):
    """A module failed to build; the message carries the compiler's own error lines."""


@functools.cache
def find_cuda_home() -> Path:
    """The CUDA toolkit: ``CUDA_HOME``, ``CUDA_PATH``, the real path of ``nvcc``, /usr/local/cuda."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates.append("/usr/local/cuda")
    for candidate in candidates:
        if (
            candidate
            and (Path(candidate) / "bin" / "nvcc").is_file()
            and (Path(candidate) / "include" / "cuda_runtime.h").is_file()
        ):
            return Path(candidate)
    raise RuntimeError(
        "oasr JIT: no CUDA toolkit found (looked at CUDA_HOME, CUDA_PATH, the nvcc on PATH "
        "and /usr/local/cuda). Install the CUDA toolkit 12.8 or newer and set CUDA_HOME."
    )


@functools.cache
def nvcc_version() -> tuple[tuple[int, int], str]:
    """((major, minor), full ``nvcc --version`` text) of the toolkit's nvcc."""
    nvcc = find_cuda_home() / "bin" / "nvcc"
    text = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\d+)\.(\d+)", text)
    if match is None:
        raise RuntimeError(f"oasr JIT: cannot read the CUDA version from `{nvcc} --version`:\n{text}")
    return (int(match.group(1)), int(match.group(2))), text


def _tvm_ffi_include_paths() -> list[str]:
    import tvm_ffi.libinfo

    return list(tvm_ffi.libinfo.include_paths())


def _tvm_ffi_version() -> str:
    import tvm_ffi

    return tvm_ffi.__version__


HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".inc")
INCLUDE_DIRECTIVE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)


def included_headers(sources: list[Path], roots: list[Path]) -> list[tuple[Path, Path]]:
    """The project headers that ``sources`` reach through ``#include``: (root, path) pairs, sorted.

    Found as the preprocessor finds them: ``"name"`` in the including file's folder first, then
    in ``roots`` in order (the first ``-I`` folders), ``<name>`` in ``roots``. A name found in
    none of them is a toolkit, CUTLASS or tvm-ffi header, which the key covers by version. Every
    directive counts, those under ``#if`` too, so the set holds at least what nvcc reads. The roots
    come back resolved.
    """
    roots = list(dict.fromkeys(root.resolve() for root in roots))
    found: dict[Path, Path] = {}
    pending = [Path(source) for source in sources]
    while pending:
        including = pending.pop()
        for match in INCLUDE_DIRECTIVE.finditer(including.read_bytes()):
            name = match.group(2).decode()
            folders = [including.parent] if match.group(1) == b'"' else []
            for folder in folders + roots:
                path = folder / name
                if path.is_file():
                    break
            else:
                continue
            path = path.resolve()
            root = next((r for r in roots if path.is_relative_to(r)), None)
            if root is not None and path not in found:
                found[path] = root
                pending.append(path)
    return sorted(((root, path) for path, root in found.items()), key=lambda pair: str(pair[1]))


def headers_under(root: Path) -> list[tuple[Path, Path]]:
    """Every header under ``root`` as (root, path) pairs, resolved and sorted: what a revision's whole state hashes."""
    root = root.resolve()
    return [(root, path) for path in sorted(p for p in root.rglob("*") if p.suffix in HEADER_SUFFIXES and p.is_file())]


def hash_headers(digest: Any, headers: list[tuple[Path, Path]]) -> None:
    """Feed each header (its name under its resolved root, and its bytes) into ``digest``."""
    for root, path in headers:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())


def default_cuda_cflags() -> list[str]:
    """Flags every module gets: optimisation, C++17, and the toolkit's needs."""
    (major, minor), _ = nvcc_version()
    flags = list(COMMON_NVCC_FLAGS)
    if (major, minor) >= (12, 8):
        # Templated __global__ functions in shared libraries need real stubs.
        flags.append("-static-global-template-stub=false")
    return flags


@dataclass(frozen=True)
class BuildInfo:
    """What one ``JitSpec.build()`` call did."""

    name: str
    library: Path
    cache_hit: bool
    seconds: float
    key: str
    nvcc_flags: tuple[str, ...]


@dataclass(frozen=True)
class Variant:
    """One instantiation of a family built per configuration (a dtype, an epilogue, a CUTLASS tile).

    Its module is ``<family>_<name>``, the family's sources built with ``cuda_cflags`` added, so a
    call builds only the configurations it uses; ``launcher`` names the ``csrc/`` file that replaces
    ``csrc/<family>.cu`` for it (a schedule with a launcher of its own).
    """

    name: str
    cuda_cflags: tuple[str, ...]
    launcher: str | None = None


@dataclass
class JitSpec:
    """One JIT module: its sources and flags. Build with :meth:`build_and_load`."""

    name: str
    sources: list[Path]
    extra_cuda_cflags: list[str] = field(default_factory=list)
    extra_ldflags: list[str] = field(default_factory=list)
    extra_include_paths: list[Path] = field(default_factory=list)
    include_dir: Path = field(default_factory=lambda: env.OASR_INCLUDE_DIR)  # a variant's edited copy of include/

    @functools.cached_property
    def nvcc_flags(self) -> tuple[str, ...]:
        return tuple(default_cuda_cflags() + list(self.extra_cuda_cflags) + [f"-I{p}" for p in self._includes()])

    def _includes(self) -> list[Path]:
        return [self.include_dir, env.OASR_CSRC_DIR, *self.extra_include_paths, *map(Path, _tvm_ffi_include_paths())]

    def _all_nvcc_flags(self) -> list[str]:
        """The flags nvcc will see, its environment's included (for finding the host compiler)."""
        return _env_flags("NVCC_PREPEND_FLAGS") + list(self.nvcc_flags) + _env_flags("NVCC_APPEND_FLAGS")

    @functools.cached_property
    def key(self) -> str:
        digest = hashlib.sha256()
        for part in (self.name, _tvm_ffi_version(), nvcc_version()[1], sys.platform):
            digest.update(part.encode())
        for variable in NVCC_ENV_VARIABLES:  # nvcc reads these itself
            digest.update(f"{variable}={os.environ.get(variable, '')}".encode() + b"\0")
        for compiler in host_compilers(self._all_nvcc_flags()):
            digest.update(compiler.encode() + b"\0")
        for flag in (*self.nvcc_flags, "|", *self.extra_ldflags):
            digest.update(flag.encode() + b"\0")
        for source in self.sources:
            digest.update(Path(source).name.encode())
            digest.update(Path(source).read_bytes())
        # The sources' own folders last: a revision's csrc/ that `profiling.compare` builds beside this one.
        folders = [Path(source).parent for source in self.sources]
        hash_headers(digest, included_headers(self.sources, [self.include_dir, env.OASR_CSRC_DIR, *folders]))
        return digest.hexdigest()[:KEY_HEX_DIGITS]

    @property
    def build_dir(self) -> Path:
        return env.jit_cache_dir() / self.name / self.key

    @property
    def library_path(self) -> Path:
        return self.build_dir / f"{self.name}.so"

    @property
    def manifest_path(self) -> Path:
        return self.build_dir / MANIFEST_NAME

    def is_cached(self) -> bool:
        """A library exists and matches the size and hash recorded when it was built."""
        return self.library_problem() is None

    def library_problem(self) -> str | None:
        """None when the cached library is sound; else "missing" or what is wrong with it."""
        return _check_library(self.library_path, self.manifest_path)

    def build(self) -> BuildInfo:
        """Compile unless a sound build with the same key exists; safe across processes.

        A damaged library (its size or hash no longer what was recorded) is rebuilt,
        with one line on stderr saying so.
        """
        start = time.perf_counter()
        if self.library_problem() is not None:
            _check_module_name(self.name)
            env.ensure_jit_cache_dir()
            lock_path = self.build_dir.parent / f"{self.key}.lock"
            with contextlib.ExitStack() as held:
                try:
                    held.enter_context(build_lock(lock_path, LOCK_TIMEOUT_S))
                except TimeoutError as exc:
                    raise RuntimeError(
                        f"oasr JIT: waited {LOCK_TIMEOUT_S} s for another process building "
                        f"'{self.name}' (lock {lock_path}). If no build is running, delete the lock."
                    ) from exc
                except OSError as exc:  # a read-only folder
                    raise env.cache_dir_error(env.jit_cache_dir(), exc.strerror or type(exc).__name__) from exc
                problem = self.library_problem()
                if problem is not None:
                    if problem != "missing":
                        print(
                            f"oasr JIT: the cached library {self.library_path} is damaged ({problem}); "
                            f"rebuilding '{self.name}'.",
                            file=sys.stderr,
                        )
                    self._compile()
                    return self._info(start, cache_hit=False)
        return self._info(start, cache_hit=True)

    def load(self) -> Any:
        """Load the library, rebuilding it first (one line on stderr) when it is missing or damaged."""
        import tvm_ffi

        if self.library_problem() is not None:
            self.build()
        return tvm_ffi.load_module(str(self.library_path))

    def build_and_load(self) -> Any:
        self.build()
        return self.load()

    def _info(self, start: float, cache_hit: bool) -> BuildInfo:
        return BuildInfo(
            self.name, self.library_path, cache_hit, time.perf_counter() - start, self.key, self.nvcc_flags
        )

    def _compile(self) -> None:
        build_dir = self.build_dir
        make_cache_folder(build_dir)
        _stop_leftover_build(build_dir)
        # Start clean: whatever is here is a damaged library or what a killed build left.
        for stale in build_dir.iterdir():
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
        # nvcc hands its cwd and paths to a shell inside double quotes: build where that is harmless.
        temp = _plain_temp_dir()
        work = build_dir if _nvcc_safe(str(build_dir)) else Path(tempfile.mkdtemp(prefix="oasr-jit-", dir=temp))
        try:
            ninja_text, output = self._ninja_file(work)
            (build_dir / "build.ninja").write_text(ninja_text)
            if work != build_dir:
                (work / "build.ninja").write_text(ninja_text)
            command = ["ninja", "-C", str(work)]
            if env.verbose_build():
                command.append("-v")
                print(f"oasr JIT: building '{self.name}' in {build_dir}", file=sys.stderr)
            returncode, log = _run_ninja(command, build_dir / PID_NAME, self.name)
            (build_dir / "build.log").write_text(log)
            if env.verbose_build():
                print(log, file=sys.stderr)
            if returncode != 0:
                raise JitCompileError(_summarise_failure(self.name, log, build_dir / "build.log"))
            partial = build_dir / f"{self.name}.so.partial"
            if work != build_dir:
                shutil.copyfile(work / output, partial)
            else:
                os.replace(work / output, partial)
            _write_manifest(self, partial)
            # The final name appears only once the library is complete and recorded.
            os.replace(partial, self.library_path)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            raise JitCompileError(_no_space(self.name, build_dir)) from None
        finally:
            if work != build_dir:
                shutil.rmtree(work, ignore_errors=True)

    def _ninja_file(self, work: Path) -> tuple[str, str]:
        """build.ninja's text (run in ``work``) and the library's name there.

        Every path and flag is shell-quoted, then escaped for ninja (``$$``; ``$ `` and
        ``$:`` in build lines). A folder nvcc cannot pass through its own shell reaches
        it through a symlink in ``work`` with a plain name; a source in one, through a
        file in ``work`` that includes it by that link (nvcc would resolve a link to the
        source itself and hand the real path to its shell).
        """
        flags = [*default_cuda_cflags(), *self.extra_cuda_cflags, *self.extra_ldflags]
        for flag in flags:
            if not _nvcc_safe(flag):
                raise JitCompileError(
                    f"oasr JIT: module '{self.name}': the flag {flag!r} contains a character that nvcc "
                    f"passes to a shell unescaped ($, `, quotes, backslash or a newline); remove it."
                )
        links: dict[Path, str] = {}

        def safe(path: Path) -> str:
            if _nvcc_safe(str(path)):
                return str(path)
            if path not in links:
                links[path] = f"oasr_input_{len(links)}"
                link = work / links[path]
                link.unlink(missing_ok=True)
                link.symlink_to(path, target_is_directory=path.is_dir())
            return links[path]

        cuda_home = find_cuda_home()
        if not _nvcc_safe(str(cuda_home)):  # nvcc derives its own tools' paths from it
            raise JitCompileError(
                f"oasr JIT: the CUDA toolkit's folder {cuda_home} contains a character nvcc passes to a shell "
                "unescaped ($, `, quotes, backslash or a newline); link it from a plain path and set CUDA_HOME to that."
            )
        nvcc = str(cuda_home / "bin" / "nvcc")
        cflags = [*default_cuda_cflags(), *self.extra_cuda_cflags, *(f"-I{safe(p)}" for p in self._includes())]
        ldflags = ["-shared", f"-L{cuda_home / 'lib64'}", "-lcudart", *self.extra_ldflags]
        lines = [
            "# oasr JIT build (oasr/jit/core.py)",
            "ninja_required_version = 1.3",
            "",
            "rule run",
            "  command = $cmd",
            "  description = $desc",
            "",
        ]
        objects = []
        for index, source in enumerate(self.sources):
            source = Path(source).resolve()
            if not _nvcc_safe(source.name):
                raise JitCompileError(
                    f"oasr JIT: module '{self.name}': the source name {source.name!r} contains a character "
                    "that nvcc passes to a shell unescaped ($, `, quotes, backslash or a newline); rename it."
                )
            stem = source.stem if re.fullmatch(r"[\w.+-]+", source.stem) else f"source{index}"
            obj = f"{index}_{stem}.o"
            objects.append(obj)
            folder = safe(source.parent)
            src = f"{folder}/{source.name}"
            if folder != str(source.parent):
                src = f"oasr_source_{index}{source.suffix}"
                (work / src).write_text(f'#include "{folder}/{source.name}"\n')
            lines.append(f"build {_ninja_path(obj)}: run {_ninja_path(str(source))}")
            lines.append(f"  cmd = {_ninja_value(shlex.join([nvcc, *cflags, '-c', src, '-o', obj]))}")
            lines.append(f"  desc = {_ninja_value('nvcc ' + source.name)}")
        output = "module.partial.so"
        lines.append(f"build {output}: run {' '.join(objects)}")
        lines.append(f"  cmd = {_ninja_value(shlex.join([nvcc, *objects, *ldflags, '-o', output]))}")
        lines.append(f"  desc = {_ninja_value('link ' + self.name)}")
        return "\n".join(lines) + "\n", output


def build_in_parallel(specs: Sequence[JitSpec], jobs: int) -> int:
    """Build ``specs``, ``jobs`` at a time (nvcc runs in subprocesses: threads suffice; a CUTLASS module takes
    ~45 s and ~2 GB), one line per module in order and every failure with its error. Returns how many failed:
    the caller says whether one is fatal."""
    print(f"building {len(specs)} modules, {jobs} at a time", flush=True)
    start, failures = time.perf_counter(), 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(spec.build) for spec in specs]
        for spec, future in zip(specs, futures, strict=True):
            try:
                info = future.result()
            except Exception as exc:  # report every failure, then go on
                failures += 1
                print(f"{spec.name}: FAILED\n{exc}", flush=True)
                continue
            print(f"{spec.name}: {'cached' if info.cache_hit else f'built in {info.seconds:.0f} s'}", flush=True)
    print(f"done in {time.perf_counter() - start:.0f} s, {failures} failed", flush=True)
    return failures


NVCC_ENV_VARIABLES = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
_NVCC_UNSAFE = set("$`\"'\\\n\r")


def _nvcc_safe(text: str) -> bool:
    """Whether nvcc can pass ``text`` to its internal shell (it wraps arguments in double quotes only)."""
    return not (_NVCC_UNSAFE & set(text))


def _ninja_value(text: str) -> str:
    """``text`` as a ninja variable's value (``$`` doubled; a newline cannot be written)."""
    if "\n" in text or "\r" in text:
        raise JitCompileError(f"oasr JIT: a newline cannot go into build.ninja: {text!r}")
    return text.replace("$", "$$")


def _ninja_path(path: str) -> str:
    """``path`` as a ninja build-line path: ``$$``, ``$ `` and ``$:``."""
    return _ninja_value(path).replace(" ", "$ ").replace(":", "$:")


def _check_module_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name or "\n" in name:
        raise JitCompileError(f"oasr JIT: {name!r} cannot name a module (it becomes a folder of the cache).")


def make_cache_folder(folder: Path) -> None:
    """Make ``folder`` and its parents; :class:`env.JitCacheDirError` naming the file in the way when one is."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocking = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), folder)
        raise env.JitCacheDirError(
            f"oasr JIT: {blocking} is a file where the cache keeps a folder ({folder}); "
            "delete it, or set OASR_JIT_DIR to another folder."
        ) from None


@contextlib.contextmanager
def build_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold the build lock ``path`` (``<module>/<key>.lock``): an exclusive ``flock`` of the file it names.

    ``python -m oasr.jit clear`` deletes a lock file (and an emptied module folder) while holding it, so a
    lock taken on a file that is no longer at ``path`` is given up and taken again: two holders never
    hold two different files.

    Raises
    ------
    TimeoutError
        When another process holds it for ``timeout_s`` seconds (0: try once).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        make_cache_folder(path.parent)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:  # its folder was removed between the two calls
            continue
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"{path} is held by another process") from None
                    time.sleep(0.1)
            with contextlib.suppress(FileNotFoundError):
                if os.path.samestat(os.fstat(fd), os.stat(path)):
                    break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        os.close(fd)  # which releases the flock


def _plain_temp_dir() -> Path:
    """The temporary folder (nvcc writes its intermediate files under TMPDIR and names them to its shell)."""
    base = Path(tempfile.gettempdir())
    for folder in (str(base), os.environ.get("TMPDIR", "")):
        if not _nvcc_safe(folder):
            raise JitCompileError(
                f"oasr JIT: the temporary folder {folder} contains a character nvcc passes to a shell unescaped; "
                "set TMPDIR to a plain path."
            )
    return base


def _env_flags(variable: str) -> list[str]:
    text = os.environ.get(variable, "")
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _ccbin(flags: Sequence[str]) -> str | None:
    """The host compiler nvcc is told to use: the last -ccbin/--compiler-bindir, else NVCC_CCBIN."""
    found = None
    for index, flag in enumerate(flags):
        for name in ("-ccbin", "--compiler-bindir"):
            if flag == name and index + 1 < len(flags):
                found = flags[index + 1]
            elif flag.startswith(name + "="):
                found = flag[len(name) + 1 :]
    return found or os.environ.get("NVCC_CCBIN") or None


def host_compilers(flags: Sequence[str]) -> list[str]:
    """Each host compiler nvcc may run, as "path: version text" (the default: gcc and g++ on PATH)."""
    ccbin = _ccbin(flags)
    if ccbin is None:
        candidates = ["gcc", "g++"]
    elif Path(ccbin).is_dir():
        candidates = [str(Path(ccbin) / "gcc"), str(Path(ccbin) / "g++")]
    else:
        candidates = [ccbin]
    described = []
    for candidate in candidates:
        found = shutil.which(candidate)
        if found is None:
            described.append(f"{candidate}: not found")
            continue
        path = Path(found).resolve()
        stat = path.stat()
        described.append(f"{path}: {_compiler_version(str(path), stat.st_mtime_ns, stat.st_size)}")
    return described


@functools.cache
def _compiler_version(path: str, mtime_ns: int, size: int) -> str:
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"
    return result.stdout.strip() or result.stderr.strip()


# --- the library's record: size and hash -------------------------------------------------

_VERIFIED: dict[tuple[str, int, int, int, int, int, int], bool] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 hex digest of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_manifest(spec: JitSpec, library: Path) -> None:
    """Record ``library`` (about to become ``spec.library_path``) and every file its build left beside it."""
    partial = spec.manifest_path.with_name(MANIFEST_NAME + ".partial")
    made = {path.name for path in spec.build_dir.iterdir()} - {library.name, partial.name}
    record = {
        "module": spec.name,
        "key": spec.key,
        "library": spec.library_path.name,
        "size": library.stat().st_size,
        "sha256": file_sha256(library),
        "files": sorted(made | {spec.library_path.name}),
    }
    partial.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(partial, spec.manifest_path)


def recorded_files(build_dir: Path) -> list[str] | None:
    """The files the build record in ``build_dir`` says its build made there (the record itself last), or None
    when ``build_dir`` holds no record of a build of ``<module>/<key>`` that names this folder."""
    try:
        record = json.loads((build_dir / MANIFEST_NAME).read_text())
        if (record["module"], record["key"]) != (build_dir.parent.name, build_dir.name):
            return None
        files = record.get("files", [record["library"]])  # a record made before records listed their files
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if not isinstance(files, list) or not all(isinstance(f, str) and _plain_file_name(f) for f in files):
        return None
    return [*files, MANIFEST_NAME]


def _plain_file_name(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _check_library(library: Path, manifest: Path) -> str | None:
    """None when ``library`` matches its record; "missing" when absent; otherwise what is wrong."""
    try:
        stat = library.stat()
    except OSError:
        return "missing"
    if not library.is_file():
        return "not a file"
    try:
        record_stat = manifest.stat()
        record_id = (record_stat.st_ino, record_stat.st_size, record_stat.st_mtime_ns)
    except OSError:
        record_id = (0, 0, 0)
    identity = (str(library), stat.st_ino, stat.st_size, stat.st_mtime_ns, *record_id)
    if _VERIFIED.get(identity):
        return None
    try:
        record = json.loads(manifest.read_text())
        size, sha256 = int(record["size"]), str(record["sha256"])
    except FileNotFoundError:
        return f"no build record {MANIFEST_NAME}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its build record {MANIFEST_NAME} is unreadable"
    if stat.st_size != size:
        return f"{stat.st_size} bytes, {size} when built"
    if file_sha256(library) != sha256:
        return "its SHA-256 differs from the one recorded when it was built"
    _VERIFIED[identity] = True
    return None


# --- running ninja: its own session, stopped with everything it started ------------------------


# Linux: ask for SIGTERM when this process dies (PR_SET_PDEATHSIG), then become ninja. Done in a fresh
# interpreter rather than a preexec_fn, which is unsafe when other threads (torch's) hold locks at fork.
_DEATH_SIGNAL_LAUNCHER = (
    "import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 15, 0, 0, 0); "
    "os.getppid() == int(sys.argv[1]) or os._exit(1); os.execvp(sys.argv[2], sys.argv[2:])"
)


def _with_death_signal(command: list[str]) -> list[str]:
    """``command`` started so that it gets SIGTERM if this process dies (as is, off Linux)."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-S", "-c", _DEATH_SIGNAL_LAUNCHER, str(os.getpid()), *command]


def _run_ninja(command: list[str], pid_file: Path, name: str) -> tuple[int, str]:
    """Run ninja in its own session; on Ctrl-C, a timeout or any error, stop it and everything it started."""
    process = subprocess.Popen(
        _with_death_signal(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    with contextlib.suppress(OSError):
        pid_file.write_text(f"{process.pid}\n")
    try:
        try:
            output, _ = process.communicate(timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop_session(process.pid, process)
            output, _ = process.communicate()
            raise JitCompileError(
                f"oasr JIT: building module '{name}' took more than {BUILD_TIMEOUT_S} s and was stopped "
                f"(ninja, nvcc and the host compiler killed):\n{(output or '')[-4000:]}"
            ) from None
        except BaseException:
            _stop_session(process.pid, process)
            raise
    finally:
        pid_file.unlink(missing_ok=True)
    return process.returncode, output or ""


def _session_members(session: int) -> list[int]:
    """Live (non-zombie) processes in ``session`` (Linux /proc; [] elsewhere)."""
    members = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 3 and fields[0] != "Z" and int(fields[3]) == session:
            members.append(int(entry))
    return members


def _stop_session(session: int, process: subprocess.Popen[str] | None = None, grace_s: float = 5.0) -> None:
    """SIGTERM to ninja's group (ninja forwards it to each command's group), then SIGKILL to the session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(session, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is None:
            time.sleep(0.05)
            continue
        if not _session_members(session):
            break
        time.sleep(0.05)
    for _ in range(50):
        members = _session_members(session)
        if not members:
            break
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(session, signal.SIGKILL)
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)


def _stop_leftover_build(build_dir: Path) -> None:
    """Stop a ninja a killed build left running in ``build_dir`` (its pid file says which), with its commands."""
    pid_file = build_dir / PID_NAME
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        cmdline = Path("/proc", str(pid), "cmdline").read_bytes().split(b"\0")
    except OSError:
        cmdline = []
    try:
        leader = bool(cmdline) and Path(cmdline[0].decode(errors="replace")).name == "ninja" and os.getsid(pid) == pid
    except OSError:
        leader = False
    if leader:
        print(
            f"oasr JIT: stopping a build of {build_dir} left running by a killed process (ninja {pid}).",
            file=sys.stderr,
        )
        _stop_session(pid)
    pid_file.unlink(missing_ok=True)


def _no_space(name: str, build_dir: Path) -> str:
    """One sentence: the disk is full, with the free space of the folders a build writes to."""
    folders = {"the build folder": build_dir, "the temporary folder": Path(tempfile.gettempdir())}
    seen: dict[int, str] = {}
    for what, folder in folders.items():
        with contextlib.suppress(OSError):
            seen.setdefault(folder.stat().st_dev, f"{what} {folder} ({shutil.disk_usage(folder).free >> 20} MiB free)")
    where = " and ".join(seen.values()) or str(build_dir)
    return (
        f"oasr JIT: building module '{name}' failed: no space left on device in {where}; free some space, or set "
        "OASR_JIT_DIR (builds) or TMPDIR (nvcc's intermediate files) to a folder on another disk."
    )


def _summarise_failure(name: str, log: str, log_path: Path) -> str:
    """nvcc's own diagnostics (file:line: message and the lines it prints after); a full disk said first."""
    lines = log.splitlines()
    space = [line for line in lines if "no space left on device" in line.lower()]
    if space:
        return f"{_no_space(name, log_path.parent)}\n" + "\n".join(space[:5]) + f"\n(full log: {log_path})"
    picked: list[str] = []
    for index, line in enumerate(lines):
        if _DIAGNOSTIC.match(line.strip()):
            picked.extend(lines[index : index + 3])
    if not picked:
        picked = [line for line in lines if "error" in line.lower()][:20] or lines[-20:]
    body = "\n".join(picked[:60])
    return f"oasr JIT: building module '{name}' failed:\n{body}\n(full log: {log_path})"


def gen_jit_spec(
    name: str,
    sources: Sequence[Path | str],
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[Path | str] | None = None,
    include_dir: Path | None = None,
) -> JitSpec:
    """A module spec; without explicit ``-gencode`` flags it targets the current context's archs.

    ``include_dir`` replaces ``include/`` (a variant builds against an edited copy).
    """
    cflags = list(extra_cuda_cflags or [])
    if not any(flag.startswith("-gencode") for flag in cflags):
        cflags = current_compilation_context().get_nvcc_flags_list() + cflags
    return JitSpec(
        name=name,
        sources=[Path(s) for s in sources],
        extra_cuda_cflags=cflags,
        extra_ldflags=list(extra_ldflags or []),
        extra_include_paths=[Path(p) for p in extra_include_paths or []],
        include_dir=Path(include_dir) if include_dir is not None else env.OASR_INCLUDE_DIR,
    )
