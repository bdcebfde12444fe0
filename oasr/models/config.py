"""The Conformer encoder's hyper-parameters, and the named configurations :meth:`ConformerEncoder.from_config` builds.

One dataclass serves the oasr encoder and its torch reference (``oasr/models/reference.py``), which share their
structure and state_dict keys: those of ESPnet's ``espnet2.asr.encoder.conformer_encoder.ConformerEncoder``
(``input_layer="conv2d"``, ``macaron_style=True``, ``use_cnn_module=True``, ``normalize_before=True``, swish
activations) and of WeNet's ``ConformerEncoder`` with a batch-norm convolution module.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

POSITION_FORMS = ("latest", "legacy", "wenet")
"""The relative-position attention forms (``oasr/models/positional.py`` has their embeddings):

- ``"latest"``: ESPnet's ``rel_pos_type="latest"`` (``RelPositionalEncoding`` + ``RelPositionMultiHeadedAttention``):
  2T - 1 embeddings of the relative positions T - 1 .. -(T - 1), shifted into ``bd[i, j]`` of position i - j.
- ``"legacy"``: ESPnet's ``rel_pos_type="legacy"`` (``LegacyRelPositionalEncoding`` +
  ``LegacyRelPositionMultiHeadedAttention``): T embeddings of the positions M - 1 .. M - T (M = ``max_len``, or T
  when longer) and the old ``rel_shift`` of a T x T matrix, whose upper triangle reads the next query's row.
- ``"wenet"``: WeNet's ``rel_pos`` (``RelPositionalEncoding`` + ``RelPositionMultiHeadedAttention``): T embeddings of
  the key positions 0 .. T - 1 as a second key, unshifted.
"""


@dataclass(frozen=True)
class ConformerConfig:
    """A Conformer encoder: Conv2dSubsampling4, relative-position encoding, ``layers`` macaron Conformer layers.

    Attributes
    ----------
    input_dim : int
        Features per frame (80 fbank bins).
    d_model : int
        The model width (``output_size``).
    heads : int
        Attention heads; ``d_model / heads`` is the head size (the attention kernels take 64 or 128).
    ff_dim : int
        The feed-forward width (``linear_units``).
    layers : int
        Conformer layers (``num_blocks``).
    kernel_size : int
        The depthwise convolution's taps (``cnn_module_kernel``), odd.
    position : {"latest", "legacy", "wenet"}
        The relative-position form (:data:`POSITION_FORMS`).
    causal : bool
        WeNet's causal convolution module (``causal: true``: K - 1 frames of left context, none on the right), which
        streaming needs to match the full-context encoder; ESPnet's is centred (False).
    norm_eps : float
        The LayerNorms' epsilon: 1e-12 in ESPnet (its ``LayerNorm``), 1e-5 in WeNet.
    batch_norm_eps : float
        The convolution module's BatchNorm epsilon (1e-5 in both).
    max_len : int
        ESPnet's ``max_pos_emb_len``: the positional tables' length (longer inputs get longer tables); the
        ``"legacy"`` form's positions depend on it.
    """

    input_dim: int = 80
    d_model: int = 256
    heads: int = 4
    ff_dim: int = 2048
    layers: int = 12
    kernel_size: int = 15
    position: str = "latest"
    causal: bool = False
    norm_eps: float = 1e-12
    batch_norm_eps: float = 1e-5
    max_len: int = 5000

    def __post_init__(self) -> None:
        error = "ConformerConfig: `{}` must be {}, got {!r}"
        for name in ("input_dim", "d_model", "heads", "ff_dim", "layers", "kernel_size", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(error.format(name, "an int >= 1", value))
        if self.d_model % 2:
            raise ValueError(error.format("d_model", "even (sin and cos columns)", self.d_model))
        if self.d_model % self.heads:
            raise ValueError(
                f"ConformerConfig: `d_model` ({self.d_model}) must be a multiple of `heads` ({self.heads})"
            )
        if self.kernel_size % 2 == 0:
            raise ValueError(
                f"ConformerConfig: `kernel_size` must be odd (a centred convolution), got {self.kernel_size}"
            )
        if self.position not in POSITION_FORMS:
            raise ValueError(error.format("position", f"one of {POSITION_FORMS}", self.position))
        if self.subsampled_features < 1:
            raise ValueError(
                f"ConformerConfig: `input_dim` must be >= 7 (two 3x3 stride-2 convolutions), got {self.input_dim}"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def subsampled_features(self) -> int:
        """F' = ((F - 1) // 2 - 1) // 2: the feature axis after the two stride-2 convolutions."""
        return ((self.input_dim - 1) // 2 - 1) // 2

    def replace(self, **changes: object) -> ConformerConfig:
        return dataclasses.replace(self, **changes)


CONFIGS: dict[str, ConformerConfig] = {
    # WeNet's AISHELL / LibriSpeech Conformer (train_conformer.yaml): rel_pos, macaron, swish, batch norm.
    "wenet": ConformerConfig(
        d_model=256, heads=4, ff_dim=2048, layers=12, kernel_size=15, position="wenet", norm_eps=1e-5
    ),
    # Conformer-L (Gulati et al. 2020) in ESPnet's form: the latest relative positions, ESPnet's LayerNorm.
    "conformer-l": ConformerConfig(d_model=512, heads=8, ff_dim=2048, layers=17, kernel_size=31, position="latest"),
}
"""The named configurations of :meth:`oasr.models.ConformerEncoder.from_config`."""


def subsampled_length(frames: int) -> int:
    """T' of Conv2dSubsampling4 for ``frames`` input frames: ``((T - 1) // 2 - 1) // 2`` (0 below 7 frames)."""
    return max(((frames - 1) // 2 - 1) // 2, 0)


__all__ = ["CONFIGS", "POSITION_FORMS", "ConformerConfig", "subsampled_length"]
