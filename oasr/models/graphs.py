"""The encoder in CUDA graphs: one graph per bucket of input frames, replayed on batches padded to the bucket.

Padding is exact for the valid frames: the encoder hides padded frames from the attention's keys and zeroes them
before the depthwise convolution, so an utterance's output does not depend on the frames and rows around it. A
batch is copied into the bucket's static input (padded frames zero, padded rows of length 0), the graph replays, and
the valid part of the static output is returned as a new tensor. The graphs share one memory pool (they replay one at
a time). Batches larger than ``max_batch`` or longer than the largest bucket run eagerly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .config import subsampled_length
from .reference import check_features


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    feats: Tensor
    lengths: Tensor
    out: Tensor
    out_lengths: Tensor


class GraphedEncoder:
    """``runner(feats, lengths) -> (out, out_lengths)`` as the encoder's forward, replaying captured graphs.

    Parameters
    ----------
    encoder : ConformerEncoder
        On a CUDA device. The graphs read the weights where they are: ``load_state_dict`` writes new ones there,
        ``.to()`` moves them elsewhere (make a new runner then).
    max_batch : int
        Rows of every graph.
    buckets : tuple of int
        Input frames (T of ``feats``) of each graph, >= 7: a batch of T frames runs in the smallest bucket >= T.
    """

    def __init__(self, encoder: Any, max_batch: int, buckets: tuple[int, ...]) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"ConformerEncoder.graphed: `max_batch` must be an int >= 1, got {max_batch!r}")
        frames = tuple(buckets) if isinstance(buckets, (tuple, list)) else ()
        if not frames or any(isinstance(t, bool) or not isinstance(t, int) or t < 7 for t in frames):
            raise ValueError(f"ConformerEncoder.graphed: `buckets` must be ints >= 7 (input frames), got {buckets!r}")
        device = encoder.after_norm.weight.device
        if not torch.cuda.is_available() or device.type != "cuda":
            raise RuntimeError(
                f"ConformerEncoder.graphed: CUDA graphs need the encoder on a CUDA GPU (it is on {device}; "
                f"torch.cuda.is_available() is {torch.cuda.is_available()})"
            )
        self.encoder = encoder
        self.max_batch = max_batch
        self.buckets = tuple(sorted(set(frames)))
        self._pool: Any = None
        self._graphs = {t: self._capture(t) for t in self.buckets}

    def _capture(self, frames: int) -> _Captured:
        encoder, weight = self.encoder, self.encoder.after_norm.weight
        shape = (self.max_batch, frames, encoder.config.input_dim)
        feats = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        lengths = torch.full((self.max_batch,), frames, dtype=torch.int64, device=weight.device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # builds the kernels and warms the allocator before the capture
            for _ in range(2):
                encoder(feats, lengths)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out, out_lengths = encoder(feats, lengths)
        self._pool = graph.pool() if self._pool is None else self._pool
        return _Captured(graph, feats, lengths, out, out_lengths)

    def bucket(self, frames: int) -> int | None:
        """The bucket a batch of ``frames`` input frames runs in (None: none fits, it runs eagerly)."""
        return next((t for t in self.buckets if t >= frames), None)

    def __call__(self, feats: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """As ``encoder(feats, lengths)``: ``[B, T', d]`` and int64 ``[B]``, new tensors."""
        check_features("GraphedEncoder", feats, lengths, self.encoder.config.input_dim)
        batch, frames = feats.shape[0], feats.shape[1]
        bucket = self.bucket(frames)
        if bucket is None or batch > self.max_batch:
            return self.encoder(feats, lengths)
        captured = self._graphs[bucket]
        captured.feats.zero_()
        captured.feats[:batch, :frames].copy_(feats)
        captured.lengths.zero_()
        if lengths is None:
            captured.lengths[:batch].fill_(frames)
        else:
            captured.lengths[:batch].copy_(lengths)
        captured.graph.replay()
        out_frames = subsampled_length(frames)
        return captured.out[:batch, :out_frames].clone(), captured.out_lengths[:batch].clone()


__all__ = ["GraphedEncoder"]
