"""Argument checks of the public ops: raised before any launch, naming the argument.

Each op checks its arguments in one function (``_check_<op>`` in its module, the ``check`` of its
declaration, ``oasr/_op.py``), in one order: every tensor's type, dtype and shape, and the scalars, first
(so those errors are the same on any machine), then :func:`check_placement`: dense tensors, ``input`` on
a CUDA GPU whose compute capability the op's family supports (:func:`check_device`, looked up once per
device), every other tensor on ``input``'s device; memory: a written tensor (``out``, ``residual_out``, a
state) must not share memory with a read one or another written one, except the exact aliasing an op
documents (in place: ``out`` is ``input``), and must not overlap itself, as PyTorch refuses these
patterns. Byte ranges, first to last byte, are compared, so column slices of one buffer (``buf[:, :C]``
and ``buf[:, C:]``) count as overlapping. Then autograd: no tensor may require grad while grad mode is
on, since the ops have no backward. The CUDA launchers in ``csrc/`` check nothing a user can get wrong.

A call costs a few microseconds, so the checks test each condition inline (an attribute read is about
40 ns) and call the helpers below only to word the error they raise.
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


def dtype_names(dtypes: Sequence[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def bad_input(op: str, value: object, dtypes: Sequence[torch.dtype] = FLOAT_DTYPES, name: str = "input") -> TypeError:
    """The op's first tensor (``name``) is not a tensor, or not of one of ``dtypes``."""
    if not isinstance(value, torch.Tensor):
        return TypeError(f"oasr.{op}: `{name}` must be a torch.Tensor, got {type(value).__name__}")
    return TypeError(f"oasr.{op}: `{name}` has dtype {value.dtype}; supported: {dtype_names(dtypes)}")


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
    op: str, name: str, value: object, dtype: torch.dtype, shape: Sequence[int], first: str = "input"
) -> Exception:
    """``name`` is not a tensor of the op's first tensor's (``first``) ``dtype`` and of ``shape``."""
    if not isinstance(value, torch.Tensor):
        return TypeError(f"oasr.{op}: `{name}` must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype != dtype:
        return TypeError(f"oasr.{op}: `{name}` has dtype {value.dtype}, expected {dtype} (the dtype of `{first}`)")
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


def other_device(op: str, name: str, tensor: torch.Tensor, device: torch.device, first: str = "input") -> ValueError:
    """``name`` is not on the device of the op's first tensor (``first``)."""
    return ValueError(f"oasr.{op}: `{name}` is on {tensor.device}, expected {device} (the device of `{first}`)")


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


def check_device(op: str, family: Family, device: torch.device, name: str = "input") -> None:
    """The op's first tensor's (``name``) ``device`` must be a CUDA GPU of a compute capability in
    ``family.capabilities``.

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


def requires_grad(op: str, name: str) -> ValueError:
    """``name`` requires grad while grad mode is on: the ops have no backward."""
    return ValueError(
        f"oasr.{op}: `{name}` requires grad, but Oasr ops have no backward (the result would have no "
        f"grad_fn); call it under `torch.no_grad()` or `torch.inference_mode()`, or pass `{name}.detach()`"
    )


# ---------------------------------------------------------------------------
# After types and shapes: devices, memory, autograd (one function for every op)
# ---------------------------------------------------------------------------

Named = tuple[str, "Tensor | None"]


def check_placement(
    op: str,
    family: Family,
    ready: set[torch.device],
    reads: tuple[Named, ...],
    writes: tuple[Named, ...] = (),
    in_place: tuple[str, ...] = (),
) -> None:
    """The checks after types and shapes: dense tensors on one supported device, memory, autograd.

    ``reads`` are the tensors read, ``input`` first (its device is the op's); ``writes`` those written
    (``out``, ``residual_out``, a state updated in place); None entries are absent arguments. A written
    tensor must not overlap itself, another written one, or a read one, except that it may be exactly
    (same memory, shape and strides) a read named in ``in_place``.
    """
    first, input = reads[0]
    if input.layout is not _STRIDED:
        raise _not_dense(op, first, input)
    device = input.device
    if device not in ready:  # (a first call on the device: every tensor's layout before the device's verdict)
        for named in (reads, writes):
            for name, t in named:
                if t is not None and t.layout is not _STRIDED:
                    raise _not_dense(op, name, t)
        check_device(op, family, device, first)
    for name, t in reads[1:]:
        if t is not None and (t.layout is not _STRIDED or t.device != device):
            raise _not_dense(op, name, t) if t.layout is not _STRIDED else other_device(op, name, t, device, first)
    written = False
    for name, t in writes:
        if t is not None:
            written = True
            if t is not input and (t.layout is not _STRIDED or t.device != device):
                raise _not_dense(op, name, t) if t.layout is not _STRIDED else other_device(op, name, t, device, first)
    if written:
        _check_memory(op, reads, writes, in_place)
    if torch.is_grad_enabled():
        for named in (reads, writes):
            for name, t in named:
                if t is not None and t.requires_grad:
                    raise requires_grad(op, name)


def _not_dense(op: str, name: str, t: Tensor) -> TypeError:
    return TypeError(
        f"oasr.{op}: `{name}` is a {t.layout} tensor; Oasr kernels take dense tensors (`{name}.to_dense()`)"
    )


_STRIDED = torch.strided


def _check_memory(op: str, reads: tuple[Named, ...], writes: tuple[Named, ...], in_place: tuple[str, ...]) -> None:
    """:func:`check_placement`'s memory rule. Each written range is read once; a read's end only when it starts
    below a written range (two pointers decide the usual, disjoint case)."""
    if type(reads[0][1]) is FakeTensor:
        return
    written: list[tuple[str, Tensor, int, int]] = []
    for name, w in writes:
        if w is None:
            continue
        start = w.data_ptr()
        if w.is_contiguous():
            end = start + w.nbytes
        elif (span := _disjoint_span(w)) is None:
            raise _internal(op, name, w)
        else:
            end = start + span
        for read_name, r in reads:
            if r is None or (r is w and read_name in in_place):
                continue
            at = r.data_ptr()
            if at >= end or (at < start and at + _span(r) <= start):  # (an empty `w` ends where it starts)
                continue
            _shared(op, name, w, read_name, r, read_name in in_place)
        for other_name, other, other_start, other_end in written:
            if other_start < end and start < other_end:
                _shared(op, name, w, other_name, other, False)
        written.append((name, w, start, end))


def check_activation(op: str, activation: object, names: tuple[str | None, ...]) -> None:
    """``activation`` is None or one of ``names`` (each family's kernels take the names and map them once)."""
    if activation is not None and not isinstance(activation, str):
        raise TypeError(f"oasr.{op}: `activation` must be None or a string, got {type(activation).__name__}")
    if activation not in names:
        raise ValueError(f"oasr.{op}: unknown `activation` {activation!r}; choose from {', '.join(map(repr, names))}")


def check_pair(
    op: str, name: str, value: object, minimum: int, parts: str, maximum: int = 2**31 - 1
) -> tuple[int, int]:
    """An int or a pair of ints (``parts`` names them: "(left, right)"), each in [``minimum``, ``maximum``]."""
    if isinstance(value, int) and not isinstance(value, bool):
        pair = (value, value)
    elif (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        pair = (int(value[0]), int(value[1]))
    else:
        raise TypeError(f"oasr.{op}: `{name}` must be an int or a pair {parts} of ints, got {value!r}")
    if min(pair) < minimum:
        raise ValueError(f"oasr.{op}: `{name}` must be >= {minimum}, got {value!r}")
    if max(pair) > maximum:
        raise ValueError(f"oasr.{op}: `{name}` must be at most {maximum}, got {value!r}")
    return pair
