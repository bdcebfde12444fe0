"""Argument checks of the public ops: raised before any launch, naming the argument.

Each op checks its arguments in one function (``_check_<op>`` in its module), in one order:
every tensor's type, dtype and shape, and the scalars, first (so those errors are the same
on any machine), then devices: ``input`` on a CUDA GPU whose compute capability the op's
family supports (:func:`check_device`, looked up once per device), every other tensor on
``input``'s device. The CUDA launchers in ``csrc/`` check nothing a user can get wrong.

After the devices, memory: a written tensor (``out``, ``residual_out``) must not share memory
with ``input`` (``residual``, the other output), except the exact aliasing an op documents (in
place: ``out`` is ``input``), and must not overlap itself, as PyTorch refuses these patterns
(:func:`check_out`, :func:`check_outs`; only when an output is given, and a few pointer
comparisons when nothing overlaps). Byte ranges, first to last byte, are compared, so column
slices of one buffer (``buf[:, :C]`` and ``buf[:, C:]``) count as overlapping. Then autograd:
no tensor may require grad while grad mode is on, since the ops have no backward
(:func:`requires_grad`).

A call costs a few microseconds, so an op tests each condition inline (an attribute read
is about 40 ns) and calls the helpers below only to word the error it raises.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch._subclasses.fake_tensor import FakeTensor

from .jit.families import Family

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FLOATS = frozenset(FLOAT_DTYPES)
"""The same, for a membership test (twice as fast as the tuple's)."""


def _names(dtypes: Sequence[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def bad_input(op: str, value: object, dtypes: Sequence[torch.dtype] = FLOAT_DTYPES) -> TypeError:
    """``input`` is not a tensor, or not of one of ``dtypes``."""
    if not isinstance(value, torch.Tensor):
        return TypeError(f"oasr.{op}: `input` must be a torch.Tensor, got {type(value).__name__}")
    return TypeError(f"oasr.{op}: `input` has dtype {value.dtype}; supported: {_names(dtypes)}")


HALF_DTYPES = (torch.float16, torch.bfloat16)
"""What the tensor-core families (gemm, bmm) take."""


def bad_half_input(op: str, value: object, kernels: str, fp32_advice: str) -> TypeError:
    """``input`` is not a float16/bfloat16 tensor; a float32 one gets ``fp32_advice`` (how to cast, or what to use)."""
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
        return TypeError(
            f"oasr.{op}: `input` is float32, but the {kernels} kernels take float16 or bfloat16 (fp32 accumulation); "
            f"{fp32_advice}"
        )
    return bad_input(op, value, HALF_DTYPES)


def bad_tensor(
    op: str, name: str, value: object, dtype: torch.dtype, shape: Sequence[int], *, like: str = "input"
) -> Exception:
    """``name`` is not a tensor of ``like``'s (``input``'s) ``dtype`` and of ``shape``."""
    if not isinstance(value, torch.Tensor):
        return TypeError(f"oasr.{op}: `{name}` must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype != dtype:
        return TypeError(f"oasr.{op}: `{name}` has dtype {value.dtype}, expected {dtype} (the dtype of `{like}`)")
    return ValueError(f"oasr.{op}: `{name}` has shape {tuple(value.shape)}, expected {tuple(shape)}")


def check_k_contiguous(op: str, **tensors: Tensor) -> None:
    """ValueError unless each named tensor's last dimension (K, what the tensor cores reduce over) is
    contiguous: the kernels load K-major rows."""
    for name, t in tensors.items():
        if t.shape[-1] > 1 and t.stride(-1) != 1:
            raise ValueError(
                f"oasr.{op}: `{name}`'s last dimension (K) must be contiguous (stride 1, got {t.stride(-1)}); "
                f"pass `{name}.contiguous()`"
            )


def check_real_scalar(op: str, name: str, value: object) -> float:
    """``value`` as a float; TypeError naming ``name`` unless it is a real number (bool is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"oasr.{op}: `{name}` must be a real number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int beyond 1.8e308 (its digits may be too many to print)
        raise ValueError(
            f"oasr.{op}: `{name}` is too large for a float (an integer of {value.bit_length()} bits; "
            f"floats end at 1.8e308)"
        ) from None


def other_device(op: str, name: str, tensor: torch.Tensor, device: torch.device, *, like: str = "input") -> ValueError:
    """``name`` is not on ``like``'s (``input``'s) device."""
    return ValueError(f"oasr.{op}: `{name}` is on {tensor.device}, expected {device} (the device of `{like}`)")


# Devices each family's kernels were found to run on: {family name: {torch.device}}. A hit
# costs one set lookup; forget_devices() empties them (tests that fake a GPU).
_READY: dict[str, set[torch.device]] = {}


def ready_devices(family: Family) -> set[torch.device]:
    """The set of devices :func:`check_device` accepted for ``family`` (an op tests membership first)."""
    return _READY.setdefault(family.name, set())


def forget_devices() -> None:
    """Check every device again on its next call (after :func:`compute_capability` changed)."""
    for devices in _READY.values():
        devices.clear()


def compute_capability(device: torch.device) -> tuple[int, int]:
    """(major, minor) compute capability of a CUDA device."""
    return torch.cuda.get_device_capability(device)


def check_device(op: str, family: Family, device: torch.device, *, name: str = "input") -> None:
    """``name``'s (``input``'s) ``device`` must be a CUDA GPU of a compute capability in ``family.capabilities``.

    Remembered for ``family`` once it passes, so later calls on the device cost a set lookup.
    """
    if device.type != "cuda":
        hint = "" if torch.cuda.is_available() else " (this machine has no CUDA GPU)"
        raise ValueError(
            f"oasr.{op}: `{name}` is on {device}, but Oasr kernels run on CUDA tensors{hint}; "
            f"move it with `{name}.cuda()`."
        )
    major, minor = compute_capability(device)
    if major * 10 + minor not in family.capabilities:
        listed = ", ".join(f"{cc // 10}.{cc % 10}" for cc in sorted(family.capabilities))
        raise ValueError(
            f"oasr.{op}: `{name}` is on {device}, a GPU of compute capability {major}.{minor}, "
            f"but the {family.name} kernels run only on compute capability {listed}."
        )
    ready_devices(family).add(device)


# ---------------------------------------------------------------------------
# Memory: overlapping tensors (shared by every op; conv1d uses overlaps())
# ---------------------------------------------------------------------------


def _span(t: Tensor) -> int:
    """Bytes from ``t.data_ptr()`` to one past the last byte ``t`` addresses (0 when empty; strides >= 0)."""
    if t.is_contiguous():
        return t.nbytes
    if t.numel() == 0:
        return 0
    last = 0
    for size, stride in zip(t.shape, t.stride(), strict=True):  # (a loop: half a generator's time)
        last += (size - 1) * stride
    return (last + 1) * t.itemsize


def extent(t: Tensor) -> tuple[int, int]:
    """[first byte, one past the last byte) of the memory ``t`` addresses; (p, p) when empty."""
    start = t.data_ptr()
    return start, start + _span(t)


def overlaps(a: Tensor, b: Tensor) -> bool:
    """Whether the memory ranges of ``a`` and ``b`` intersect (never for fake tensors, which address none).

    Ranges, not elements: interleaved views (``x[:, ::2]`` and ``x[:, 1::2]``) count as overlapping.
    """
    if isinstance(a, FakeTensor) or isinstance(b, FakeTensor):
        return False
    (a0, a1), (b0, b1) = extent(a), extent(b)
    return a0 < a1 and b0 < b1 and a0 < b1 and b0 < a1


def overlaps_itself(t: Tensor) -> bool:
    """Whether two elements of ``t`` may share memory (a stride-0 or overlapping view such as ``expand``).

    Sufficient test for the contrary: sorted by stride, each dimension's stride exceeds the offsets the
    smaller ones reach. Contiguous tensors never overlap themselves; callers test that first.
    """
    reach = 0
    for stride, size in sorted((stride, size) for size, stride in zip(t.shape, t.stride(), strict=True) if size > 1):
        if stride <= reach:
            return True
        reach += (size - 1) * stride
    return False


def _disjoint_span(t: Tensor) -> int | None:
    """:func:`_span` of a non-contiguous ``t`` whose elements cannot share memory, None when they may
    (:func:`overlaps_itself`). One pass, innermost dimension first, when the strides grow outwards (row-padded
    views: the usual case); the sorted test otherwise."""
    shape, strides = t.shape, t.stride()
    reach = 0
    for i in range(len(shape) - 1, -1, -1):
        size = shape[i]
        if size > 1:
            stride = strides[i]
            if stride <= reach:
                return None if overlaps_itself(t) else _span(t)
            reach += (size - 1) * stride
    return (reach + 1) * t.itemsize if t.numel() else 0


def _internal(op: str, name: str, out: Tensor) -> ValueError:
    return ValueError(
        f"oasr.{op}: `{name}` has elements that share memory (strides {out.stride()} for shape "
        f"{tuple(out.shape)}, e.g. an `expand`ed view); pass a tensor with one element per address"
    )


def check_out(op: str, name: str, out: Tensor, source_name: str, source: Tensor, may_alias: bool) -> None:
    """``out`` (written) must not overlap itself nor share memory with ``source`` (read).

    With ``may_alias``, ``source`` may be exactly ``out`` (same start, shape and strides: in
    place); any other shared memory is a ValueError naming both arguments. Cheap when they do
    not overlap: two pointers, then the size of the one that starts lower. Fake tensors are skipped.
    """
    if type(out) is FakeTensor:
        return
    start = out.data_ptr()
    at = source.data_ptr()
    if out.is_contiguous():
        if at > start:
            if at >= start + out.nbytes:
                return
        elif at < start and at + (source.nbytes if source.is_contiguous() else _span(source)) <= start:
            return
    else:
        span = _disjoint_span(out)
        if span is None:
            raise _internal(op, name, out)
        if at > start:
            if at >= start + span:
                return
        elif at < start and at + _span(source) <= start:
            return
    _shared(op, name, out, source_name, source, may_alias)


def check_out_disjoint(op: str, name: str, out: Tensor, *sources: tuple[str, Tensor | None]) -> None:
    """:func:`check_out` (no aliasing) against each ``(name, tensor)`` of ``sources`` that is not None, ``out``'s
    range read once. (check_out stays a single pass of its own: most ops call it once per call.)"""
    if type(out) is FakeTensor:
        return
    start = out.data_ptr()
    if out.is_contiguous():
        end = start + out.nbytes
    elif (span := _disjoint_span(out)) is None:
        raise _internal(op, name, out)
    else:
        end = start + span
    for source_name, source in sources:
        if source is None:
            continue
        at = source.data_ptr()
        if at >= end or (at < start and at + _span(source) <= start):  # (an empty out ends where it starts)
            continue
        _shared(op, name, out, source_name, source, False)


def check_input_out(
    op: str, family: Family, ready: set[torch.device], input: Tensor, out: Tensor | None, may_alias: bool
) -> None:
    """The checks after types and shapes of an op with one input and one ``out``: the device
    (``ready``: the family's :func:`ready_devices`), ``out``'s device and memory (as
    :func:`check_out`), then autograd."""
    device = input.device
    if device not in ready:
        check_device(op, family, device)
    if out is not None:
        if out.device != device:
            raise other_device(op, "out", out, device)
        if out is not input:  # (in place: nothing to compare)
            check_out(op, "out", out, "input", input, may_alias)
    if torch.is_grad_enabled() and (input.requires_grad or (out is not None and out.requires_grad)):
        raise requires_grad(op, ("input", "out"), (input, out))


def check_outs(
    op: str, out: Tensor | None, residual_out: Tensor | None, input: Tensor, residual: Tensor | None
) -> None:
    """The norms' outputs (either may be None; all four tensors have one shape and dtype), as :func:`check_out`.

    ``out`` and ``residual_out`` may each be exactly ``input`` or ``residual`` (in place), never
    each other, and share no other memory with any of them; neither may overlap itself. Each
    range is read once (a pointer and a contiguity test), and not again for an output that is
    ``input`` or ``residual``. (Written out long-hand: this runs on every call with an output.)
    """
    if type(input) is FakeTensor:
        return
    nbytes = input.nbytes  # the same for the four
    if nbytes == 0:
        return
    p_in = input.data_ptr()
    c_in = input.is_contiguous()
    e_in = p_in + (nbytes if c_in else _span(input))
    p_res = e_res = 0
    c_res = True
    if residual is not None:
        p_res = residual.data_ptr()
        c_res = residual.is_contiguous()
        e_res = p_res + (nbytes if c_res else _span(residual))
    written = []  # (name, tensor, start, end) of the outputs checked so far
    for name, t in (("out", out), ("residual_out", residual_out)):
        if t is None:
            continue
        if t is input:
            p, e, contiguous = p_in, e_in, c_in
        elif t is residual:
            p, e, contiguous = p_res, e_res, c_res
        else:
            p = t.data_ptr()
            contiguous = t.is_contiguous()
            e = p + (nbytes if contiguous else _span(t))
        if not contiguous and overlaps_itself(t):
            raise _internal(op, name, t)
        if t is not input and p_in < e and p < e_in:
            _shared(op, name, t, "input", input, True)
        if residual is not None and t is not residual and p_res < e and p < e_res:
            _shared(op, name, t, "residual", residual, True)
        for other_name, other, q, f in written:
            if q < e and p < f:
                _shared(op, name, t, other_name, other, False)
        written.append((name, t, p, e))


def _shared(op: str, name: str, out: Tensor, source_name: str, source: Tensor, may_alias: bool) -> None:
    """``out``'s and ``source``'s byte ranges intersect: allowed when either is empty or for an allowed exact alias."""
    if source.numel() == 0 or out.numel() == 0:
        return
    if source.data_ptr() == out.data_ptr() and source.shape == out.shape and source.stride() == out.stride():
        if may_alias:
            return
        raise ValueError(
            f"oasr.{op}: `{name}` and `{source_name}` must be different tensors (they are the same memory)"
        )
    hint = f"it may be `{source_name}` itself (in place) but must not" if may_alias else "they must not"
    raise ValueError(
        f"oasr.{op}: `{name}` overlaps `{source_name}` in memory (a shifted or overlapping view); "
        f"{hint} otherwise share memory"
    )


def requires_grad(op: str, names: tuple[str, ...], tensors: tuple[Tensor | None, ...]) -> ValueError:
    """The first of ``tensors`` that requires grad (grad mode is on): the ops have no backward."""
    name = next(n for n, t in zip(names, tensors, strict=True) if t is not None and t.requires_grad)
    return ValueError(
        f"oasr.{op}: `{name}` requires grad, but Oasr ops have no backward (the result would have no "
        f"grad_fn); call it under `torch.no_grad()` or `torch.inference_mode()`, or pass `{name}.detach()`"
    )
