"""2-D convolution on NHWC tensors and the fused Conv2dSubsampling front end of speech encoders.

* :func:`conv2d`: ``act(conv2d(input, weight) + bias)`` on ``input [N, H, W, C]`` and
  ``weight [K, R, S, C]``, as ``F.conv2d`` on the permuted tensors. Few input channels (C not a
  multiple of 8, e.g. the spectrogram's C = 1) run a direct kernel (on tensor cores when the filter has
  at most :data:`MAX_FEW_TAPS` taps R * S * C and K is a multiple of 8); C and K multiples of 8 run
  CUTLASS's sm90 implicit GEMM on tensor cores (one JIT module per dtype, activation and tile, built on
  first use, the tile chosen from K by ``oasr/jit/conv2d_config.py``); on other GPUs, or for shapes TMA's
  im2col mode cannot address, the direct kernel runs them too (correct, not fast).
* :func:`conv2d_subsampling`: WeNet's ``Conv2dSubsampling4`` (conv 3x3 stride 2, 1 -> D, ReLU;
  conv 3x3 stride 2, D -> D, ReLU) in one kernel that keeps the first conv's output in registers.

float16 and bfloat16 storage, fp32 accumulation, each output rounded once (the front end's first
conv is rounded to the storage type too, as the unfused torch module stores it). float32 is refused.

Arguments are checked before any launch in ``oasr/_checks.py``'s order and wording: types, dtypes and
shapes first, then devices, then memory (``out`` overlapping an argument) and autograd. Under
``torch.compile`` the ops are the custom ops ``torch.ops.oasr.conv2d`` and ``torch.ops.oasr.conv2d_subsampling``.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from torch import Tensor

from ._checks import (
    HALF_DTYPES,
    bad_half_input,
    bad_tensor,
    check_activation,
    check_pair,
    check_placement,
    compute_capability,
    ready_devices,
)
from ._op import op
from .jit import conv2d_config
from .jit.core import Variant
from .jit.families import CONV2D

ACTIVATIONS = conv2d_config.ACTIVATIONS
"""The activations the kernels fuse, passed to them by name."""
MAX_STRIDE_OR_PADDING = 2**30
"""Strides and padding beyond any image a kernel indexes in 32 bits (refused before they reach an allocation)."""

_READY = ready_devices(CONV2D)
MAX_FEW_TAPS = 15
"""R * S * C up to which the direct kernel multiplies on tensor cores (one k16 step, the bias its 16th column;
K a multiple of 8 and a 16-byte aligned ``out``): ``include/oasr/conv2d/direct.cuh``."""
_MAX_DIRECT_TAPS = 12288
"""R * S * C the direct kernel stages per output channel (48 KiB of fp32 weights)."""
_MAX_IGEMM_PADDING = 64
_MAX_IGEMM_FILTER = 32
"""Within TMA im2col's limits (corners within +-128, filter offsets below 255), with room."""
_FP32_ADVICE = "cast with `input.bfloat16()` (and the weights), or use torch.nn.functional.conv2d for fp32"


# ---------------------------------------------------------------------------
# Argument checks (oasr/_checks.py's order and wording), raised before any launch
# ---------------------------------------------------------------------------


def _check_conv2d(
    input: Any, weight: Any, bias: Any, stride: Any, padding: Any, activation: Any, out: Any
) -> tuple[int, int, int, int]:
    """Every check of :func:`conv2d`'s arguments; ``out``'s shape."""
    op = "conv2d"
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in HALF_DTYPES):
        raise bad_half_input(op, input, "conv2d", _FP32_ADVICE)
    if input.dim() != 4:
        raise ValueError(f"oasr.{op}: `input` must be [N, H, W, C] (NHWC), got shape {tuple(input.shape)}")
    n, h, w, c = input.shape
    if not (isinstance(weight, Tensor) and weight.dtype is dtype and weight.dim() == 4):
        if isinstance(weight, Tensor) and weight.dtype is dtype:
            raise ValueError(f"oasr.{op}: `weight` has shape {tuple(weight.shape)}, expected [K, R, S, {c}] (KRSC)")
        raise bad_tensor(op, "weight", weight, dtype, (-1, -1, -1, c))
    k, r, s, wc = weight.shape
    if wc != c:
        raise ValueError(
            f"oasr.{op}: `weight` has {wc} input channels (shape {tuple(weight.shape)}, [K, R, S, C]) but `input` "
            f"has C = {c}; a torch weight [K, C, R, S] is passed as `weight.permute(0, 2, 3, 1)`"
        )
    if min(r, s, c) < 1:
        raise ValueError(f"oasr.{op}: `weight` must have R, S, C >= 1, got shape {tuple(weight.shape)}")
    if bias is not None and not (isinstance(bias, Tensor) and bias.dtype is dtype and bias.shape == (k,)):
        raise bad_tensor(op, "bias", bias, dtype, (k,))
    sh, sw = check_pair(op, "stride", stride, 1, "(height, width)", MAX_STRIDE_OR_PADDING)
    ph, pw = check_pair(op, "padding", padding, 0, "(height, width)", MAX_STRIDE_OR_PADDING)
    if h + 2 * ph < r or w + 2 * pw < s:
        raise ValueError(
            f"oasr.{op}: the padded input ({h} + 2*{ph}) x ({w} + 2*{pw}) (`input`, `padding`) is smaller than "
            f"the {r} x {s} filter (`weight`): no output pixel"
        )
    shape = (n, (h + 2 * ph - r) // sh + 1, (w + 2 * pw - s) // sw + 1, k)
    check_activation(op, activation, ACTIVATIONS)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == shape):
        raise bad_tensor(op, "out", out, dtype, shape)
    if out is not None and not out.is_contiguous():
        raise ValueError(f"oasr.{op}: `out` must be contiguous ([N, P, Q, K] packed), got strides {out.stride()}")
    if c > 1 and input.stride(3) != 1:
        raise ValueError(
            f"oasr.{op}: `input`'s channels must be contiguous (NHWC; stride 1, got {input.stride(3)}); "
            f"pass `x.permute(0, 2, 3, 1)` of an NCHW tensor in channels_last memory format, or `.contiguous()`"
        )
    if r * s * c > _MAX_DIRECT_TAPS and not (c % 8 == 0 and k % 8 == 0):
        raise ValueError(
            f"oasr.{op}: a filter of R * S * C = {r * s * c} taps with C or K not a multiple of 8 (`weight` "
            f"{tuple(weight.shape)}) is beyond the direct kernel (at most {_MAX_DIRECT_TAPS}); pad the channels to 8"
        )
    # The convolutions read neighbours: never in place.
    check_placement(op, CONV2D, _READY, (("input", input), ("weight", weight), ("bias", bias)), (("out", out),))
    return shape


def _check_subsampling(
    input: Any, weight1: Any, bias1: Any, weight2: Any, bias2: Any, out: Any
) -> tuple[int, int, int, int]:
    """Every check of :func:`conv2d_subsampling`'s arguments; ``out``'s shape."""
    op = "conv2d_subsampling"
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in HALF_DTYPES):
        raise bad_half_input(op, input, "conv2d_subsampling", _FP32_ADVICE)
    if input.dim() != 3:
        raise ValueError(f"oasr.{op}: `input` must be [B, T, F] (features), got shape {tuple(input.shape)}")
    b, t, f = input.shape
    if not (isinstance(weight1, Tensor) and weight1.dtype is dtype and weight1.dim() == 4):
        raise bad_tensor(op, "weight1", weight1, dtype, (-1, 1, 3, 3))
    d = weight1.shape[0]
    if tuple(weight1.shape) != (d, 1, 3, 3):
        raise ValueError(f"oasr.{op}: `weight1` has shape {tuple(weight1.shape)}, expected [D, 1, 3, 3] (torch's)")
    image = _image(d)
    if not (isinstance(weight2, Tensor) and weight2.dtype is dtype and weight2.shape in ((d, d, 3, 3), image)):
        if isinstance(weight2, Tensor) and weight2.dtype is dtype:
            raise ValueError(
                f"oasr.{op}: `weight2` has shape {tuple(weight2.shape)}, expected {(d, d, 3, 3)} (torch's) or "
                f"pack_subsampling_weight2's image {image}"
            )
        raise bad_tensor(op, "weight2", weight2, dtype, (d, d, 3, 3))
    if weight2.shape == image and not weight2.is_contiguous():
        raise ValueError(
            f"oasr.{op}: `weight2`, pack_subsampling_weight2's image {image}, must be contiguous as that "
            f"function returns it, got strides {weight2.stride()}"
        )
    for name, bias in (("bias1", bias1), ("bias2", bias2)):
        if not (isinstance(bias, Tensor) and bias.dtype is dtype and bias.shape == (d,)):
            raise bad_tensor(op, name, bias, dtype, (d,))
    if d % 16 or not 16 <= d <= 256:
        raise ValueError(
            f"oasr.{op}: the fused kernel takes D (`weight1`'s first dimension) a multiple of 16 from 16 to 256, "
            f"got {d}; run oasr.conv2d twice for other D"
        )
    t2, f2 = ((t - 1) // 2 - 1) // 2, ((f - 1) // 2 - 1) // 2
    if t2 < 1 or f2 < 1:
        raise ValueError(
            f"oasr.{op}: `input` [B, T, F] = {tuple(input.shape)} is too small: two 3x3 stride-2 convolutions "
            f"need T >= 7 and F >= 7"
        )
    shape = (b, t2, d * f2)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == shape):
        raise bad_tensor(op, "out", out, dtype, shape)
    if out is not None and not out.is_contiguous():
        raise ValueError(f"oasr.{op}: `out` must be contiguous, got strides {out.stride()}")
    reads = (("input", input), ("weight1", weight1), ("bias1", bias1), ("weight2", weight2), ("bias2", bias2))
    check_placement(op, CONV2D, _READY, reads, (("out", out),))
    if input.device.type == "cuda" and (cc := compute_capability(input.device)) != (9, 0):
        raise ValueError(
            f"oasr.{op}: the fused kernel runs on wgmma (compute capability 9.0: H100, H200); `input` is on a GPU "
            f"of compute capability {cc[0]}.{cc[1]}; run oasr.conv2d twice there"
        )
    return shape


# ---------------------------------------------------------------------------
# Dispatch
# ---------------------------------------------------------------------------


@functools.cache
def _variant(dtype: torch.dtype, activation: str | None, k: int) -> Variant:
    """The implicit-GEMM module for ``dtype``, ``activation`` and ``k`` output channels (the tile rule)."""
    config = conv2d_config.choose(k)
    return conv2d_config.implicit_gemm_variant(str(dtype).removeprefix("torch."), activation, config)


@functools.cache
def _smem_limit(device: torch.device) -> int:
    """Shared memory a block may opt in to on ``device`` (no limit off CUDA, where only stand-in modules run)."""
    if device.type != "cuda":
        return sys.maxsize
    return torch.cuda.get_device_properties(device).shared_memory_per_block_optin


def _uses_implicit_gemm(input: Tensor, weight: Tensor, padding: tuple[int, int]) -> bool:
    """C and K multiples of 8 on sm90, within TMA im2col's limits: the tensor-core path."""
    k, r, s, c = weight.shape
    return (
        c % 8 == 0
        and k % 8 == 0
        and max(padding) <= _MAX_IGEMM_PADDING
        and max(r, s) <= _MAX_IGEMM_FILTER
        and compute_capability(input.device) == (9, 0)
    )


def _aligned(t: Tensor) -> Tensor:
    """``t`` packed and 16-byte aligned (TMA's needs), copied if it is not."""
    if not t.is_contiguous():
        return t.contiguous()  # (a fresh allocation: aligned)
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _launch_conv2d(
    out: Tensor,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: int | tuple[int, int],
    padding: int | tuple[int, int],
    activation: str | None,
) -> None:
    """The implicit GEMM where it runs (packed, 16-byte aligned operands), the direct kernel otherwise."""
    if out.numel() == 0:
        return
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    if _uses_implicit_gemm(input, weight, (ph, pw)):
        target = out if out.data_ptr() % 16 == 0 else torch.empty_like(out)
        bias = _aligned(bias) if bias is not None else None  # (the epilogue loads it in vectors)
        module = CONV2D.module(_variant(input.dtype, activation, weight.shape[0]))
        module.conv2d_implicit_gemm(target, _aligned(input), _aligned(weight), bias, sh, sw, ph, pw, activation)
        if target is not out:
            out.copy_(target)
        return
    _, r, s, c = weight.shape
    if r * s * c > _MAX_DIRECT_TAPS:  # (C and K multiples of 8, on a GPU without the implicit GEMM)
        raise ValueError(
            f"oasr.conv2d: a filter of R * S * C = {r * s * c} taps (`weight` {tuple(weight.shape)}) needs the "
            f"implicit GEMM, which runs on sm90 (H100/H200) only; the direct kernel takes at most {_MAX_DIRECT_TAPS}"
        )
    bias = bias.contiguous() if bias is not None else None
    CONV2D.module().conv2d_direct(out, input, weight.contiguous(), bias, sh, sw, ph, pw, activation)


def _image(d: int) -> tuple[int, int, int, int]:
    """:func:`pack_subsampling_weight2`'s image shape for D = ``d``: ``[N / 16, 9, N, 16]``, N = D rounded to 64."""
    n = -(-d // 64) * 64
    return (n // 16, 9, n, 16)


def pack_subsampling_weight2(weight2: Tensor) -> Tensor:
    """torch's ``[D, D, 3, 3]`` second weight as the fused kernel's ``[N / 16, 9, N, 16]`` B operand.

    For each chunk of 16 input channels and each tap, the wgmma's shared-memory image of ``w2[e, c]``:
    8-row x 8-channel core matrices, ordered (e // 8, c // 8 within the chunk, e % 8, c % 8). N is D
    rounded up to 64, both channel axes padded with zeros, so that every step of the kernel has whole chunks.
    Pass the image as :func:`conv2d_subsampling`'s ``weight2`` to pack once (as a model does at load time)
    instead of on every call.

    Parameters
    ----------
    weight2 : torch.Tensor
        ``[D, D, 3, 3]``: ``nn.Conv2d(D, D, 3, 2).weight`` as torch stores it, any dtype and strides.

    Returns
    -------
    torch.Tensor
        A new contiguous tensor ``[N / 16, 9, N, 16]`` of ``weight2``'s dtype and device.
    """
    d = weight2.shape[0]
    n = _image(d)[2]
    if n != d:
        weight2 = torch.nn.functional.pad(weight2, (0, 0, 0, 0, 0, n - d, 0, n - d))
    packed = weight2.reshape(n // 8, 8, n // 16, 2, 8, 3, 3).permute(2, 5, 6, 0, 3, 1, 4)  # (chunk, i, j, e8, h, e, c)
    return packed.reshape(n // 16, 9, n, 16)


def _launch_subsampling(
    out: Tensor, input: Tensor, weight1: Tensor, bias1: Tensor, weight2: Tensor, bias2: Tensor
) -> None:
    """Pack the second weight unless it comes packed, then one launch."""
    module = CONV2D.module()
    d, f2 = weight1.shape[0], out.shape[2] // weight1.shape[0]
    needed = module.conv2d_subsampling_smem_bytes(f2, d)
    if needed > _smem_limit(input.device):
        raise ValueError(
            f"oasr.conv2d_subsampling: F = {input.shape[2]} (`input`) needs {needed} bytes of shared memory per "
            f"block, more than this GPU's {_smem_limit(input.device)}; run oasr.conv2d twice for such inputs"
        )
    if out.numel() == 0:
        return
    w1 = weight1.reshape(d, 3, 3).contiguous()
    w2 = weight2 if weight2.shape[3] == 16 else pack_subsampling_weight2(weight2)  # the image (checked), or torch's
    module.conv2d_subsampling(out, input, w1, bias1.contiguous(), w2, bias2.contiguous())


# ---------------------------------------------------------------------------
# Public ops
# ---------------------------------------------------------------------------


@op(check=_check_conv2d, launch=_launch_conv2d)
def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    activation: str | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """A 2-D convolution on NHWC tensors with its bias and activation fused.

    Matches ``act(F.conv2d(input.permute(0, 3, 1, 2), weight.permute(0, 3, 1, 2), bias, stride, padding))``
    permuted back to NHWC, computed in fp32 and rounded once.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[N, H, W, C]`` (float16 or bfloat16), channels contiguous; other strides free
        (the tensor-core path copies a view that is not packed).
    weight : torch.Tensor
        ``[K, R, S, C]`` (KRSC; a torch weight ``[K, C, R, S]`` is ``weight.permute(0, 2, 3, 1)``), same dtype.
    bias : torch.Tensor, optional
        ``[K]``.
    stride, padding : int or (int, int)
        Stride >= 1 and zero padding >= 0, (height, width) or one for both.
    activation : {None, "relu", "silu"}
        Applied after the bias.
    out : torch.Tensor, optional
        Destination ``[N, P, Q, K]``, contiguous, of ``input``'s dtype and device, sharing no memory with
        the other arguments; ``P = (H + 2 pad_h - R) // stride_h + 1``, likewise Q.

    Returns
    -------
    torch.Tensor
        ``out`` (allocated contiguous when not given).

    Raises
    ------
    TypeError
        Non-tensor arguments, float32 or other unsupported dtypes, tensors of another dtype than ``input``'s,
        malformed ``stride``/``padding``/``activation``.
    ValueError
        Shapes that do not match (``weight`` not ``[K, R, S, C]`` with ``input``'s C, ``bias`` not ``[K]``,
        ``out`` not ``[N, P, Q, K]`` or not contiguous), non-contiguous channels, a padded input smaller than
        the filter, negative padding or a stride below 1, an unknown activation, tensors not on one CUDA
        device of compute capability 8.0+, ``out`` overlapping an argument, or a tensor that requires grad
        while grad mode is on.
    """


@op(check=_check_subsampling, launch=_launch_subsampling)
def conv2d_subsampling(
    input: Tensor,
    weight1: Tensor,
    bias1: Tensor,
    weight2: Tensor,
    bias2: Tensor,
    out: Tensor | None = None,
) -> Tensor:
    """WeNet's ``Conv2dSubsampling4`` in one kernel: two 3x3 stride-2 convolutions with ReLU, flattened.

    ``y1 = relu(conv(x[:, None], weight1, bias1, stride=2))``, ``y2 = relu(conv(y1, weight2, bias2, stride=2))``
    (NCHW, torch's layout), returned as ``y2.transpose(1, 2).reshape(B, T', D * F')``, the order the
    following ``Linear(D * F', d_model)`` of WeNet and upstream Oasr expects. The first convolution's
    output lives only in registers (rounded to the storage dtype, as torch stores it).

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[B, T, F]`` (float16 or bfloat16; e.g. 80 fbank features), any strides.
    weight1 : torch.Tensor
        ``[D, 1, 3, 3]``: ``nn.Conv2d(1, D, 3, 2).weight`` as torch stores it. D a multiple of 16, 16 to 256.
    bias1 : torch.Tensor
        ``[D]``.
    weight2 : torch.Tensor
        ``[D, D, 3, 3]``: ``nn.Conv2d(D, D, 3, 2).weight`` as torch stores it (repacked on every call, a
        1.2 MB copy at D = 256), or :func:`pack_subsampling_weight2`'s contiguous image of it
        ``[N / 16, 9, N, 16]`` (N = D rounded up to 64), packed once.
    bias2 : torch.Tensor
        ``[D]``.
    out : torch.Tensor, optional
        Destination ``[B, T', D * F']``, contiguous; ``T' = ((T - 1) // 2 - 1) // 2``, likewise F'.

    Returns
    -------
    torch.Tensor
        ``out`` (allocated contiguous when not given).

    Raises
    ------
    TypeError
        Non-tensor arguments, float32 or other unsupported dtypes, tensors of another dtype than ``input``'s.
    ValueError
        Shapes that do not match, D outside the kernel's range, T or F below 7, an F whose tile needs more
        shared memory than the GPU has, tensors not on one CUDA device of compute capability 9.0, ``out``
        overlapping an argument or not contiguous, or a tensor that requires grad while grad mode is on.
    """
