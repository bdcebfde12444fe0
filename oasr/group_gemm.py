"""Grouped linear layers on Hopper tensor cores: one ``F.linear`` per group of rows, the groups sized on the device.

``group_gemm(input [L, K], weight [G, N, K], offsets [G], bias [G, N])``: the rows of ``input`` come in G
consecutive groups, group g being rows ``offsets[g-1]:offsets[g]`` (the first group starting at row 0),
and go through ``F.linear(rows, weight[g], bias[g])``. float16 and bfloat16 storage, fp32 accumulation.

The offsets stay on the device, so a call (given ``out``) neither synchronises with the host nor allocates,
and a CUDA graph replayed with other offsets (same L) computes the new groups. Two kernels do it
(``gemm_config.choose_group`` picks, ``include/oasr/gemm/``):

* the direct kernel (below K=2048, up to 1024 groups): one launch that reads the offsets itself, its tiles
  starting at each group's first row, with one TMA descriptor per operand and no workspace;
* CUTLASS's grouped kernel: a setup kernel turns the offsets into problem shapes and pointers, in a workspace
  cached per (device, configuration, G), and the grouped kernel reads them.

Each kernel waits on the device for the one before it, so all may be launched with programmatic dependent
launch, hiding their launch gaps (below K=2048, ``gemm_config.group_pdl``; a CUDA graph captures those edges too).
Offsets that decrease, are negative or end past L cannot be seen from the host without a
synchronisation: the kernels clamp them (each group keeps the part of its rows inside
``[previous end, L)``) and set a flag in host-mapped memory; the next ``group_gemm`` call raises a
ValueError for it, and :func:`group_gemm_check` waits for the device and raises it at once.

The workspace is shared by the calls of one (device, configuration, G): calls on two streams at once
must not share one (order them with an event). Arguments are checked before any launch
(:func:`_check_group_gemm`): types, dtypes and shapes first, then devices, then memory and autograd
(``oasr/_checks.py``). Under ``torch.compile`` the op is the custom op ``torch.ops.oasr.group_gemm``;
:func:`group_gemm_check` is a host-side utility, not an op (``oasr.group_gemm_check``, outside ``__all__``).
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from ._checks import HALF_DTYPES, bad_half_input, bad_tensor, check_k_contiguous, check_placement, ready_devices
from ._op import PADDED_ROWS, op
from ._tma import addressable, addressable_copy, padded_empty
from .jit import gemm_config
from .jit.core import Variant
from .jit.families import GROUP_GEMM

_READY = ready_devices(GROUP_GEMM)

_WORKSPACES: dict[tuple[torch.device, str, int], Tensor] = {}
"""Each (device, module, G)'s workspace: the per-group shapes, pointers and strides, then CUTLASS's part."""


@functools.cache
def _error_flag() -> Tensor:
    """One int32 the kernels set when they clamp offsets: pinned (so the device writes it without a
    copy and the host reads it without a synchronisation) where CUDA is present."""
    return torch.zeros(1, dtype=torch.int32, pin_memory=torch.cuda.is_available())


def _offsets_error(where: str) -> ValueError:
    return ValueError(
        f"oasr.group_gemm: {where} had `offsets` that were not non-decreasing within [0, L] (L = input's rows): "
        f"they were clamped, so its output rows are not F.linear of the groups meant; check the offsets"
    )


def _raise_flagged(where: str) -> None:
    """Raise (and clear) the flag an earlier launch set."""
    flag = _error_flag()
    if flag[0]:
        flag.zero_()
        raise _offsets_error(where)


def _check_group_gemm(input: object, weight: object, offsets: object, bias: object, out: object) -> tuple[int, int]:
    """Every argument, in order (types, dtypes and shapes, devices, memory); ``out``'s shape [L, N]."""
    if not (isinstance(input, Tensor) and (dtype := input.dtype) in HALF_DTYPES):
        advice = "cast `input` and `weight` with `.bfloat16()`, or use torch for fp32"
        raise bad_half_input("group_gemm", input, "group_gemm", advice)
    if input.dim() != 2:
        raise ValueError(f"oasr.group_gemm: `input` must be 2-D [L, K], got shape {tuple(input.shape)}")
    rows, k = input.shape
    if not (isinstance(weight, Tensor) and weight.dtype is dtype and weight.dim() == 3):
        if isinstance(weight, Tensor) and weight.dtype is dtype:
            raise ValueError(f"oasr.group_gemm: `weight` must be 3-D [G, N, K], got shape {tuple(weight.shape)}")
        raise bad_tensor("group_gemm", "weight", weight, dtype, ("G", "N", k))
    groups, n, weight_k = weight.shape
    if weight_k != k:
        raise ValueError(
            f"oasr.group_gemm: `weight` has shape {tuple(weight.shape)}: its K ({weight_k}) must match "
            f"`input`'s last dimension ({k})"
        )
    if groups == 0:
        raise ValueError(f"oasr.group_gemm: `weight` must hold at least one group, got shape {tuple(weight.shape)}")
    if not isinstance(offsets, Tensor):
        raise TypeError(f"oasr.group_gemm: `offsets` must be a torch.Tensor, got {type(offsets).__name__}")
    if offsets.dtype != torch.int32:
        raise TypeError(
            f"oasr.group_gemm: `offsets` has dtype {offsets.dtype}, expected torch.int32 (cumulative group ends); "
            f"pass `offsets.int()`"
        )
    if offsets.shape != (groups,):
        raise ValueError(
            f"oasr.group_gemm: `offsets` has shape {tuple(offsets.shape)}, expected ({groups},) (one end per group)"
        )
    if bias is not None and not (isinstance(bias, Tensor) and bias.dtype is dtype and bias.shape == (groups, n)):
        raise bad_tensor("group_gemm", "bias", bias, dtype, (groups, n))
    if out is not None and not (isinstance(out, Tensor) and out.dtype is dtype and out.shape == (rows, n)):
        raise bad_tensor("group_gemm", "out", out, dtype, (rows, n))
    check_k_contiguous("group_gemm", input=input, weight=weight)

    reads = (("input", input), ("weight", weight), ("offsets", offsets), ("bias", bias))
    check_placement("group_gemm", GROUP_GEMM, _READY, reads, (("out", out),))
    return rows, n


@functools.cache
def _variant(dtype: torch.dtype, config: gemm_config.GemmConfig, bias: bool) -> Variant:
    return gemm_config.group_gemm_variant(str(dtype).removeprefix("torch."), config, bias)


def _workspace(module: object, variant: Variant, device: torch.device, groups: int) -> Tensor:
    """The cached workspace of ``variant``'s module on ``device`` for ``groups`` groups (allocated once)."""
    key = (device, variant.name, groups)
    workspace = _WORKSPACES.get(key)
    if workspace is None:
        size = module.group_gemm_workspace_size(groups, device.index or 0)
        workspace = _WORKSPACES[key] = torch.empty(size, dtype=torch.uint8, device=device)
    return workspace


def _launch(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor,
    bias: Tensor | None,
    out: Tensor,
    config: gemm_config.GemmConfig | None = None,
    pdl: bool | None = None,
) -> None:
    """``out = group_gemm(...)`` for checked arguments; ``config`` overrides the choice, ``pdl`` the launch
    (programmatic dependent launch of both kernels; None: ``gemm_config.group_pdl``)."""
    rows, k = input.shape
    groups, n, _ = weight.shape
    if rows == 0 or n == 0:
        return
    if k == 0:  # an empty sum: each row is its group's bias (rows past the last offset read the last group's)
        if bias is None:
            out.zero_()
        else:
            ends = offsets.clamp(0, rows)
            group = torch.searchsorted(ends, torch.arange(rows, device=out.device, dtype=torch.int32), right=True)
            out.copy_(bias[group.clamp_(max=groups - 1)])
        return
    a = addressable_copy(input)
    w = addressable_copy(weight)
    target = out if addressable(out) else padded_empty((rows, n), out.dtype, out.device)
    if groups > 1 and offsets.stride(0) != 1:
        offsets = offsets.contiguous()
    if bias is not None and n > 1 and bias.stride(1) != 1:
        bias = bias.contiguous()
    config = config or gemm_config.choose_group(n, k, groups)
    variant = _variant(input.dtype, config, bias is not None)
    module = GROUP_GEMM.module(variant)
    workspace = _workspace(module, variant, input.device, groups)
    pdl = gemm_config.group_pdl(k) if pdl is None else pdl
    module.group_gemm(target, a, w, offsets, bias, workspace, _error_flag(), pdl)
    if target is not out:
        out.copy_(target)


def _launch_group_gemm(out: Tensor, input: Tensor, weight: Tensor, offsets: Tensor, bias: Tensor | None) -> None:
    """Report an earlier call's clamped offsets, then launch."""
    _raise_flagged("an earlier call")
    _launch(input, weight, offsets, bias, out)


@op(check=_check_group_gemm, launch=_launch_group_gemm, layout=PADDED_ROWS)
def group_gemm(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor,
    bias: Tensor | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """One linear layer per group of rows: ``out[rows of g] = input[rows of g] @ weight[g].T + bias[g]``.

    Matches a loop of ``torch.nn.functional.linear`` over the groups, computed in fp32 (the bias added to
    the accumulators) and rounded once. No host synchronisation and, after the first call
    for a (device, G) pair, no allocation: CUDA-graph capturable (make the first call before capturing),
    and a replay computes whatever groups the device's ``offsets`` hold then.

    Parameters
    ----------
    input : torch.Tensor
        CUDA tensor ``[L, K]`` (float16 or bfloat16), K contiguous: the groups' rows, concatenated.
        Rows whose stride is not a multiple of 16 bytes (K % 8 != 0 when contiguous) are copied first.
    weight : torch.Tensor
        ``[G, N, K]``, one ``nn.Linear`` weight per group, same dtype and device, K contiguous; G >= 1.
    offsets : torch.Tensor
        ``[G]`` int32 on the same device: the end row of each group (cumulative; group g is rows
        ``offsets[g-1]:offsets[g]``, the first starting at 0). Groups may be empty. Must be non-decreasing
        and at most L; the device clamps offsets that are not and flags them (module docstring), and rows
        past ``offsets[-1]`` are left as they are.
    bias : torch.Tensor, optional
        ``[G, N]``, one bias per group, same dtype and device.
    out : torch.Tensor, optional
        Destination ``[L, N]``; must not share memory with another argument.

    Returns
    -------
    torch.Tensor
        ``out``; allocated ``[L, N]``, contiguous when ``N % 8 == 0``, otherwise a view whose rows are padded
        to 16 bytes.

    Raises
    ------
    TypeError
        Non-tensor arguments, float32 or other unsupported dtypes, ``offsets`` not int32, ``weight``/``bias``/
        ``out`` of another dtype.
    ValueError
        Shapes other than ``[L, K]``, ``[G, N, K]``, ``[G]``, ``[G, N]`` and ``[L, N]``, K not contiguous,
        tensors not on one CUDA device, a GPU other than sm90 (H100/H200), ``out`` overlapping another
        argument, a tensor that requires grad while grad mode is on, or an earlier call whose offsets the
        device had to clamp.
    """


def group_gemm_check() -> None:
    """Wait for the device, then raise the ValueError of any group_gemm call since the last check whose
    ``offsets`` the device had to clamp (decreasing, negative or past L); return None when there was none.

    ``group_gemm`` itself reports such a call at its next call, without waiting; call this after a
    CUDA graph replay, or where an error should surface at once.
    """
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    _raise_flagged("a call since the last check")
