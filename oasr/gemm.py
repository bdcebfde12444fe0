"""Linear layers on Hopper tensor cores: ``act(input @ weight.T + bias)`` and its GLU-gated form.

float16 and bfloat16 storage, fp32 accumulation. float32 inputs are refused (cast them, or use torch for TF32).
Requires an sm90 GPU (H100/H200). Two backends, the call's plan choosing (:func:`oasr._backends.planned`: the
rule of ``oasr/jit/gemm_plan.py``, or the autotuner's with ``OASR_AUTOTUNE=1``; ``oasr.gemm_plan`` says which):

- oasr's kernels: CUTLASS's TMA warp-specialized GEMMs and the family's own (direct, tail), one JIT module per
  (dtype, epilogue, tile configuration), built the first time a call needs it (``oasr/jit/gemm_config.py``
  chooses the configuration per shape); the epilogue (bias, activation) computed in fp32 on the accumulators and
  rounded once;
- cuBLAS through torch: ``torch.mm``, with cuBLASLt's own epilogue where it has the call's (a bias:
  ``torch.addmm``; a bias and ReLU or tanh-GELU: ``torch._addmm_activation``), else the product rounded to the
  storage dtype, then ``oasr.bias_activation`` in place (one memory-bound pass, rounded again); gemm_glu's
  product then ``oasr.glu``.

Arguments are checked before any launch (:func:`_check_gemm`): types, dtypes and shapes first, then
devices, then memory and autograd (``oasr/_checks.py``). Each op is declared once (``oasr/_op.py``),
which also makes it the custom op ``torch.ops.oasr.<op>``.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from ._backends import planned
from ._checks import (
    HALF_DTYPES,
    bad_half_input,
    bad_tensor,
    check_k_contiguous,
    check_placement,
    ready_devices,
)
from ._op import CONTIGUOUS, PADDED_ROWS, op
from ._tma import addressable, addressable_copy, padded_empty
from .activation import _launch_bias_activation as _bias_activation_pass
from .activation import _launch_glu as _glu_pass
from .jit import gemm_config, gemm_plan
from .jit.core import Variant
from .jit.families import GEMM

_READY = ready_devices(GEMM)
ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu")
"""``gelu`` is erf's GELU (``F.gelu``), ``gelu_tanh`` its tanh approximation (``approximate="tanh"``)."""
_TORCH_ACT = {
    None: lambda y: y,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
    "silu": F.silu,
    "glu": functools.partial(F.glu, dim=-1),
}


def _check_gemm(
    op: str, input: object, weight: object, bias: object, activation: object, out: object, gated: bool
) -> tuple[int, ...]:
    """Every argument, in order (types, dtypes and shapes, the activation, devices, memory); the output's shape."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in HALF_DTYPES):
        advice = "cast with `input.bfloat16()` (and the weight), or use torch.nn.functional.linear for fp32/TF32"
        raise bad_half_input(op, input, "gemm", advice)
    input_shape = input.shape
    if not input_shape:
        raise ValueError(f"oasr.{op}: `input` must have at least one dimension ([..., K])")
    k = input_shape[-1]
    if not (isinstance(weight, Tensor) and weight.dtype is dtype and len(weight_shape := weight.shape) == 2):
        expected = ("2N" if gated else "N", k)
        if isinstance(weight, Tensor) and weight.dtype is dtype:
            raise ValueError(f"oasr.{op}: `weight` has shape {tuple(weight.shape)}, expected [{expected[0]}, {k}]")
        raise bad_tensor(op, "weight", weight, dtype, expected)
    rows, weight_k = weight_shape
    if weight_k != k:
        raise ValueError(
            f"oasr.{op}: `weight` has shape {tuple(weight_shape)}: its K ({weight_k}) must match "
            f"`input`'s last dimension ({k})"
        )
    if gated and rows % 2:
        raise ValueError(f"oasr.{op}: `weight` must have an even number of rows (value and gate halves), got {rows}")
    if bias is not None and not (isinstance(bias, Tensor) and bias.dtype is dtype and bias.shape == (rows,)):
        raise bad_tensor(op, "bias", bias, dtype, (rows,))
    if activation not in ACTIVATIONS:
        if not isinstance(activation, str):
            raise TypeError(f"oasr.{op}: `activation` must be None or a string, got {type(activation).__name__}")
        raise ValueError(f"oasr.{op}: `activation` must be one of {ACTIVATIONS}, got {activation!r}")
    n = rows // 2 if gated else rows
    shape = (input_shape[0], n) if len(input_shape) == 2 else (*input_shape[:-1], n)
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == shape):
        raise bad_tensor(op, "out", out, dtype, shape)
    # (contiguous tensors pass at once; the helper words the error)
    if k > 1 and not (
        (input.is_contiguous() or input.stride(-1) == 1) and (weight.is_contiguous() or weight.stride(-1) == 1)
    ):
        check_k_contiguous(op, input=input, weight=weight)
    reads = (("input", input), ("weight", weight), ("bias", bias))
    check_placement(op, GEMM, _READY, reads, (("out", out),))
    return shape


@functools.cache
def _variant(dtype: torch.dtype, epilogue: str, config: gemm_config.GemmConfig) -> Variant:
    return gemm_config.gemm_variant(str(dtype).removeprefix("torch."), epilogue, config)


def _linear(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    activation: str | None,
    out: Tensor,
    config: gemm_config.GemmConfig | None = None,
) -> None:
    """``out[..., N] = act(input @ weight.T + bias)`` for checked arguments (``activation`` "glu": ``weight`` is
    ``[2N, K]`` and ``out`` the GLU of the two halves) on the backend :func:`planned` picks; ``config`` runs oasr's
    kernel of that configuration instead (tests)."""
    k = input.shape[-1]
    n = out.shape[-1]
    m = out.numel() // n if n else 0
    if m == 0 or n == 0:
        return
    if k == 0:  # an empty sum: the epilogue alone
        rows = (*out.shape[:-1], weight.shape[0])
        zeros = torch.zeros(rows, dtype=out.dtype, device=out.device)
        out.copy_(_TORCH_ACT[activation](bias.expand(rows) if bias is not None else zeros))
        return
    a = input if input.dim() == 2 else input.reshape(m, k)
    view = out if out.dim() == 2 else _row_view(out, m, n)

    def run(backend: str, chosen: gemm_config.GemmConfig) -> None:
        if backend == "oasr":
            _oasr_linear(a, weight, bias, activation, out, view, chosen)
        else:
            _cublas_linear(a, weight, bias, activation, out, view)

    if config is not None:
        run("oasr", config)
        return
    glu = activation == "glu"
    problem = gemm_plan.Problem(
        "gemm_glu" if glu else "gemm", m, n, k, 1, bias is not None, None if glu else activation
    )
    plan = planned(problem, input.dtype, out.device, run)
    run(plan.backend, plan.config)


def _oasr_linear(
    a: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    activation: str | None,
    out: Tensor,
    view: Tensor | None,
    config: gemm_config.GemmConfig,
) -> None:
    """oasr's kernel of ``config`` on ``a`` ([M, K]) into ``out`` (``view``: its [M, N] rows, None if none)."""
    m, n = a.shape[0], out.shape[-1]
    epilogue = activation or ("bias" if bias is not None else "plain")
    module = GEMM.module(_variant(a.dtype, epilogue, config))
    # TMA addresses 16-byte aligned rows: operands without them go through copies with padded rows, an output
    # through a padded temporary.
    a, w = addressable_copy(a), addressable_copy(weight)
    target = view if view is not None and addressable(view) else padded_empty((m, n), out.dtype, out.device)
    if bias is not None and bias.stride(0) != 1:
        bias = bias.contiguous()
    module.gemm(target, a, w, bias)
    if target is not view:
        out.copy_(target.view(out.shape))


def _cublas_linear(
    a: Tensor, weight: Tensor, bias: Tensor | None, activation: str | None, out: Tensor, view: Tensor | None
) -> None:
    """cuBLAS through torch on ``a`` ([M, K]) into ``out`` (``view``: its [M, N] rows, None if none): cuBLASLt's own
    epilogue where it has this one, else the product then ``oasr.bias_activation`` in place (``oasr.glu`` for GLU)."""
    m, n = a.shape[0], out.shape[-1]
    w = weight.t()
    if activation == "glu":  # the [M, 2N] product, then its GLU into out
        both = torch.mm(a, w) if bias is None else torch.addmm(bias, a, w)
        _glu_pass(out, both.view(*out.shape[:-1], 2 * n))
        return
    target = view if view is not None else torch.empty((m, n), dtype=out.dtype, device=out.device)
    if bias is not None and activation is None:
        torch.addmm(bias, a, w, out=target)
    elif bias is not None and activation in gemm_plan.LT_ACTIVATIONS:
        torch._addmm_activation(bias, a, w, use_gelu=activation == "gelu_tanh", out=target)
    else:
        torch.mm(a, w, out=target)
        if activation is not None:
            _bias_activation_pass(target, target, bias, activation)
    if target is not view:
        out.copy_(target.view(out.shape))


def _row_view(out: Tensor, m: int, n: int) -> Tensor | None:
    """``out`` ([..., N]) as [M, N] rows of one stride, or None when its leading dimensions do not collapse."""
    try:
        return out.view(m, n)
    except RuntimeError:
        return None


def _check_plain(input: object, weight: object, bias: object, activation: object, out: object) -> tuple[int, ...]:
    return _check_gemm("gemm", input, weight, bias, activation, out, False)


def _check_glu(input: object, weight: object, bias: object, out: object) -> tuple[int, ...]:
    return _check_gemm("gemm_glu", input, weight, bias, None, out, True)


def _launch_plain(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | None, activation: str | None) -> None:
    _linear(input, weight, bias, activation, out)


def _launch_glu(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | None) -> None:
    _linear(input, weight, bias, "glu", out)


@op(check=_check_plain, launch=_launch_plain, layout=PADDED_ROWS)
def gemm(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    activation: str | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """A linear layer with its activation fused: ``act(input @ weight.T + bias)``.

    Matches ``act(torch.nn.functional.linear(input, weight, bias))`` computed in fp32 and rounded once (on the
    cuBLAS backend with an epilogue cuBLASLt lacks, the product is rounded before the epilogue too).

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[..., K]`` (float16 or bfloat16), its last dimension contiguous. Any K >= 0;
        rows whose stride is not a multiple of 16 bytes (K % 8 != 0 when contiguous) are copied
        into a padded buffer first.
    weight : torch.Tensor
        ``[N, K]`` (``nn.Linear.weight``), same dtype and device, K contiguous.
    bias : torch.Tensor, optional
        ``[N]``, same dtype and device.
    activation : {None, "relu", "gelu", "gelu_tanh", "silu"}
        Applied after the bias, in fp32 before the one rounding; ``"gelu"`` is the erf form,
        ``"gelu_tanh"`` the tanh approximation. ``"gelu_tanh"`` and ``"silu"`` use the hardware
        ``tanh.approx`` (SiLU as ``x * (0.5 + 0.5 tanh(x / 2))``, one SFU op): an absolute error
        below ``3e-4 * |x|`` before rounding (PTX's bound; SiLU's measured ``4e-6 * |x|`` on the
        H200, ``dev/gemm/RESULTS.md``), large relative to the small outputs of negative ``x``.
    out : torch.Tensor, optional
        Destination ``[..., N]`` of ``input``'s dtype and device; must not share memory with the
        other arguments. Any layout (one TMA cannot write to is filled through a temporary).

    Returns
    -------
    torch.Tensor
        ``out``; allocated ``[..., N]``, contiguous when ``N % 8 == 0``, otherwise a view whose rows
        are padded to 16 bytes (``.contiguous()`` copies it).

    Raises
    ------
    TypeError
        Non-tensor arguments, float32 or other unsupported dtypes, tensors of another dtype than
        ``input``'s, a non-string ``activation``.
    ValueError
        Shapes that do not match (``weight`` not ``[N, K]`` with ``input``'s K, ``bias`` not ``[N]``,
        ``out`` not ``[..., N]``), a non-contiguous K dimension, an unknown activation, tensors not on
        one CUDA device, a GPU other than sm90 (H100/H200), ``out`` overlapping another argument or
        itself, or a tensor that requires grad while grad mode is on.
    """


@op(check=_check_glu, launch=_launch_glu, layout=CONTIGUOUS)
def gemm_glu(input: Tensor, weight: Tensor, bias: Tensor | None = None, out: Tensor | None = None) -> Tensor:
    """A linear layer followed by GLU: ``F.glu(F.linear(input, weight, bias), -1)``.

    The first N output columns (``weight[:N]``) are the values, the last N the gates:
    ``out = value * sigmoid(gate)``. On oasr's backend in one launch: the direct kernel's tiles hold 64 values and
    their 64 gates, and the epilogue stores their GLU (``gemm_config.DIRECT``); on cuBLAS's, the ``[..., 2N]``
    product then ``oasr.glu``.

    Parameters
    ----------
    input : torch.Tensor
        As in :func:`gemm`.
    weight : torch.Tensor
        ``[2N, K]``, same dtype and device as ``input``, K contiguous.
    bias : torch.Tensor, optional
        ``[2N]``.
    out : torch.Tensor, optional
        Destination ``[..., N]``.

    Returns
    -------
    torch.Tensor
        ``out`` (allocated contiguous when not given).

    Raises
    ------
    TypeError, ValueError
        As :func:`gemm`; ValueError also for an odd number of weight rows.
    """
