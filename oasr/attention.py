"""Attention per batch row and head, and the Conformer's relative-position form, fused in one kernel.

``q``, ``k``, ``v`` are ``[B, T, H, D]`` tensors of float16 or bfloat16 with D (64 or 128) contiguous and any
other strides: the three views ``qkv[:, :, 0]``, ``qkv[:, :, 1]``, ``qkv[:, :, 2]`` of a packed QKV projection
``[B, T, 3, H, D]`` are read in place. Math is fp32; the output ``[B, T, H, D]`` (``out.view(B, T, H * D)`` feeds
the output projection) is rounded once. The key-length mask (``lengths``, int32 on the device: no host sync) and the
streaming chunk mask (``chunk_size``, ``left_chunks``) are computed in the kernel, and key blocks they hide are
skipped. A query row with no valid key gives zeros.

Arguments are checked before any launch (:func:`_check_attention`, :func:`_check_rel_pos_attention`): types,
dtypes and shapes first, then devices, then memory and autograd (``oasr/_checks.py``). Under ``torch.compile`` each
op is the custom op ``torch.ops.oasr.<op>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ._checks import HALF_DTYPES, bad_tensor, check_placement, check_real_scalar, ready_devices
from ._op import op
from ._tma import addressable, addressable_copy
from .jit.families import ATTENTION

HEAD_DIMS = (64, 128)
"""The head sizes the kernels take."""
QUERY_BLOCK = 64
"""The fewest queries per thread block (include/oasr/attention.cuh's Bm, 64 or 128): at most B * H * ceil(T / 64)
blocks a launch."""
MAX_FRAMES = 2**29 - 1
"""The longest T (the kernel forms 2T - 1 and chunk bounds near 2T in int32)."""

_READY = ready_devices(ATTENTION)
_INT32 = torch.int32


def _check_heads(name: str, q: object, k: object, v: object) -> tuple[int, int, int, int]:
    """q, k, v: [B, T, H, D] of one half dtype, D in HEAD_DIMS and contiguous, T and the grid in range."""
    if not isinstance(q, Tensor):
        raise TypeError(f"oasr.{name}: `q` must be a torch.Tensor, got {type(q).__name__}")
    if q.dtype not in HALF_DTYPES:
        raise TypeError(
            f"oasr.{name}: `q` has dtype {q.dtype}; the attention kernels take float16 or bfloat16 (fp32 "
            f"accumulation): cast q, k and v (and p and the biases) with `.bfloat16()`"
        )
    if q.dim() != 4:
        raise ValueError(f"oasr.{name}: `q` must be 4-D [B, T, H, D], got shape {tuple(q.shape)}")
    batch, time, heads, head_dim = q.shape
    if head_dim not in HEAD_DIMS:
        raise ValueError(
            f"oasr.{name}: head size D = {head_dim} (q.shape[3]) is not supported; the kernels take 64 or 128"
        )
    for arg, t in (("k", k), ("v", v)):
        if not (isinstance(t, Tensor) and t.dtype == q.dtype and t.shape == q.shape):
            raise bad_tensor(name, arg, t, q.dtype, q.shape, first="q")
    if time > MAX_FRAMES:
        raise ValueError(f"oasr.{name}: T = {time} frames is more than the kernels take ({MAX_FRAMES})")
    if batch * heads * -(-time // QUERY_BLOCK) > 2**31 - 1:
        raise ValueError(
            f"oasr.{name}: B * H * ceil(T / {QUERY_BLOCK}) = {batch * heads * -(-time // QUERY_BLOCK)} thread blocks "
            f"is more than one launch takes (2^31 - 1); split the batch"
        )
    return batch, time, heads, head_dim


def _check_contiguous_d(name: str, **tensors: Tensor) -> None:
    """Each tensor's last dimension (D) is contiguous: the kernels copy rows of D in 16-byte pieces."""
    for arg, t in tensors.items():
        if t.stride(-1) != 1:
            raise ValueError(
                f"oasr.{name}: `{arg}`'s last dimension (D) must be contiguous (stride 1, got {t.stride(-1)}); "
                f"pass `{arg}.contiguous()`"
            )


def _check_options(
    name: str, batch: int, lengths: object, scale: object, chunk_size: object, left_chunks: object
) -> None:
    """lengths (int32 [B]), scale (finite, > 0), chunk_size (>= 1), left_chunks (needs chunk_size): types, values."""
    if lengths is not None:
        if not isinstance(lengths, Tensor):
            raise TypeError(f"oasr.{name}: `lengths` must be a torch.Tensor or None, got {type(lengths).__name__}")
        if lengths.dtype != _INT32:
            raise TypeError(
                f"oasr.{name}: `lengths` has dtype {lengths.dtype}; expected torch.int32 (valid frames per batch "
                f"row): pass `lengths.int()`"
            )
        if lengths.shape != (batch,):
            raise ValueError(f"oasr.{name}: `lengths` has shape {tuple(lengths.shape)}, expected ({batch},) ([B])")
    if scale is not None:
        value = scale if type(scale) is float else check_real_scalar(name, "scale", scale)
        if not (0.0 < value < math.inf):
            raise ValueError(f"oasr.{name}: `scale` must be finite and > 0, got {value}")
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise TypeError(f"oasr.{name}: `chunk_size` must be an int or None, got {type(chunk_size).__name__}")
        if chunk_size < 1:
            raise ValueError(f"oasr.{name}: `chunk_size` must be >= 1 frames, got {chunk_size}")
    if left_chunks is not None:
        if isinstance(left_chunks, bool) or not isinstance(left_chunks, int):
            raise TypeError(f"oasr.{name}: `left_chunks` must be an int or None, got {type(left_chunks).__name__}")
        if chunk_size is None:
            raise ValueError(f"oasr.{name}: `left_chunks` needs `chunk_size` (the chunk mask's chunk, in frames)")


def _check_out(name: str, out: object, q: Tensor) -> None:
    if out is not None and not (isinstance(out, Tensor) and out.dtype == q.dtype and out.shape == q.shape):
        raise bad_tensor(name, "out", out, q.dtype, q.shape, first="q")


def _check_lengths_device(name: str, q: Tensor, lengths: Tensor | None) -> None:
    """``lengths`` on q's GPU, said with why (check_placement, after this, words the other device errors)."""
    if lengths is not None and q.device.type == "cuda" and lengths.device != q.device:
        raise ValueError(
            f"oasr.{name}: `lengths` is on {lengths.device}, expected {q.device} (the device of `q`): the kernel "
            f"reads it there, with no host sync; pass `lengths.to({str(q.device)!r})`"
        )


def _check_attention(
    q: object,
    k: object,
    v: object,
    lengths: object,
    scale: object,
    chunk_size: object,
    left_chunks: object,
    out: object,
) -> torch.Size:
    """Every argument of :func:`attention`, in order; the shape of ``out`` (contiguous, q's dtype and device)."""
    batch, _, _, _ = _check_heads("attention", q, k, v)
    _check_options("attention", batch, lengths, scale, chunk_size, left_chunks)
    _check_out("attention", out, q)
    _check_contiguous_d("attention", q=q, k=k, v=v)
    _check_lengths_device("attention", q, lengths)
    reads = (("q", q), ("k", k), ("v", v), ("lengths", lengths))
    check_placement("attention", ATTENTION, _READY, reads, (("out", out),))
    return q.shape


def _check_rel_pos_attention(
    q: object,
    k: object,
    v: object,
    p: object,
    pos_bias_u: object,
    pos_bias_v: object,
    lengths: object,
    shift: object,
    scale: object,
    chunk_size: object,
    left_chunks: object,
    out: object,
) -> torch.Size:
    """Every argument of :func:`rel_pos_attention`, in order; the shape of ``out`` (contiguous, q's dtype, device)."""
    name = "rel_pos_attention"
    batch, time, heads, head_dim = _check_heads(name, q, k, v)
    if not isinstance(shift, bool):
        raise TypeError(f"oasr.{name}: `shift` must be a bool, got {type(shift).__name__}")
    rows = max(2 * time - 1, 0) if shift else time
    if not (isinstance(p, Tensor) and p.dtype == q.dtype and p.dim() == 3):
        if isinstance(p, Tensor) and p.dtype == q.dtype:
            raise ValueError(f"oasr.{name}: `p` must be 3-D [P, H, D], got shape {tuple(p.shape)}")
        raise bad_tensor(name, "p", p, q.dtype, (rows, heads, head_dim), first="q")
    if p.shape != (rows, heads, head_dim):
        what = (
            f"the 2T - 1 = {rows} relative positions T - 1 .. -(T - 1) of shift=True (ESPnet)"
            if shift
            else f"the T = {rows} positions of shift=False (WeNet's unshifted form)"
        )
        short = " (too short for T)" if p.shape[0] < rows else ""
        raise ValueError(
            f"oasr.{name}: `p` has shape {tuple(p.shape)}{short}, expected {(rows, heads, head_dim)}: {what}, "
            f"for q's T = {time}, H = {heads}, D = {head_dim}"
        )
    for arg, bias in (("pos_bias_u", pos_bias_u), ("pos_bias_v", pos_bias_v)):
        if not (isinstance(bias, Tensor) and bias.dtype == q.dtype and bias.shape == (heads, head_dim)):
            raise bad_tensor(name, arg, bias, q.dtype, (heads, head_dim), first="q")
    _check_options(name, batch, lengths, scale, chunk_size, left_chunks)
    _check_out(name, out, q)
    _check_contiguous_d(name, q=q, k=k, v=v, p=p, pos_bias_u=pos_bias_u, pos_bias_v=pos_bias_v)
    _check_lengths_device(name, q, lengths)
    reads = (("q", q), ("k", k), ("v", v), ("p", p), ("pos_bias_u", pos_bias_u), ("pos_bias_v", pos_bias_v))
    check_placement(name, ATTENTION, _READY, (*reads, ("lengths", lengths)), (("out", out),))
    return q.shape


def _options(q: Tensor, scale: float | None, chunk_size: int | None, left_chunks: int | None) -> tuple:
    """The launchers' scale (default 1 / sqrt(D)), chunk (0: none) and left chunks (-1: all)."""
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)
    return scale, chunk_size or 0, -1 if left_chunks is None else left_chunks


def _run(
    launcher: Callable[[object], Callable[..., None]],
    out: Tensor,
    tensors: tuple,
    lengths: Tensor | None,
    options: tuple,
) -> None:
    """``launcher(module)`` into ``out`` on views of ``tensors`` the kernel copies in 16-byte pieces (copies of the
    others), or into a fresh tensor copied to an ``out`` whose layout it cannot store."""
    if out.numel() == 0:
        return
    target = out if addressable(out) else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    contiguous_lengths = None if lengths is None else lengths.contiguous()
    launcher(ATTENTION.module())(target, *map(addressable_copy, tensors), contiguous_lengths, *options)
    if target is not out:
        out.copy_(target)


def _launch_attention(
    out: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    lengths: Tensor | None,
    scale: float | None,
    chunk_size: int | None,
    left_chunks: int | None,
) -> None:
    _run(lambda m: m.attention, out, (q, k, v), lengths, _options(q, scale, chunk_size, left_chunks))


def _launch_rel_pos_attention(
    out: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    p: Tensor,
    pos_bias_u: Tensor,
    pos_bias_v: Tensor,
    lengths: Tensor | None,
    shift: bool,
    scale: float | None,
    chunk_size: int | None,
    left_chunks: int | None,
) -> None:
    tensors = (q, k, v, p, pos_bias_u, pos_bias_v)
    options = (shift, *_options(q, scale, chunk_size, left_chunks))
    _run(lambda m: m.rel_pos_attention, out, tensors, lengths, options)


@op(check=_check_attention, launch=_launch_attention)
def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    lengths: Tensor | None = None,
    scale: float | None = None,
    chunk_size: int | None = None,
    left_chunks: int | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """Softmax attention per batch row and head: ``softmax(q k^T * scale + mask) v``.

    As ``F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask,
    scale=scale).transpose(1, 2)``, with the mask computed in the kernel from ``lengths`` and the chunk size.

    Parameters
    ----------
    q, k, v : torch.Tensor
        CUDA tensors ``[B, T, H, D]`` of float16 or bfloat16 (all three one dtype), D = 64 or 128. The last
        dimension must be contiguous; other strides are free (views of a packed ``[B, T, 3, H, D]`` QKV are read
        in place; strides or a start that are not multiples of 16 bytes cost a copy).
    lengths : torch.Tensor, optional
        int32 ``[B]`` on the same device: the valid frames of each batch row (clamped to [0, T]). Keys at or past
        a row's length are masked; every query row is computed (padded ones over the valid keys, as ESPnet does).
    scale : float, optional
        Multiplies the scores; finite and > 0. Default ``1 / sqrt(D)``.
    chunk_size : int, optional
        The streaming (U2/U2++) chunk mask, in frames (>= 1): query i sees keys from
        ``max((i // chunk_size - left_chunks) * chunk_size, 0)`` to ``(i // chunk_size + 1) * chunk_size - 1``.
    left_chunks : int, optional
        Chunks left of a query's own chunk that it sees; ``< 0`` or None: all of them. Needs ``chunk_size``.
    out : torch.Tensor, optional
        Destination ``[B, T, H, D]`` of q's dtype and device; must not share memory with any input.

    Returns
    -------
    torch.Tensor
        ``out``, allocated contiguous ``[B, T, H, D]`` when not given. A query row with no valid key is zeros.

    Raises
    ------
    TypeError
        A non-tensor, or a dtype other than float16/bfloat16 (or one that differs from q's); ``lengths`` not int32;
        a non-numeric ``scale``, a non-int ``chunk_size`` or ``left_chunks``.
    ValueError
        Shapes that are not q's ``[B, T, H, D]``, D not 64 or 128, a D that is not contiguous, ``lengths`` not
        ``[B]`` or not on q's device, ``scale`` not finite and > 0, ``chunk_size < 1``, ``left_chunks`` without
        ``chunk_size``; tensors not on one CUDA device of a supported GPU; ``out`` overlapping an input or itself;
        a tensor that requires grad while grad mode is on (the ops have no backward).
    """


@op(check=_check_rel_pos_attention, launch=_launch_rel_pos_attention)
def rel_pos_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    p: Tensor,
    pos_bias_u: Tensor,
    pos_bias_v: Tensor,
    lengths: Tensor | None = None,
    shift: bool = True,
    scale: float | None = None,
    chunk_size: int | None = None,
    left_chunks: int | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """Relative-position attention of ESPnet, NeMo and WeNet Conformers (``RelPositionMultiHeadedAttention``).

    ``scores = ((q + pos_bias_u) k^T + bd) * scale``, masked as :func:`attention`, then ``softmax(scores) v``, where

    - ``shift=True`` (ESPnet's ``rel_pos``, NeMo): ``bd = rel_shift((q + pos_bias_v) p^T)``, i.e.
      ``bd[i, j] = (q_i + pos_bias_v) . p[T - 1 - i + j]``: row r of p is the relative position T - 1 - r (p holds
      the 2T - 1 positions T - 1, ..., 0, ..., -(T - 1));
    - ``shift=False`` (WeNet's legacy form): ``bd = (q + pos_bias_v) p^T`` with p's T rows as a second key.

    ``q + pos_bias_u`` and ``q + pos_bias_v`` are rounded to the storage dtype, as torch's add rounds them.

    Parameters
    ----------
    q, k, v : torch.Tensor
        ``[B, T, H, D]`` as for :func:`attention`.
    p : torch.Tensor
        The projected positional embedding ``linear_pos(pos_emb)`` as ``[P, H, D]`` (shared by the batch), q's dtype
        and device, D contiguous: P = 2T - 1 with ``shift=True``, P = T with ``shift=False``.
    pos_bias_u, pos_bias_v : torch.Tensor
        ``[H, D]``, q's dtype and device.
    lengths, scale, chunk_size, left_chunks, out
        As for :func:`attention`.
    shift : bool
        ESPnet's shifted form (True) or WeNet's unshifted one (False).

    Returns
    -------
    torch.Tensor
        ``out``, allocated contiguous ``[B, T, H, D]`` when not given. A query row with no valid key is zeros.

    Raises
    ------
    TypeError, ValueError
        As :func:`attention`, and for ``p`` or the biases: a non-tensor or another dtype (TypeError), ``p`` not
        ``[2T - 1, H, D]`` (``[T, H, D]`` unshifted; too short for T included) or the biases not ``[H, D]``
        (ValueError); a ``shift`` that is not a bool (TypeError).
    """
