"""JIT builds: a ninja build per module, cached by content, shared across processes.

A module's cache key hashes everything that can change the binary: its sources,
every file under ``include/`` and ``csrc/``, the compiler flags (architectures
included), the nvcc version and the tvm-ffi version. A build lives in
``<cache>/<name>/<key>/`` and is made once, under a file lock, however many
processes ask for it at the same time.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from . import env
from .compilation_context import current_compilation_context

LOCK_TIMEOUT_S = 1800
COMMON_NVCC_FLAGS = (
    "-O3",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "-lineinfo",
    "-DNDEBUG",
    "-Xcompiler=-fPIC",
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


def hash_headers(digest: Any, root: Path) -> None:
    """Feed every header under ``root`` (relative name and bytes, sorted) into ``digest``."""
    for path in sorted(p for p in root.rglob("*") if p.suffix in HEADER_SUFFIXES and p.is_file()):
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


@dataclass
class JitSpec:
    """One JIT module: its sources and flags. Build with :meth:`build_and_load`."""

    name: str
    sources: list[Path]
    extra_cuda_cflags: list[str] = field(default_factory=list)
    extra_ldflags: list[str] = field(default_factory=list)
    extra_include_paths: list[Path] = field(default_factory=list)
    include_dir: Path = field(default_factory=lambda: env.OASR_INCLUDE_DIR)  # a dev/ variant's copy of include/

    @functools.cached_property
    def nvcc_flags(self) -> tuple[str, ...]:
        includes = [self.include_dir, env.OASR_CSRC_DIR, *self.extra_include_paths]
        includes += _tvm_ffi_include_paths()
        return tuple(default_cuda_cflags() + list(self.extra_cuda_cflags) + [f"-I{p}" for p in includes])

    @functools.cached_property
    def key(self) -> str:
        digest = hashlib.sha256()
        for part in (self.name, _tvm_ffi_version(), nvcc_version()[1], sys.platform):
            digest.update(part.encode())
        for flag in (*self.nvcc_flags, "|", *self.extra_ldflags):
            digest.update(flag.encode() + b"\0")
        for source in self.sources:
            digest.update(Path(source).name.encode())
            digest.update(Path(source).read_bytes())
        hash_headers(digest, self.include_dir)
        hash_headers(digest, env.OASR_CSRC_DIR)
        return digest.hexdigest()[:20]

    @property
    def build_dir(self) -> Path:
        return env.jit_cache_dir() / self.name / self.key

    @property
    def library_path(self) -> Path:
        return self.build_dir / f"{self.name}.so"

    def is_cached(self) -> bool:
        return self.library_path.is_file()

    def build(self) -> BuildInfo:
        """Compile unless a build with the same key exists; safe across processes."""
        start = time.perf_counter()
        if not self.is_cached():
            self.build_dir.parent.mkdir(parents=True, exist_ok=True)
            lock_path = self.build_dir.parent / f"{self.key}.lock"
            try:
                with FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S):
                    if not self.is_cached():
                        self._compile()
                        return self._info(start, cache_hit=False)
            except Timeout as exc:
                raise RuntimeError(
                    f"oasr JIT: waited {LOCK_TIMEOUT_S} s for another process building "
                    f"'{self.name}' (lock {lock_path}). If no build is running, delete the lock."
                ) from exc
        return self._info(start, cache_hit=True)

    def load(self) -> Any:
        import tvm_ffi

        return tvm_ffi.load_module(str(self.library_path))

    def build_and_load(self) -> Any:
        self.build()
        return self.load()

    def _info(self, start: float, cache_hit: bool) -> BuildInfo:
        return BuildInfo(
            self.name, self.library_path, cache_hit, time.perf_counter() - start, self.key, self.nvcc_flags
        )

    def _compile(self) -> None:
        self.build_dir.mkdir(parents=True, exist_ok=True)
        (self.build_dir / "build.ninja").write_text(self._ninja_file())
        command = ["ninja", "-C", str(self.build_dir)]
        if env.verbose_build():
            command.append("-v")
            print(f"oasr JIT: building '{self.name}' in {self.build_dir}", file=sys.stderr)
        result = subprocess.run(command, capture_output=True, text=True)
        log = result.stdout + result.stderr
        (self.build_dir / "build.log").write_text(log)
        if env.verbose_build():
            print(log, file=sys.stderr)
        if result.returncode != 0:
            raise JitCompileError(_summarise_failure(self.name, log, self.build_dir / "build.log"))
        # The final name appears only once the library is complete.
        os.replace(self.build_dir / f"{self.name}.partial.so", self.library_path)

    def _ninja_file(self) -> str:
        cuda_home = find_cuda_home()
        ldflags = ["-shared", f"-L{cuda_home / 'lib64'}", "-lcudart", *self.extra_ldflags]
        lines = [
            "ninja_required_version = 1.3",
            f"nvcc = {cuda_home / 'bin' / 'nvcc'}",
            f"cuda_cflags = {' '.join(self.nvcc_flags)}",
            f"ldflags = {' '.join(ldflags)}",
            "",
            "rule compile_cuda",
            "  command = $nvcc $cuda_cflags -c $in -o $out",
            "  description = nvcc $in",
            "",
            "rule link",
            "  command = $nvcc $in $ldflags -o $out",
            "",
        ]
        objects = []
        for source in self.sources:
            obj = f"{Path(source).stem}.o"
            objects.append(obj)
            lines.append(f"build {obj}: compile_cuda {Path(source).resolve()}")
        lines.append(f"build {self.name}.partial.so: link {' '.join(objects)}")
        return "\n".join(lines) + "\n"


def _summarise_failure(name: str, log: str, log_path: Path) -> str:
    """nvcc's own diagnostics (file:line: message and the lines it prints after)."""
    lines = log.splitlines()
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

    ``include_dir`` replaces ``include/`` (a ``dev/`` variant builds against an edited copy).
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
