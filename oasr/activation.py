"""Activations of the Conformer encoder: GLU, Swish (SiLU), and a bias + activation pass.

The pass, ``act(input + bias)``, is what follows a product whose own epilogue lacks them (cuBLAS has no SiLU):
``oasr.gemm``'s cuBLAS backend runs it in place on cuBLAS's output.

Channels-last tensors of float32, float16 or bfloat16; the math runs in fp32 and each
output is rounded once. Arguments are checked before any launch (:func:`_check_glu`,
:func:`_check_swish`), types, dtypes and shapes first (so those errors are the same on any
machine), then devices, then memory and autograd (``oasr/_checks.py``). Each op is declared
once (``oasr/_op.py``), which also makes it the custom op ``torch.ops.oasr.<op>``.
"""

from __future__ import annotations

from torch import Tensor

from ._checks import FLOATS, bad_input, bad_tensor, check_activation, check_placement, ready_devices
from ._layouts import launch_contiguous, launch_rows
from ._op import LIKE_INPUT, op
from .jit.families import ACTIVATION

_READY = ready_devices(ACTIVATION)


def _check_glu(input: object, out: object) -> tuple[int, ...]:
    """glu's arguments, in order: types, dtypes and shapes, devices, then memory; ``out``'s shape."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input("glu", input)
    shape = input.shape
    if not shape:
        raise ValueError("oasr.glu: `input` must have at least one dimension")
    in_cols = shape[-1]
    if in_cols % 2 != 0:
        raise ValueError(f"oasr.glu: `input` last dimension must be even (the two halves), got {in_cols}")
    expected = (*shape[:-1], in_cols // 2)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == expected):
        raise bad_tensor("glu", "out", out, dtype, expected)
    check_placement("glu", ACTIVATION, _READY, (("input", input),), (("out", out),))
    return expected


def _launch_glu(out: Tensor, input: Tensor) -> None:
    """The kernel reads and writes row views ([..., 2C] slices are): other layouts go through copies."""
    launch = ACTIVATION.module().glu
    if input.is_contiguous() and out.is_contiguous():
        launch(out, input)
    else:
        launch_rows(launch, (out,), (input,))


@op(check=_check_glu, launch=_launch_glu)
def glu(input: Tensor, out: Tensor | None = None) -> Tensor:
    """Gated linear unit over the last dimension: ``a * sigmoid(b)`` with ``a, b = input.chunk(2, -1)``.

    Same result as ``torch.nn.functional.glu(input, dim=-1)``.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[..., 2C]`` (float32, float16 or bfloat16). Views whose rows are
        evenly strided with a contiguous last dimension (e.g. ``x[..., :2C]``) are read
        in place; other layouts are copied first.
    out : torch.Tensor, optional
        Destination ``[..., C]`` of ``input``'s dtype and device; must not share memory
        with ``input`` (their address ranges may not intersect) nor overlap itself.
        Allocated when omitted.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        A non-tensor argument or an unsupported/mismatched dtype.
    ValueError
        ``input`` without dimensions or with an odd last dimension, ``out`` of the wrong
        shape, tensors not on one CUDA device, a GPU whose compute capability the
        activation kernels do not support, ``out`` overlapping ``input`` or itself, or a
        tensor that requires grad while grad mode is on (no backward: use ``torch.no_grad()``).
    """


def _check_swish(input: object, out: object) -> tuple[int, ...]:
    """swish's arguments, in order: types, dtypes and shapes, devices, then memory; ``out``'s shape."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input("swish", input)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == input.shape):
        raise bad_tensor("swish", "out", out, dtype, input.shape)
    check_placement("swish", ACTIVATION, _READY, (("input", input),), (("out", out),), in_place=("input",))
    return input.shape


def _launch_swish(out: Tensor, input: Tensor) -> None:
    """The kernel reads and writes contiguous tensors: others go through contiguous copies."""
    launch = ACTIVATION.module().swish
    if input.is_contiguous() and out.is_contiguous():
        launch(out, input)
    else:
        launch_contiguous(launch, out, input)


@op(check=_check_swish, launch=_launch_swish, layout=LIKE_INPUT)
def swish(input: Tensor, out: Tensor | None = None) -> Tensor:
    """Swish / SiLU, element-wise: ``input * sigmoid(input)`` (``torch.nn.functional.silu``).

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor of any shape (float32, float16 or bfloat16). Contiguous tensors and
        offset views are read in place; other layouts are copied first.
    out : torch.Tensor, optional
        Destination of ``input``'s shape, dtype and device; may be ``input`` itself
        (in place) but must not otherwise share memory with it, nor overlap itself.
        Allocated when omitted.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        A non-tensor argument or an unsupported/mismatched dtype.
    ValueError
        ``out`` of the wrong shape, tensors not on one CUDA device, a GPU whose compute
        capability the activation kernels do not support, ``out`` partly overlapping
        ``input`` or itself, or a tensor that requires grad while grad mode is on.
    """


BIAS_ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu")
"""The activations of :func:`bias_activation`: ``oasr.gemm``'s (``gelu`` is erf's, ``gelu_tanh`` the tanh form)."""


def _check_bias_activation(input: object, bias: object, activation: object, out: object) -> tuple[int, ...]:
    """bias_activation's arguments, in order: types, dtypes and shapes, the activation, devices, memory."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input("bias_activation", input)
    shape = input.shape
    if not shape:
        raise ValueError("oasr.bias_activation: `input` must have at least one dimension ([..., C])")
    if bias is not None and not (isinstance(bias, Tensor) and bias.dtype is dtype and bias.shape == shape[-1:]):
        raise bad_tensor("bias_activation", "bias", bias, dtype, shape[-1:])
    check_activation("bias_activation", activation, BIAS_ACTIVATIONS)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == shape):
        raise bad_tensor("bias_activation", "out", out, dtype, shape)
    reads = (("input", input), ("bias", bias))
    check_placement("bias_activation", ACTIVATION, _READY, reads, (("out", out),), in_place=("input",))
    return shape


def _launch_bias_activation(out: Tensor, input: Tensor, bias: Tensor | None, activation: str | None) -> None:
    """The kernel reads and writes row views (out may be input): other layouts go through copies."""
    launch = ACTIVATION.module().bias_activation
    if bias is not None and bias.stride(0) != 1:
        bias = bias.contiguous()
    if input.is_contiguous() and out.is_contiguous():
        launch(out, input, bias, activation)
    else:
        launch_rows(launch, (out,), (input,), bias, activation)


@op(check=_check_bias_activation, launch=_launch_bias_activation, layout=LIKE_INPUT)
def bias_activation(
    input: Tensor, bias: Tensor | None = None, activation: str | None = None, out: Tensor | None = None
) -> Tensor:
    """A bias and an activation in one memory-bound pass: ``act(input + bias)`` over the last dimension.

    Computed in fp32 and rounded once. On float16 and bfloat16, ``"silu"`` and ``"gelu_tanh"`` use the hardware
    ``tanh.approx`` as ``oasr.gemm``'s fused epilogues do (an absolute error below ``3e-4 * |x|`` before rounding);
    on float32 they are the accurate forms.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[..., C]`` (float32, float16 or bfloat16). Row views with a contiguous last dimension are read
        in place; other layouts are copied first.
    bias : torch.Tensor, optional
        ``[C]``, same dtype and device (absent: the activation alone).
    activation : {None, "relu", "gelu", "gelu_tanh", "silu"}
        Applied after the bias; ``"gelu"`` is erf's GELU (``F.gelu``), ``"gelu_tanh"`` its tanh approximation.
    out : torch.Tensor, optional
        Destination of ``input``'s shape, dtype and device; may be ``input`` itself (in place) but must not otherwise
        share memory with ``input`` or ``bias``. Allocated (contiguous) when omitted.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        A non-tensor argument, an unsupported or mismatched dtype, a non-string ``activation``.
    ValueError
        ``input`` without dimensions, ``bias`` not ``[C]``, ``out`` of the wrong shape, an unknown activation,
        tensors not on one CUDA device, a GPU the activation kernels do not support, ``out`` partly overlapping
        ``input`` or overlapping ``bias``, or a tensor that requires grad while grad mode is on.
    """
