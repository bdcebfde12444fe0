"""Batched matrix products on Hopper tensor cores, for attention: ``out[i] = a[i] @ b[i]``.

As ``torch.bmm``: ``a [batch, M, K]``, ``b [batch, K, N]``, float16 or bfloat16, fp32 accumulation.
Both attention products run without a copy: scores pass keys transposed
(``b = k.transpose(1, 2)``, a ``[batch, N, K]`` tensor with K contiguous) and context passes values
as they are (``[batch, K, N]``, N contiguous); the layout is read from ``b``'s strides. Odd
sequence lengths (375) work: the result's rows are padded to 16 bytes (a strided view), and an
operand whose rows are not is copied into a padded buffer first (``oasr/_tma.py``).

Arguments are checked before any launch (:func:`_check_bmm`). Under ``torch.compile`` the op is
the custom op ``torch.ops.oasr.bmm``.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.compiler import is_compiling

from ._checks import (
    HALF_DTYPES,
    bad_half_input,
    bad_tensor,
    check_device,
    check_out_disjoint,
    other_device,
    ready_devices,
    requires_grad,
)
from ._custom_ops import define
from ._tma import addressable, addressable_copy, padded_empty
from .api_logging import oasr_api
from .jit import gemm_config
from .jit.core import Variant
from .jit.families import BMM

_READY = ready_devices(BMM)
_grad_enabled = torch.is_grad_enabled
_NAMES = ("input", "mat2", "out")


def _check_bmm(input: object, mat2: object, out: object) -> tuple[int, int, int, int]:
    """Every argument, in order (types, dtypes and shapes, devices, memory); (batch, M, N, K)."""
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
    device = input.device
    if device not in _READY:
        check_device("bmm", BMM, device)
    if mat2.device != device:
        raise other_device("bmm", "mat2", mat2, device)
    if out is not None:
        if out.device != device:
            raise other_device("bmm", "out", out, device)
        check_out_disjoint("bmm", "out", out, ("input", input), ("mat2", mat2))
    if _grad_enabled() and (input.requires_grad or mat2.requires_grad or (out is not None and out.requires_grad)):
        raise requires_grad("bmm", _NAMES, (input, mat2, out))
    return batch, m, n, k


@functools.cache
def _variant(dtype: torch.dtype, n_major: bool, config: gemm_config.GemmConfig) -> Variant:
    return gemm_config.bmm_variant(str(dtype).removeprefix("torch."), n_major, config)


def _product(a: Tensor, b: Tensor, out: Tensor, config: gemm_config.GemmConfig | None = None) -> None:
    """``out = a @ b`` for checked arguments; ``config`` overrides the choice."""
    batch, m, k = a.shape
    n = b.shape[2]
    if out.numel() == 0:
        return
    if k == 0:
        out.zero_()
        return
    config = config or gemm_config.choose(m, n, k, batch)
    # B K-major ([batch, N, K] transposed: scores) when K is contiguous, else N-major ([batch, K, N]: context).
    keys = b.transpose(1, 2)
    n_major = k > 1 and keys.stride(2) != 1
    # The launcher says which operands TMA cannot address as they are (and launches nothing then): those get
    # copies with padded rows (B in the layout it can be read in), an output a padded temporary.
    if not BMM.module(_variant(a.dtype, n_major, config)).bmm(out, a, b if n_major else keys, n_major):
        return
    a = addressable_copy(a)
    n_major = not addressable(keys)
    operand = addressable_copy(b) if n_major else keys
    target = out if addressable(out) else padded_empty((batch, m, n), out.dtype, out.device)
    if BMM.module(_variant(a.dtype, n_major, config)).bmm(target, a, operand, n_major):
        raise RuntimeError(f"oasr: the bmm launcher refused padded operands ({a.stride()}, {operand.stride()})")
    if target is not out:
        out.copy_(target)


def _bmm(input: Tensor, mat2: Tensor, out: Tensor | None) -> Tensor:
    batch, m, n, _ = _check_bmm(input, mat2, out)
    if out is None:
        out = padded_empty((batch, m, n), input.dtype, input.device)
    _product(input, mat2, out)
    return out


@oasr_api
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
    if is_compiling():
        if out is None:
            out = torch.empty((input.shape[0], input.shape[1], mat2.shape[2]), dtype=input.dtype, device=input.device)
        _BMM(out, input, mat2)
        return out
    return _bmm(input, mat2, out)


def _bmm_op(out: Tensor, input: Tensor, mat2: Tensor) -> None:
    _bmm(input, mat2, out)


_BMM = define("bmm", "(Tensor(a!) out, Tensor input, Tensor mat2) -> ()", ("out",), _bmm_op)
