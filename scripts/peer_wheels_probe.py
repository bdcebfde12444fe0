"""What the peers need of their wheels: run by scripts/fetch-peer-wheels.sh in a virtualenv that has them.

Imports each peer library of ``benchmarks/peer_libraries.py`` that has a wheel to slim (what the routine
imports), writes the ninja files of FlashInfer's JIT modules the routine builds (``flashinfer_jit_specs``)
and asks nvcc for their header closure (``-M``; headers of CUDA libraries this machine's toolkit lacks,
such as cuBLAS's, are stubbed: they come from the device's toolkit). Prints, per distribution, JSON of
what to keep, as paths inside its wheel: ``dirs``, folders a module was loaded from (every file directly in
them, JIT sources aside), and ``files``, the JIT sources and headers the closure reads.

    python scripts/peer_wheels_probe.py flashinfer-python nvidia-cudnn-frontend > keep.json
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peer_libraries import LIBRARIES, flashinfer_jit_specs

MISSING_HEADER = re.compile(r"fatal error: ([^:\s]+): No such file or directory")


def installed_files(distribution: str) -> dict[Path, str]:
    """Absolute path -> path inside the wheel, for every file the distribution installed."""
    dist = importlib.metadata.distribution(distribution)
    return {Path(dist.locate_file(f)).resolve(): str(f) for f in dist.files or []}


def loaded_dirs(files: dict[Path, str]) -> set[str]:
    """The wheel folders that modules now in ``sys.modules`` were loaded from."""
    found = set()
    for module in list(sys.modules.values()):
        origin = getattr(module, "__file__", None)
        if origin and Path(origin).resolve() in files:
            found.add(str(Path(files[Path(origin).resolve()]).parent) + "/")
    return found


def header_closure(spec, stubs: Path) -> set[Path]:
    """Every file nvcc reads for ``spec``'s CUDA sources (``-M``), stubbing headers the toolkit here lacks."""
    spec.write_ninja()
    commands = subprocess.run(
        ["ninja", "-f", str(spec.ninja_path), "-t", "commands"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    paths: set[Path] = set()
    for command in (c for c in commands if " -c " in c and "nvcc" in c):
        args = shlex.split(command)
        args = [a for i, a in enumerate(args) if a != "--generate-dependencies-with-compile"]
        for flag in ("-MF", "-o"):
            while flag in args:
                at = args.index(flag)
                del args[at : at + 2]
        args = [*args[:1], "-isystem", str(stubs), *["-M" if a == "-c" else a for a in args[1:]]]
        for _ in range(20):
            run = subprocess.run(args, capture_output=True, text=True)
            missing = MISSING_HEADER.search(run.stderr)
            if run.returncode == 0 or not missing:
                break
            (stubs / missing.group(1)).parent.mkdir(parents=True, exist_ok=True)
            (stubs / missing.group(1)).touch()
        if run.returncode != 0:
            raise RuntimeError(f"nvcc -M failed for {spec.name}: {run.stderr.strip()[-2000:]}")
        paths |= {Path(p).resolve() for p in run.stdout.replace("\\\n", " ").split() if not p.endswith(":")}
    return paths


def main(distributions: list[str]) -> int:
    libraries = {library.distribution: library for library in LIBRARIES}
    keep: dict[str, dict[str, list[str]]] = {}
    with tempfile.TemporaryDirectory() as workspace:
        os.environ["FLASHINFER_WORKSPACE_BASE"] = workspace
        os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")  # the H200's; no GPU here to ask
        modules = {name: libraries[name].load() for name in distributions}
        closure: set[Path] = set()
        if "flashinfer-python" in modules:
            stubs = Path(workspace) / "stubs"
            stubs.mkdir()
            for spec in flashinfer_jit_specs(modules["flashinfer-python"]):
                closure |= header_closure(spec, stubs)
        for name in distributions:
            files = installed_files(name)
            keep[name] = {
                "dirs": sorted(loaded_dirs(files)),
                "files": sorted(files[p] for p in closure if p in files),
            }
    json.dump(keep, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
