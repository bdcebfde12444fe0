"""The group_gemm family: one linear layer per group of rows, ``out[rows of g] = x[rows of g] @ weight[g].T``.

Config: ``g`` groups, ``m`` rows per group, ``n`` output and ``k`` input features, ``spread``: 1 gives every
group ``m`` rows, s > 1 draws each group's rows uniformly from ``[2m/s, 2m)`` (s = 4: ``[m/2, 2m)``, as
upstream Oasr's benchmark does), from a generator seeded by the config alone (:func:`group_sizes`), so
every input set, backend and run sees the same groups. float16 and bfloat16 only. Inputs ~ N(0, 1), weights ~ N(0, 1/k).

Backends: ``oasr``; ``torch``, PyTorch's grouped GEMM ``torch._grouped_mm`` (bf16 only: for float16 it is
the loop below); ``loop``, a Python loop of ``F.linear`` over the groups (sizes known on the host, one
cuBLAS call each; one dense GEMM over all L rows, the bar the issue set: measured in dev/group_gemm/RESULTS.md).
Work: FLOP = 2 L n k over the real rows L; bytes = x, every group's weight and the output once.
Tolerances as the gemm family's (``profiling/harness/ops/gemm.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import oasr
from oasr.jit import families

from .base import Config, Inputs, OpSpec, Work
from .gemm import DTYPES, TOLERANCES

# The target (8 groups of 1000 rows, the Conformer feed-forward's 256 -> 1024), then upstream
# Oasr's group_gemm list with its uneven draws.
GROUP_GEMM_SWEEP: tuple[Config, ...] = tuple(
    {"g": g, "m": m, "n": n, "k": k, "spread": spread}
    for g, m, n, k, spread in (
        (8, 1000, 1024, 256, 1),
        (32, 256, 64, 64, 4),
        (32, 256, 128, 64, 4),
        (64, 16000, 256, 2048, 4),
        (64, 16000, 512, 2048, 4),
    )
)


def group_sizes(config: Config) -> list[int]:
    """Each group's rows: ``m`` each (``spread`` 1), else uniform in ``[2m/spread, 2m)``, seeded by the config."""
    g, m, spread = config["g"], config["m"], config["spread"]
    if spread <= 1:
        return [m] * g
    generator = torch.Generator().manual_seed(1000 * g + m)
    low = max(2 * m // spread, 1)
    return torch.randint(low, max(2 * m, low + 1), (g,), generator=generator).tolist()


def _inputs(config: Config, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    sizes = group_sizes(config)
    rows, n, k = sum(sizes), config["n"], config["k"]

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (scale * torch.randn(*shape, device=device, generator=generator)).to(dtype)

    ends = torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32)
    return {
        "x": randn(rows, k),
        "weight": randn(config["g"], n, k, scale=k**-0.5),
        "offsets": ends.to(device),
        "sizes": sizes,
        "out": torch.empty(rows, n, dtype=dtype, device=device),
    }


def linear_loop(i: Inputs) -> torch.Tensor:
    """A Python loop of F.linear over the groups, each into its rows of ``i["out"]``."""
    out, start = i["out"], 0
    for g, size in enumerate(i["sizes"]):
        torch.matmul(i["x"][start : start + size], i["weight"][g].T, out=out[start : start + size])
        start += size
    return out


def torch_grouped(i: Inputs) -> torch.Tensor:
    """``torch._grouped_mm`` (bf16); the loop for other dtypes, which it does not take."""
    if i["x"].dtype != torch.bfloat16:
        return linear_loop(i)
    return torch._grouped_mm(i["x"], i["weight"].transpose(-2, -1), offs=i["offsets"])


def reference(i: Inputs) -> torch.Tensor:
    """float64 loop of F.linear."""
    parts, start = [], 0
    for g, size in enumerate(i["sizes"]):
        parts.append(F.linear(i["x"][start : start + size].double(), i["weight"][g].double()))
        start += size
    return torch.cat(parts)


def _work(config: Config, dtype: torch.dtype) -> Work:
    g, n, k = config["g"], config["n"], config["k"]
    rows = sum(group_sizes(config))
    kind = "tensor_bf16" if dtype == torch.bfloat16 else "tensor_fp16"
    return Work(bytes=(rows * k + g * n * k + rows * n) * dtype.itemsize + 4 * g, flops={kind: 2 * rows * n * k})


GROUP_GEMM = OpSpec(
    name="group_gemm",
    family=families.GROUP_GEMM,
    config_fields=("g", "m", "n", "k", "spread"),
    make_inputs=_inputs,
    backends={
        "oasr": lambda i: oasr.group_gemm(i["x"], i["weight"], i["offsets"], out=i["out"]),
        "torch": torch_grouped,
        "loop": linear_loop,
    },
    reference=reference,
    work=_work,
    dtypes=DTYPES,
    default_sweep=GROUP_GEMM_SWEEP,
    tolerances=dict(TOLERANCES),
)
