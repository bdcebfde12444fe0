"""Normalisations over the last dimension: LayerNorm, RMSNorm and their fused residual forms.

Channels-last tensors ``[..., C]`` of float32, float16 or bfloat16; statistics and the
affine transform run in fp32 and each output is rounded once. ``weight`` and ``bias``
are ``[C]`` tensors of the input's dtype (an fp32 weight for a half input is refused,
not converted). Any C >= 1 works; rows up to ~58000 elements are read from DRAM once.

Arguments are checked before any launch (:func:`_check_norm`), types, dtypes and shapes
first (so those errors are the same on any machine), then devices, then memory and
autograd (``oasr/_checks.py``). Each op is declared once (``oasr/_op.py``), which also
makes it the custom op ``torch.ops.oasr.<op>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from torch import Tensor

from ._checks import FLOATS, bad_input, bad_tensor, check_placement, check_real_scalar, ready_devices
from ._layouts import launch_rows
from ._op import LIKE_INPUT, op
from .jit.families import NORM

_READY = ready_devices(NORM)
_INF = math.inf


def _check_scalar(op: str, name: str, value: object, low: float) -> None:
    """A real ``value`` in [``low``, inf) (``low`` -inf: any finite value); raises naming ``name`` otherwise."""
    if type(value) is not float:
        value = check_real_scalar(op, name, value)
    if not low <= value < _INF or value == -_INF:
        bound = "finite and >= 0" if low == 0.0 else "finite"
        raise ValueError(f"oasr.{op}: `{name}` must be {bound}, got {value}")


def _check_norm(
    op: str,
    input: object,
    residual: object,
    weight: object,
    bias: object,
    eps: object,
    alpha: object,
    out: object,
    residual_out: object,
    fused: bool,
) -> tuple[int, ...]:
    """Every argument of a norm, in order (types, dtypes and shapes, scalars, devices, then memory); ``out``'s shape."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in FLOATS):
        raise bad_input(op, input)
    shape = input.shape
    if not shape:
        raise ValueError(f"oasr.{op}: `input` must have at least one dimension")
    if fused and not (isinstance(residual, Tensor) and residual.dtype is dtype and residual.shape == shape):
        raise bad_tensor(op, "residual", residual, dtype, shape)
    vector = (shape[-1],)
    if not (isinstance(weight, Tensor) and weight.dtype is dtype and weight.shape == vector):
        raise bad_tensor(op, "weight", weight, dtype, vector)
    if bias is not None and not (isinstance(bias, Tensor) and bias.dtype is dtype and bias.shape == vector):
        raise bad_tensor(op, "bias", bias, dtype, vector)
    if not (type(eps) is float and 0.0 <= eps < _INF):  # (the usual call: one comparison)
        _check_scalar(op, "eps", eps, 0.0)
    if fused and not (type(alpha) is float and -_INF < alpha < _INF):
        _check_scalar(op, "alpha", alpha, -_INF)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == shape):
        raise bad_tensor(op, "out", out, dtype, shape)
    if residual_out is not None:
        if not (isinstance(residual_out, Tensor) and residual_out.dtype is dtype and residual_out.shape == shape):
            raise bad_tensor(op, "residual_out", residual_out, dtype, shape)
        if residual_out is out:  # (the same memory in another tensor: refused with the overlaps)
            raise ValueError(f"oasr.{op}: `out` and `residual_out` must be different tensors")
    # In place is exact aliasing of `input` (or `residual`); any other shared memory is refused.
    check_placement(
        op,
        NORM,
        _READY,
        (("input", input), ("residual", residual), ("weight", weight), ("bias", bias)),
        (("out", out), ("residual_out", residual_out)),
        in_place=("input", "residual"),
    )
    return shape


def _launch_norm(
    launch: object,
    out: Tensor,
    residual_out: Tensor | None,
    input: Tensor,
    residual: Tensor | None,
    weight: Tensor,
    bias: Tensor | None,
    eps: float,
    alpha: float,
    fused: bool,
) -> None:
    """The kernel reads and writes row views: contiguous tensors as they are, other layouts as views or copies."""
    if not (
        input.is_contiguous()
        and out.is_contiguous()
        and weight.is_contiguous()
        and (bias is None or bias.is_contiguous())
        and (residual is None or residual.is_contiguous())
        and (residual_out is None or residual_out.is_contiguous())
    ):
        weight, bias = weight.contiguous(), None if bias is None else bias.contiguous()
        if fused:
            launch_rows(lambda *t: launch(*t, weight, bias, eps, alpha), (out, residual_out), (input, residual))
        else:
            launch_rows(lambda *t: launch(*t, weight, bias, eps), (out,), (input,))
    elif fused:
        launch(out, residual_out, input, residual, weight, bias, eps, alpha)
    else:
        launch(out, input, weight, bias, eps)


def _plain(op: str, launcher: Callable[[Any], Callable[..., None]]) -> dict[str, Any]:
    """The declaration of a norm (``launcher`` picks its launcher from the family's module)."""

    def check(input: object, weight: object, bias: object, eps: object, out: object) -> tuple[int, ...]:
        return _check_norm(op, input, None, weight, bias, eps, 1.0, out, None, False)

    def launch(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | None, eps: float) -> None:
        _launch_norm(launcher(NORM.module()), out, None, input, None, weight, bias, eps, 1.0, False)

    return {"check": check, "launch": launch, "layout": LIKE_INPUT}


def _fused(op: str, launcher: Callable[[Any], Callable[..., None]]) -> dict[str, Any]:
    """The declaration of a norm with the residual add fused (and the sum written to ``residual_out``)."""

    def check(
        input: object,
        residual: object,
        weight: object,
        bias: object,
        eps: object,
        alpha: object,
        out: object,
        residual_out: object,
    ) -> tuple[int, ...]:
        return _check_norm(op, input, residual, weight, bias, eps, alpha, out, residual_out, True)

    def launch(
        out: Tensor,
        residual_out: Tensor | None,
        input: Tensor,
        residual: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        eps: float,
        alpha: float,
    ) -> None:
        _launch_norm(launcher(NORM.module()), out, residual_out, input, residual, weight, bias, eps, alpha, True)

    return {"check": check, "launch": launch, "layout": LIKE_INPUT, "outputs": ("out", "residual_out")}


@op(**_plain("layer_norm", lambda module: module.layer_norm))
def layer_norm(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    out: Tensor | None = None,
) -> Tensor:
    """LayerNorm over the last dimension: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    Two-pass fp32 statistics (the mean, then the biased variance around it) from one read
    of the row; matches ``torch.nn.functional.layer_norm(input, (C,), weight, bias, eps)``.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[..., C]`` (float32, float16 or bfloat16). Evenly strided row views
        are read in place; other layouts are copied first.
    weight : torch.Tensor
        ``[C]``, same dtype and device as ``input``.
    bias : torch.Tensor, optional
        ``[C]``, same dtype and device as ``input``.
    eps : float
        Added to the variance; finite and >= 0.
    out : torch.Tensor, optional
        Destination of ``input``'s shape, dtype and device; may be ``input`` (in place),
        but must not otherwise share memory with it (a shifted view of ``input`` is
        refused), nor overlap itself.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        Non-tensor arguments, unsupported dtypes, or ``weight``/``bias``/``out`` whose dtype
        differs from ``input``'s; a non-numeric ``eps``.
    ValueError
        Wrong shapes (``weight``/``bias`` not ``[C]``, ``out`` not ``input.shape``), a
        negative, non-finite or too large ``eps``, tensors not on one CUDA device, a GPU
        whose compute capability the norm kernels do not support, ``out`` partly
        overlapping another argument or itself, or a tensor that requires grad while grad
        mode is on (the ops have no backward: use ``torch.no_grad()``).
    """


@op(**_plain("rms_norm", lambda module: module.rms_norm))
def rms_norm(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    out: Tensor | None = None,
) -> Tensor:
    """RMSNorm over the last dimension: ``x / sqrt(mean(x^2) + eps) * weight (+ bias)``.

    Matches ``torch.nn.functional.rms_norm(input, (C,), weight, eps)`` (plus ``bias``).
    Parameters, return value and errors as :func:`layer_norm`.
    """


@op(**_fused("add_layer_norm", lambda module: module.add_layer_norm))
def add_layer_norm(
    input: Tensor,
    residual: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    alpha: float = 1.0,
    out: Tensor | None = None,
    residual_out: Tensor | None = None,
) -> Tensor:
    """Fused residual add and LayerNorm: ``layer_norm(residual + alpha * input)``.

    The sum is formed in fp32 (one fma per element) and normalised without being rounded;
    with ``residual_out`` it is also written there, rounded once to the storage dtype.
    One kernel reads ``input`` and ``residual`` once and writes ``out`` (and the sum).

    Parameters
    ----------
    input, residual : torch.Tensor
        CUDA tensors ``[..., C]`` of one shape, dtype and device.
    weight, bias, eps, out
        As in :func:`layer_norm`. ``out`` may be ``input`` or ``residual`` (in place), but
        must not otherwise share memory with either.
    alpha : float
        Scale of ``input`` in the sum (e.g. 0.5 for the Macaron half-step feed-forward);
        finite.
    residual_out : torch.Tensor, optional
        Receives the sum; ``input``'s shape, dtype and device. May be ``residual`` or
        ``input`` (updated in place), not ``out``; must not otherwise share memory with
        ``input``, ``residual`` or ``out``, nor overlap itself.

    Returns
    -------
    torch.Tensor
        ``out`` (the sum, when asked for, is in ``residual_out``).

    Raises
    ------
    TypeError, ValueError
        As :func:`layer_norm`, for every tensor argument; ValueError also when ``out`` and
        ``residual_out`` are the same tensor or overlap, or ``alpha`` is not finite.
    """


@op(**_fused("add_rms_norm", lambda module: module.add_rms_norm))
def add_rms_norm(
    input: Tensor,
    residual: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    alpha: float = 1.0,
    out: Tensor | None = None,
    residual_out: Tensor | None = None,
) -> Tensor:
    """Fused residual add and RMSNorm: ``rms_norm(residual + alpha * input)``.

    Parameters, return value and errors as :func:`add_layer_norm`.
    """
