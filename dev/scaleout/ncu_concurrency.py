"""What serialises two ncu runs on one host? The same small sweep, alone and two at once, under variants.

    python dev/scaleout/ncu_concurrency.py --out DIR

Each variant runs the profiling worker's sweep (scale, 8 configs, both backends, the
``timing`` preset) under ``ncu`` as ``profiling.nsight.runner`` builds the command, with
extra ncu options or a changed environment: once alone on the first GPU, then twice at
the same time, one per GPU (both on GPU 0 where there is only one). For each process it
records the wall time and when each ``==PROF== Profiling`` line came, so the profiling
windows of the two show whether they overlap (parallel) or take turns (serialised).

Variants: ``default`` (our options: --clock-control none, --cache-control all, kernel
replay); ``cache-none`` (--cache-control none: no flush between passes); ``app-replay``
(--replay-mode application: the worker is relaunched per pass, no save/restore of memory);
``own-tmpdir`` (each ncu with its own ``TMPDIR``: ncu serialises profiling through a lock
file ``$TMPDIR/nsight-compute-lock``, as scripts that work around its permissions note);
``own-tmp`` (each ncu in its own mount namespace with a private /tmp, via ``unshare -m``:
a lock kept in /tmp whatever ``TMPDIR`` says is then not shared either; root only);
``devices`` (--devices 0: each ncu only enables profiling on its own, visible, device).
During the first two-at-once run it lists files in /tmp, /var/tmp and /dev/shm whose name
has "nsight" or "lock" in it. Writes ``ncu_concurrency.csv`` (one row per process) and
``ncu_concurrency_events.csv`` (one row per profiled kernel, with its time).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from profiling.nsight import runner
from profiling.nsight.worker import SweepSpec
from profiling.provenance import REPO_ROOT
from profiling.scaleout.gpus import discover

SPEC = SweepSpec(op="scale", configs=[{"n": 65536 * k} for k in range(1, 9)], dtypes=["float16"])
VARIANTS: dict[str, dict] = {
    "default": {},
    "cache-none": {"cache_control": "none"},
    "app-replay": {"extra": ["--replay-mode", "application"]},
    "own-tmpdir": {"own_tmpdir": True},
    "own-tmp": {"own_tmp": True},
    "devices": {"extra": ["--devices", "0"]},
}
PROFILING = re.compile(r'==PROF== Profiling "([^"]*)"')


def _command(ncu: Path, spec_path: Path, report: Path, variant: dict) -> list[str]:
    preset = runner.ncu_args("timing") + list(variant.get("extra", []))
    command = runner.build_command(
        ncu, spec_path, report, preset="timing", cache_control=variant.get("cache_control", "all"), preset_args=preset
    )
    if variant.get("own_tmp"):
        script = 'mount -t tmpfs tmpfs /tmp && exec "$@"'
        command = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *command]
    return command


def _run(
    name: str, proc: int, gpu: str, command: list[str], t0: float, events: list, rows: list, tmpdir: str | None
) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu, "PYTHONUNBUFFERED": "1", **({"TMPDIR": tmpdir} if tmpdir else {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    kernels, first, last, tail = 0, None, None, []
    for line in child.stdout:
        tail = [*tail[-5:], line.rstrip()]
        match = PROFILING.search(line)
        if match:
            now = round(time.perf_counter() - t0, 3)
            first = now if first is None else first
            last, kernels = now, kernels + 1
            events.append({"variant": name, "proc": proc, "gpu": gpu, "t_s": now, "kernel": match.group(1)})
    code = child.wait()
    rows.append({"variant": name, "proc": proc, "gpu": gpu, "wall_s": round(time.perf_counter() - start, 2),
                 "exit": code, "kernels": kernels, "first_kernel_s": first, "last_kernel_s": last,
                 "tail": " | ".join(tail[-2:]) if code else ""})  # fmt: skip


def _locks() -> str:
    found = []
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        for path in Path(folder).glob("*"):
            if re.search(r"nsight|lock", path.name, re.I):
                found.append(str(path))
    return ", ".join(sorted(found)) or "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    default = ["default", "own-tmpdir", "own-tmp", "cache-none", "app-replay"]
    parser.add_argument("--variants", nargs="+", default=default, choices=list(VARIANTS))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    ncu = runner.find_ncu()
    gpus = discover() or ["0"]
    pair = [gpus[0], gpus[1 % len(gpus)]]
    rows: list[dict] = []
    events: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="oasr-ncu-conc-", dir="/var/tmp") as tmp:  # own-tmp hides /tmp
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(SPEC.to_json())
        for name in args.variants:
            variant = VARIANTS[name]
            if variant.get("own_tmp") and (os.geteuid() != 0 or not shutil.which("unshare")):
                print(f"[{name}] skipped: needs root and unshare")
                continue
            for together in (1, 2):
                t0 = time.perf_counter()
                threads = []
                for proc in range(together):
                    label = f"{name}-x{together}"
                    command = _command(ncu, spec_path, Path(tmp) / f"{label}-{proc}.ncu-rep", variant)
                    tmpdir = None
                    if variant.get("own_tmpdir"):
                        tmpdir = str(Path(tmp) / f"tmpdir-{label}-{proc}")
                        Path(tmpdir).mkdir()
                    run_args = (label, proc, pair[proc], command, t0, events, rows, tmpdir)
                    thread = threading.Thread(target=_run, args=run_args)
                    threads.append(thread)
                    thread.start()
                if together == 2 and name == args.variants[0]:
                    time.sleep(5)
                    print(f"[{name}] files named nsight/lock while two run: {_locks()}", flush=True)
                for thread in threads:
                    thread.join()
                both = [r for r in rows if r["variant"] == f"{name}-x{together}"]
                print(f"[{name} x{together}] " + "; ".join(
                    f"GPU {r['gpu']}: {r['wall_s']} s, {r['kernels']} kernels, profiling "
                    f"{r['first_kernel_s']}-{r['last_kernel_s']} s, exit {r['exit']} {r['tail']}" for r in both
                ), flush=True)  # fmt: skip
    pd.DataFrame(rows).to_csv(args.out / "ncu_concurrency.csv", index=False)
    pd.DataFrame(events).to_csv(args.out / "ncu_concurrency_events.csv", index=False)
    print(pd.DataFrame(rows).drop(columns="tail").to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
