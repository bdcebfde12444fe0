"""The attention family's performance table (issue 51) on the H200, every peer in the same process.

    python dev/attention/bench.py [--out dev/attention/results/bench_h200.txt] [--dtype bfloat16]
    python dev/attention/bench.py --no-flex         # without FlexAttention (its compiles take most of the time)
    python dev/attention/bench.py --flex-only       # only the rel-pos rows, with FlexAttention
    python dev/attention/bench.py --variant dev/attention/variants/narrow.patch   # and a variant of include/

Shapes: the harness entries' (``profiling/harness/ops/attention.py``: the issue's (B, T, H, D)), each full and
with key lengths uniform in [T/2, T] (``ragged``: the entries' ``kmin`` = 50); q, k, v the views of one packed QKV.

- ``attention``: oasr against each SDPA backend (flash, cuDNN, efficient), each timed and the fastest taken as
  the peer (flash takes no mask: not in the ragged rows).
- ``rel_pos_attention`` (ESPnet's shifted form): oasr against ESPnet's eager arithmetic (``espnet``), the same
  with ``matrix_bd`` (scaled, the key mask folded in as -inf) passed to SDPA as an additive mask
  (``espnet+sdpa``), and FlexAttention with a ``score_mod`` that reads that precomputed ``matrix_bd``, the whole
  function compiled (``flex``); the block mask of the key lengths is made with the inputs, as a model makes it
  once per forward. The fastest of them is the peer; and oasr's ``attention`` on the same shape.
- ``--variant PATCH``: the family's module built against ``include/`` with the patch applied
  (``dev/tune_kernels.py``'s ``patched_include``), timed beside production as ``oasr:<patch name>`` through its
  launchers (not a peer).

Device time: ``profiling.harness.timing.time_interleaved`` (CUDA-graph replay, backends in turn over rounds,
input sets rotated past the L2). TFLOP/s count Q K^T, P V and (rel-pos) one q.p product per score over the valid
keys of each row (2 b h t sum(lengths) d each). Every oasr result is checked against the float64 reference first
(the harness entry's tolerances); a peer's error is printed beside it.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dev.tune_kernels import build_all, patched_include, variant_spec
from oasr.jit.families import ATTENTION
from profiling.harness.correctness import compare
from profiling.harness.ops import attention as entry
from profiling.harness.ops import parse_dtype
from profiling.harness.timing import op_input_sets, require_cuda, run_gpu_script, time_interleaved

Fn = Callable[[dict], torch.Tensor]


def sdpa(backend: SDPBackend) -> Fn:
    def run(i: dict) -> torch.Tensor:
        q, k, v = (entry.heads_first(i[n]) for n in ("q", "k", "v"))
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=i["key_mask"]).transpose(1, 2)

    return run


def espnet_sdpa(i: dict) -> torch.Tensor:
    q = i["q"]
    bias = entry.positional_scores(q, i["p"], i["pos_bias_v"]) / math.sqrt(q.shape[-1])
    if i["key_mask"] is not None:
        bias = bias.masked_fill(~i["key_mask"], -math.inf)
    query = entry.heads_first(q + i["pos_bias_u"])
    key, value = entry.heads_first(i["k"]), entry.heads_first(i["v"])
    return F.scaled_dot_product_attention(query, key, value, attn_mask=bias).transpose(1, 2)


_FLEX: list[Callable[..., torch.Tensor]] = []


def flex(i: dict) -> torch.Tensor:
    """matrix_bd computed eagerly (scaled), then compiled FlexAttention with a score_mod that reads it."""
    if not _FLEX:
        torch._dynamo.config.cache_size_limit = 64  # one compile per shape and mask kind
        _FLEX.append(torch.compile(flex_attention))  # (automatic dynamic shapes after the first recompile)
    q = i["q"]
    bd = entry.positional_scores(q, i["p"], i["pos_bias_v"]) / math.sqrt(q.shape[-1])

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + bd[b, h, q_idx, kv_idx]

    query, key, value = (entry.heads_first(x) for x in (q + i["pos_bias_u"], i["k"], i["v"]))
    return _FLEX[0](query, key, value, score_mod=score_mod, block_mask=i["block_mask"]).transpose(1, 2)


def variant_backend(module: Any, relative: bool) -> Fn:
    """A variant module's launcher on the harness inputs (full rows or key lengths; default scale, no chunk mask)."""

    def run(i: dict) -> torch.Tensor:
        q, out = i["q"], i["out"]
        scale = 1.0 / math.sqrt(q.shape[-1])
        if relative:
            p, u, vb = i["p"], i["pos_bias_u"], i["pos_bias_v"]
            module.rel_pos_attention(out, q, i["k"], i["v"], p, u, vb, i["lengths"], True, scale, 0, -1)
        else:
            module.attention(out, q, i["k"], i["v"], i["lengths"], scale, 0, -1)
        return out

    return run


def add_block_masks(sets: list[dict]) -> None:
    """FlexAttention's block mask of each set's key lengths (None: full rows), made once with the inputs."""
    for i in sets:
        lengths = i["lengths"]
        if lengths is None:
            i["block_mask"] = None
            continue
        b, t = i["q"].shape[:2]

        def valid(batch, head, q_idx, kv_idx, lengths=lengths):
            return kv_idx < lengths[batch]

        i["block_mask"] = create_block_mask(valid, b, None, t, t, device=i["q"].device)


def valid_keys(i: dict) -> int:
    """Sum over batch rows of the valid keys."""
    b, t = i["q"].shape[:2]
    return b * t if i["lengths"] is None else int(i["lengths"].clamp(0, t).sum())


def run_rows(
    op: entry.OpSpec, config: dict, dtype: torch.dtype, peers: dict[str, Fn], products: int, extra: dict[str, Fn]
) -> list[dict]:
    """Checks oasr (and prints each peer's error), times oasr, the peers and ``extra``; one row per backend."""
    sets = op_input_sets(op, config, dtype)
    if "flex" in peers:
        add_block_masks(sets)
    first = sets[0]
    expected = op.reference(first)
    rtol, atol = op.tolerance(dtype)
    rows = []
    fns: dict[str, Fn] = {"oasr": op.backends["oasr"], **peers, **extra}
    usable = {}
    for name, fn in fns.items():
        if "out" in first:
            first["out"].fill_(float("nan"))
        try:
            result = fn(first)
            torch.cuda.synchronize()
        except Exception as error:  # a backend that refuses the case (flash with a mask): not a peer here
            rows.append({"backend": name, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:80]}"})
            continue
        check = compare(result, expected, rtol, atol)
        if name == "oasr" and not check["passed"]:
            raise SystemExit(
                f"oasr {op.name} {op.config_label(config)}: wrong result (max abs err {check['max_abs_err']})"
            )
        usable[name] = [lambda i=i, fn=fn: fn(i) for i in sets]
        rows.append({"backend": name, "err": check["max_abs_err"]})
    del expected
    times = time_interleaved(usable)
    flop = products * 2 * config["h"] * config["d"] * config["t"] * sum(valid_keys(i) for i in sets) / len(sets)
    for row in rows:
        if row["backend"] in times:
            row["us"] = times[row["backend"]].median_ms * 1e3
            row["tflops"] = flop / (row["us"] * 1e-6) / 1e12
    return rows


def table(
    dtype: torch.dtype, flex_only: bool, use_flex: bool, shapes: int, variants: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """The table's lines (printed as they come), then one verdict line per target."""
    attention_peers = {
        "sdpa:flash": sdpa(SDPBackend.FLASH_ATTENTION),
        "sdpa:cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
        "sdpa:efficient": sdpa(SDPBackend.EFFICIENT_ATTENTION),
    }
    rel_peers = {"espnet": entry.REL_POS_ATTENTION.backends["torch"], "espnet+sdpa": espnet_sdpa}
    if use_flex:
        rel_peers["flex"] = flex
    lines: list[str] = []

    def emit(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    header = [
        f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {dtype}; us = CUDA-graph device time (median);",
        "# TFLOP/s over the valid keys; x = peer time / oasr time (> 1: oasr faster); best = the fastest peer",
        f"{'shape (B,T,H,D)':<20} {'keys':<7} {'op':<18} {'backend':<15} {'us':>9} {'TFLOP/s':>8} {'x':>6}  err/notes",
    ]
    for line in header:
        emit(line)
    verdicts = []
    for config in entry.SWEEP[: 2 * shapes]:
        shape = f"({config['b']},{config['t']},{config['h']},{config['d']})"
        keys = "full" if config["kmin"] >= 100 else "ragged"
        sections = []
        attention_us = None
        if not flex_only:
            extra = {f"oasr:{n}": variant_backend(m, False) for n, m in variants.items()}
            rows = run_rows(entry.ATTENTION, config, dtype, attention_peers, 2, extra)
            sections.append(("attention", rows))
            attention_us = next(r["us"] for r in rows if r["backend"] == "oasr")
        rel_extra = {f"oasr:{n}": variant_backend(m, True) for n, m in variants.items()}
        if attention_us is None:
            rel_extra["oasr attention"] = entry.ATTENTION.backends["oasr"]
        rel_rows = run_rows(entry.REL_POS_ATTENTION, config, dtype, rel_peers, 3, rel_extra)
        sections.append(("rel_pos_attention", rel_rows))
        for op_name, rows in sections:
            oasr_us = next(r["us"] for r in rows if r["backend"] == "oasr")
            timed = [r for r in rows if "us" in r and not r["backend"].startswith("oasr")]
            for r in rows:
                x = f"{r['us'] / oasr_us:6.2f}" if "us" in r and r["backend"] != "oasr" else ""  # (variants too)
                note = r.get("error") or f"{r['err']:.1e}"
                us = f"{r['us']:9.2f}" if "us" in r else f"{'-':>9}"
                tf = f"{r['tflops']:8.1f}" if "us" in r else f"{'-':>8}"
                emit(f"{shape:<20} {keys:<7} {op_name:<18} {r['backend']:<15} {us} {tf} {x:>6}  {note}")
            if timed:
                best = min(timed, key=lambda r: r["us"])
                need = 3.0 if op_name == "rel_pos_attention" else 1.0
                ratio = best["us"] / oasr_us
                verdicts.append(
                    f"{shape} {keys} {op_name}: x{ratio:.2f} of the best peer ({best['backend']}), "
                    f"target x{need:.1f}: {'met' if ratio >= need else 'MISSED'}"
                )
            if op_name == "rel_pos_attention":
                base = attention_us or next((r["us"] for r in rows if r["backend"] == "oasr attention"), None)
                if base:
                    ratio = oasr_us / base
                    verdicts.append(
                        f"{shape} {keys} rel_pos / attention: {ratio:.2f}x, target <= 1.7x: "
                        f"{'met' if ratio <= 1.7 else 'MISSED'}"
                    )
    return lines, verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("dev/attention/results/bench.txt"))
    parser.add_argument("--dtype", default="bfloat16", choices=entry.DTYPES)
    parser.add_argument("--no-flex", action="store_true", help="leave FlexAttention out")
    parser.add_argument("--flex-only", action="store_true", help="only the rel-pos rows (with FlexAttention)")
    parser.add_argument("--shapes", type=int, default=len(entry.SHAPES), help="the first N shapes")
    parser.add_argument("--variant", type=Path, action="append", default=[], help="a patch of include/, timed too")
    args = parser.parse_args()
    require_cuda("dev/attention/bench.py")
    dtype = parse_dtype(args.dtype)
    specs = {"": ATTENTION.jit_spec()}
    for patch in args.variant:
        name, include = patched_include(patch)
        specs[name] = variant_spec(ATTENTION, name, include)
    build_all(list(specs.values()))
    variants = {name: spec.build_and_load() for name, spec in specs.items() if name}
    with torch.no_grad():
        lines, verdicts = table(dtype, args.flex_only, not args.no_flex, args.shapes, variants)
    print("\n".join(["", *verdicts]))
    text = "\n".join([*lines, "", *verdicts]) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    run_gpu_script(main, sys.argv[0])
