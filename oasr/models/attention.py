"""The encoder's relative-position attention: the oasr kernel where there is one, else the torch composition.

``oasr.rel_pos_attention`` (the attention family) computes the ``"latest"`` (``shift=True``) and ``"wenet"``
(``shift=False``) forms in one kernel, masks included. Until that family is on this branch, and for ESPnet's
``"legacy"`` form, whose old ``rel_shift`` no kernel computes, the scores are materialised in torch
(:func:`oasr.models.reference.rel_pos_attention`). Once the family lands, :data:`KERNEL` becomes
``from ..attention import rel_pos_attention`` (an eager call then skips the dispatcher).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import reference

KERNEL = hasattr(torch.ops.oasr, "rel_pos_attention")
"""Whether the attention family's custom op is registered (``oasr/__init__.py`` imports the families first)."""


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
    if KERNEL and form != "legacy":
        shift = form == "latest"
        return torch.ops.oasr.rel_pos_attention(
            q, k, v, p, pos_bias_u, pos_bias_v, lengths, shift, None, chunk_size, left_chunks
        )
    mask = reference.attention_mask(lengths, q.shape[1], chunk_size, left_chunks, q.device)
    return reference.rel_pos_attention(q, k, v, p, pos_bias_u, pos_bias_v, mask, form)


__all__ = ["KERNEL", "rel_pos_attention"]
