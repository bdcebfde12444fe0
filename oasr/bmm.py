"""Batched matrix products on Hopper tensor cores, for attention: ``out[i] = a[i] @ b[i]``.

As ``torch.bmm``: ``a [batch, M, K]``, ``b [batch, K, N]``, float16 or bfloat16, fp32 accumulation.
Both attention products run without a copy: scores pass keys transposed
(``b = k.transpose(1, 2)``, a ``[batch, N, K]`` tensor with K contiguous) and context passes values
as they are (``[batch, K, N]``, N contiguous); the layout is read from ``b``'s strides. Odd
sequence lengths (375) work: the result's rows are padded to 16 bytes (a strided view), and an
operand whose rows are not is copied into a padded buffer first (``oasr/_tma.py``).

Two backends, the call's plan choosing (``oasr/jit/gemm_plan.py``, ``OASR_AUTOTUNE=1``; ``oasr.gemm_plan(...,
op="bmm")`` says which): oasr's CUTLASS kernels or cuBLAS (``torch.bmm``); ``out`` is laid out alike on both.

Arguments are checked before any launch (:func:`_check_bmm`). The op is declared once (``oasr/_op.py``),
which also makes it the custom op ``torch.ops.oasr.bmm``.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from ._backends import planned
from ._checks import HALF_DTYPES, bad_half_input, bad_tensor, check_placement, ready_devices
from ._op import PADDED_ROWS, op
from ._tma import addressable, addressable_copy, padded_empty
from .jit import gemm_config, gemm_plan
from .jit.core import Variant
from .jit.families import BMM

_READY = ready_devices(BMM)


def _check_bmm(input: object, mat2: object, out: object) -> tuple[int, int, int]:
    """Every argument, in order (types, dtypes and shapes, devices, memory); ``out``'s shape [batch, M, N]."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in HALF_DTYPES):
        advice = "cast both operands with `.bfloat16()`, or use torch.bmm for fp32/TF32"
        raise bad_half_input("bmm", input, "bmm", advice)
    if input.dim() != 3:
        raise ValueError(f"oasr.bmm: `input` must be 3-D [batch, M, K], got shape {tuple(input.shape)}")
    batch, m, k = input.shape
    if not (isinstance(mat2, Tensor) and mat2.dtype is dtype and mat2.dim() == 3):
        if isinstance(mat2, Tensor) and mat2.dtype is dtype:
            raise ValueError(f"oasr.bmm: `mat2` must be 3-D [batch, K, N], got shape {tuple(mat2.shape)}")
        raise bad_tensor("bmm", "mat2", mat2, dtype, (batch, k, "N"))
    if mat2.shape[0] != batch or mat2.shape[1] != k:
        raise ValueError(
            f"oasr.bmm: `mat2` has shape {tuple(mat2.shape)}, expected [{batch}, {k}, N] (`input`'s batch and K)"
        )
    n = mat2.shape[2]
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == (batch, m, n)):
        raise bad_tensor("bmm", "out", out, dtype, (batch, m, n))
    check_placement("bmm", BMM, _READY, (("input", input), ("mat2", mat2)), (("out", out),))
    return batch, m, n


@functools.cache
def _variant(dtype: torch.dtype, n_major: bool, config: gemm_config.GemmConfig) -> Variant:
    return gemm_config.bmm_variant(str(dtype).removeprefix("torch."), n_major, config)


def _product(a: Tensor, b: Tensor, out: Tensor, config: gemm_config.GemmConfig | None = None) -> None:
    """``out = a @ b`` for checked arguments on the backend :func:`oasr.gemm.planned` picks; ``config`` runs oasr's
    kernel of that configuration instead (tests)."""
    batch, m, k = a.shape
    n = b.shape[2]
    if out.numel() == 0:
        return
    if k == 0:
        out.zero_()
        return

    def run(backend: str, chosen: gemm_config.GemmConfig) -> None:
        if backend == "oasr":
            _oasr_product(a, b, out, chosen)
        else:
            torch.bmm(a, b, out=out)

    if config is not None:
        run("oasr", config)
        return
    plan = planned(gemm_plan.Problem("bmm", m, n, k, batch), a.dtype, out.device, run)
    run(plan.backend, plan.config)


def _oasr_product(a: Tensor, b: Tensor, out: Tensor, config: gemm_config.GemmConfig) -> None:
    """oasr's kernel of ``config``: ``out = a @ b``."""
    batch, m, k = a.shape
    n = b.shape[2]
    # B K-major ([batch, N, K] transposed: scores) when K is contiguous, else N-major ([batch, K, N]: context).
    keys = b.transpose(1, 2)
    n_major = k > 1 and keys.stride(2) != 1
    # TMA addresses 16-byte aligned rows: operands without them go through copies with padded rows (B in the
    # layout it can be read in), an output through a padded temporary.
    a = addressable_copy(a)
    if not n_major and not addressable(keys):
        n_major = True
    operand = addressable_copy(b) if n_major else keys
    target = out if addressable(out) else padded_empty((batch, m, n), out.dtype, out.device)
    BMM.module(_variant(a.dtype, n_major, config)).bmm(target, a, operand)
    if target is not out:
        out.copy_(target)


def _launch_bmm(out: Tensor, input: Tensor, mat2: Tensor) -> None:
    _product(input, mat2, out)


@op(check=_check_bmm, launch=_launch_bmm, layout=PADDED_ROWS)
def bmm(input: Tensor, mat2: Tensor, out: Tensor | None = None) -> Tensor:
    """Batched matrix product ``out[i] = input[i] @ mat2[i]``, as ``torch.bmm``.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[batch, M, K]`` (float16 or bfloat16). Any strides; one whose last stride is
        not 1 or whose other strides are not multiples of 16 bytes is copied first.
    mat2 : torch.Tensor
        ``[batch, K, N]``, same dtype and device. Read in place when N is contiguous (attention's
        values) or K is (keys passed as ``k.transpose(1, 2)``), with 16-byte strides; copied otherwise.
    out : torch.Tensor, optional
        Destination ``[batch, M, N]``; must not share memory with ``input`` or ``mat2``.

    Returns
    -------
    torch.Tensor
        ``out``; allocated ``[batch, M, N]``, contiguous when ``N % 8 == 0``, otherwise a view whose
        rows are padded to 16 bytes (``.contiguous()`` copies it).

    Raises
    ------
    TypeError
        Non-tensor arguments, float32 or other unsupported dtypes, ``mat2``/``out`` of another dtype.
    ValueError
        Shapes that are not ``[batch, M, K]``, ``[batch, K, N]`` and ``[batch, M, N]``, tensors not
        on one CUDA device, a GPU other than sm90 (H100/H200), ``out`` overlapping another argument
        or itself, or a tensor that requires grad while grad mode is on.
    """
