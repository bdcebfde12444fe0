"""The encoder's relative-position attention: the oasr kernel, or for ESPnet's legacy form the torch composition.

``oasr.rel_pos_attention`` computes the ``"latest"`` (``shift=True``) and ``"wenet"`` (``shift=False``) forms in one
kernel, masks included. ESPnet's ``"legacy"`` form reads positions that depend on T through its old ``rel_shift``,
which no kernel computes: its scores are materialised in torch (:func:`oasr.models.reference.rel_pos_attention`).
"""

from __future__ import annotations

from torch import Tensor

from ..attention import rel_pos_attention as fused
from . import reference


def rel_pos_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    p: Tensor,
    pos_bias_u: Tensor,
    pos_bias_v: Tensor,
    lengths: Tensor | None,
    form: str,
    chunk_size: int | None,
    left_chunks: int | None,
) -> Tensor:
    """``[B, T, H, D]`` attention of ``q``, ``k``, ``v`` (views of a packed ``[B, T, 3, H, D]``), ``p`` ``[P, H, D]``,
    the key lengths (int32 ``[B]`` on the device, or None) and the chunk mask, as ``oasr.rel_pos_attention``."""
    if form != "legacy":
        return fused(q, k, v, p, pos_bias_u, pos_bias_v, lengths, form == "latest", None, chunk_size, left_chunks)
    mask = reference.attention_mask(lengths, q.shape[1], chunk_size, left_chunks, q.device)
    return reference.rel_pos_attention(q, k, v, p, pos_bias_u, pos_bias_v, mask, form)


__all__ = ["rel_pos_attention"]
