"""Chunk-by-chunk (U2) inference: the encoder's output one chunk at a time, with attention and convolution caches.

Each step takes the features of one chunk's window, ``(chunk_size - 1) * 4 + 7`` frames that overlap the previous
window by 3 (what Conv2dSubsampling4 reads for ``chunk_size`` output frames, WeNet's ``forward_chunk_by_chunk``), and
returns its ``chunk_size`` output frames. Per layer:

- attention: the chunk's packed q, k, v rows follow the cached frames' (``left_chunks * chunk_size`` of them, or all
  when ``left_chunks < 0``), and ``rel_pos_attention`` runs on that window with no mask (the cached rows' own queries
  are computed and dropped); the relative positions within the window are the full sequence's, and ``"wenet"``'s key
  positions start at the first cached frame's;
- convolution: ``depthwise_conv1d_step`` carries the last K - 1 frames (the module must be causal, ``config.causal``:
  a centred convolution reads frames of the next chunk).

The outputs are those of the full-context encoder with the chunk mask ``chunk_size``, ``left_chunks``
(``tests/test_models.py``). Shapes change from step to step (the cache grows to its size), so steps run eagerly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

WINDOW_CONTEXT = 7
"""Input frames of one output frame of Conv2dSubsampling4 (two 3x3 stride-2 convolutions)."""
SUBSAMPLING = 4


@dataclass
class LayerCache:
    """One layer's streaming state."""

    qkv: Tensor
    """``[B, C, 3, H, D]``: the cached frames' projections (keys and values; their queries are unused)."""
    conv: Tensor
    """``[B, K - 1, d]``: the depthwise convolution's left context, updated in place."""
    keep: int | None
    """Frames kept for the next chunk (None: all)."""

    def window(self, qkv: Tensor) -> Tensor:
        """The cached rows followed by the chunk's ``qkv``; keeps the last ``keep`` rows of it for the next chunk."""
        window = torch.cat([self.qkv, qkv], dim=1)
        self.qkv = window if self.keep is None else window[:, window.shape[1] - min(self.keep, window.shape[1]) :]
        return window


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ConformerStream: `{name}` must be an int >= 1, got {value!r}")
    return value


class ConformerStream:
    """A chunk-by-chunk run of an oasr :class:`~oasr.models.ConformerEncoder` over ``batch_size`` streams.

    Parameters
    ----------
    encoder : ConformerEncoder
        A causal encoder (``config.causal``) of the ``"latest"`` or ``"wenet"`` form.
    batch_size : int
        Streams advanced together.
    chunk_size : int
        Output frames per chunk.
    left_chunks : int
        Chunks of left context each chunk attends to (< 0: all).
    """

    def __init__(self, encoder: Any, batch_size: int, chunk_size: int, left_chunks: int) -> None:
        config = encoder.config
        self.batch_size = _positive_int("batch_size", batch_size)
        self.chunk_size = _positive_int("chunk_size", chunk_size)
        if isinstance(left_chunks, bool) or not isinstance(left_chunks, int):
            raise TypeError(f"ConformerStream: `left_chunks` must be an int (< 0: all), got {left_chunks!r}")
        if not config.causal:
            raise ValueError(
                "ConformerStream: the encoder's convolution module is centred (config.causal is False) and reads "
                "frames of the next chunk; streaming needs a causal one (from_config(..., causal=True))"
            )
        if config.position == "legacy":
            raise ValueError(
                "ConformerStream: ESPnet's legacy relative positions depend on the sequence's length; "
                "stream a 'latest' or 'wenet' encoder"
            )
        self.encoder = encoder
        self.left_chunks = left_chunks
        weight = encoder.after_norm.weight
        keep = None if left_chunks < 0 else left_chunks * chunk_size
        heads = (batch_size, 0, 3, config.heads, config.head_dim)
        state = (batch_size, config.kernel_size - 1, config.d_model)
        self.caches = [LayerCache(weight.new_zeros(heads), weight.new_zeros(state), keep) for _ in range(config.layers)]
        self.offset = 0
        """Output frames produced so far."""

    @property
    def window_frames(self) -> int:
        """Input frames of one chunk: ``(chunk_size - 1) * 4 + 7``."""
        return (self.chunk_size - 1) * SUBSAMPLING + WINDOW_CONTEXT

    def step(self, feats: Tensor) -> Tensor:
        """The output frames of one chunk.

        Parameters
        ----------
        feats : torch.Tensor
            ``[batch_size, W, F]``: the chunk's window, at most :attr:`window_frames` (the last one may be shorter)
            and at least 7 frames.

        Returns
        -------
        torch.Tensor
            ``[batch_size, ((W - 1) // 2 - 1) // 2, d]``.
        """
        encoder = self.encoder
        if not (isinstance(feats, Tensor) and feats.dim() == 3 and feats.shape[0] == self.batch_size):
            shape = tuple(feats.shape) if isinstance(feats, Tensor) else type(feats).__name__
            raise ValueError(f"ConformerStream.step: `feats` must be [{self.batch_size}, W, F], got {shape}")
        if not WINDOW_CONTEXT <= feats.shape[1] <= self.window_frames:
            raise ValueError(
                f"ConformerStream.step: `feats` has {feats.shape[1]} frames; a chunk's window has 7 to "
                f"{self.window_frames} ((chunk_size - 1) * 4 + 7)"
            )
        x = encoder.embed.subsample(feats.to(encoder.dtype))
        frames, cached = x.shape[1], self.caches[0].qkv.shape[1]
        pos_enc = encoder.embed.pos_enc
        pos_emb = pos_enc.position_embedding(cached + frames, self.offset - cached, x.dtype)
        context = encoder.context(cached + frames, pos_emb, None)
        for layer, cache in zip(encoder.encoders, self.caches, strict=True):
            x = layer(x, context, cache)
        self.offset += frames
        return encoder.output_norm(x)

    def encode(self, feats: Tensor) -> Tensor:
        """Every chunk of ``[batch_size, T, F]`` features in turn (windows every ``4 * chunk_size`` frames), joined:
        ``[batch_size, ((T - 1) // 2 - 1) // 2, d]``."""
        total, stride = feats.shape[1], SUBSAMPLING * self.chunk_size
        starts = range(0, total - WINDOW_CONTEXT + 1, stride)
        return torch.cat([self.step(feats[:, s : min(s + self.window_frames, total)]) for s in starts], dim=1)


__all__ = ["SUBSAMPLING", "WINDOW_CONTEXT", "ConformerStream", "LayerCache"]
