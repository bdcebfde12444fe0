"""The Conformer encoder in plain torch: the oasr encoder's reference and the baseline of its benchmarks.

ESPnet's structure and state_dict keys (``embed.conv.0``, ``encoders.3.self_attn.linear_pos``,
``encoders.3.conv_module.norm.running_var``, ``after_norm``, ...), its math in the module's dtype (float64 included),
with no dropout. It matches ``espnet2.asr.encoder.conformer_encoder.ConformerEncoder`` on the same state_dict for
full-length batches (``tests/test_models_espnet.py``). Two choices differ from ESPnet on padded batches, so that each
utterance of a batch gets the output it gets alone (ESPnet's own output for that utterance):

- the convolution module zeroes padded frames before the depthwise convolution (WeNet zeroes the module's input,
  whose padded frames then hold GLU(bias); ESPnet does not mask);
- the lengths after subsampling are ``((L - 1) // 2 - 1) // 2`` (WeNet's); ESPnet's ``mask[:, :, :-2:2]`` keeps up
  to two more frames, which read the padding.

The oasr encoder (``oasr/models/encoder.py``) subclasses these modules: one definition of the parameters and keys.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ConformerConfig, subsampled_length
from .positional import RelPositionalEncoding

# ---------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------


def output_lengths(lengths: Tensor) -> Tensor:
    """Conv2dSubsampling4's valid frames per utterance: ``((L - 1) // 2 - 1) // 2``, at least 0 (``lengths``' dtype)."""
    return ((lengths - 1).div(2, rounding_mode="floor") - 1).div(2, rounding_mode="floor").clamp(min=0)


def key_mask(lengths: Tensor, frames: int) -> Tensor:
    """``[B, T]`` bool: True on each utterance's valid frames."""
    return torch.arange(frames, device=lengths.device) < lengths.unsqueeze(1)


def chunk_mask(frames: int, chunk_size: int, left_chunks: int | None, device: torch.device) -> Tensor:
    """``[T, T]`` bool, WeNet's ``subsequent_chunk_mask``: query i sees keys ``max((i // c - left) * c, 0)`` ..
    ``min((i // c + 1) * c, T) - 1`` (every chunk on the left when ``left_chunks`` is None or < 0)."""
    chunk = torch.arange(frames, device=device) // chunk_size
    keys, queries = chunk.unsqueeze(0), chunk.unsqueeze(1)
    visible = keys <= queries
    if left_chunks is not None and left_chunks >= 0:
        visible = visible & (keys >= queries - left_chunks)
    return visible


def attention_mask(
    lengths: Tensor | None, frames: int, chunk_size: int | None, left_chunks: int | None, device: torch.device
) -> Tensor | None:
    """``[B or 1, 1 or T, T]`` bool (True: the key is seen): the key-length mask and the chunk mask, or None."""
    mask = None if lengths is None else key_mask(lengths, frames).unsqueeze(1)
    if chunk_size is not None:
        chunks = chunk_mask(frames, chunk_size, left_chunks, device).unsqueeze(0)
        mask = chunks if mask is None else mask & chunks
    return mask


# ---------------------------------------------------------------------------
# Relative-position attention, scores materialised (ESPnet's math)
# ---------------------------------------------------------------------------


def rel_shift(bd: Tensor, form: str) -> Tensor:
    """``(q + pos_bias_v) p^T`` ``[.., T, P]`` as the ``[.., T, T]`` term of the scores.

    ``"latest"``: pad a zero column on the left, read the ``[T, 2T]`` block as ``[2T, T]``, drop its first row and keep
    the first T columns: ``bd[i, j] = raw[i, T - 1 - i + j]``, position i - j. ``"legacy"``: the same on a ``[T, T]``
    matrix (for j > i it reads the next row). ``"wenet"``: unshifted.
    """
    if form == "wenet":
        return bd
    *batch, rows, cols = bd.shape
    padded = F.pad(bd, (1, 0)).view(*batch, cols + 1, rows)[..., 1:, :]
    return padded.reshape(*batch, rows, cols)[..., :rows]


def rel_pos_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    p: Tensor,
    pos_bias_u: Tensor,
    pos_bias_v: Tensor,
    mask: Tensor | None = None,
    form: str = "latest",
    scale: float | None = None,
) -> Tensor:
    """Relative-position attention with its scores materialised, as ESPnet computes it.

    ``q``, ``k``, ``v`` ``[B, T, H, D]``; ``p = linear_pos(pos_emb)`` ``[P, H, D]`` (2T - 1 rows for ``"latest"``, T
    otherwise); ``pos_bias_u``, ``pos_bias_v`` ``[H, D]``; ``mask`` from :func:`attention_mask` (False: the key is
    hidden). Scores ``((q + u) k^T + rel_shift((q + v) p^T)) * scale`` (``1 / sqrt(D)`` by default), masked keys at
    -inf, softmax, masked weights set to 0 (a query with no key gives zeros). Returns ``[B, T, H, D]``.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    ac = (q + pos_bias_u).transpose(1, 2) @ k.permute(0, 2, 3, 1)  # [B, H, T, T]
    bd = (q + pos_bias_v).transpose(1, 2) @ p.permute(1, 2, 0)  # [B, H, T, P]
    scores = (ac + rel_shift(bd, form)) * scale
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        hidden = ~mask.unsqueeze(1)  # [B, 1, T or 1, T]
        weights = torch.softmax(scores.masked_fill(hidden, -math.inf), dim=-1).masked_fill(hidden, 0.0)
    return (weights @ v.transpose(1, 2)).transpose(1, 2)


# ---------------------------------------------------------------------------
# Modules (ESPnet's names)
# ---------------------------------------------------------------------------


class Conv2dSubsampling4(nn.Module):
    """``conv`` (3x3 stride-2 convolutions 1 -> d -> d, each with ReLU), ``out`` (Linear(d * F', d)), ``pos_enc``.

    ``forward(feats [B, T, F]) -> (x * sqrt(d) [B, T', d], pos_emb [P, d])``.
    """

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        d = config.d_model
        self.conv = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2), nn.ReLU())
        self.out = nn.Sequential(nn.Linear(d * config.subsampled_features, d))
        self.pos_enc = RelPositionalEncoding(config)

    def forward(self, feats: Tensor) -> tuple[Tensor, Tensor]:
        x = self.conv(feats.unsqueeze(1))  # [B, d, T', F']
        b, c, t, f = x.shape
        return self.pos_enc(self.out(x.transpose(1, 2).reshape(b, t, c * f)))


class FeedForward(nn.Module):
    """``w_2(silu(w_1(x)))`` (ESPnet's PositionwiseFeedForward with swish)."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        self.w_1 = nn.Linear(config.d_model, config.ff_dim)
        self.w_2 = nn.Linear(config.ff_dim, config.d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(F.silu(self.w_1(x)))


class RelPositionAttention(nn.Module):
    """ESPnet's ``RelPositionMultiHeadedAttention`` (or its legacy form): q, k, v, out and pos projections, u, v."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        d, self.heads, self.head_dim = config.d_model, config.heads, config.head_dim
        self.form = config.position
        self.linear_q = nn.Linear(d, d)
        self.linear_k = nn.Linear(d, d)
        self.linear_v = nn.Linear(d, d)
        self.linear_out = nn.Linear(d, d)
        self.linear_pos = nn.Linear(d, d, bias=False)
        self.pos_bias_u = nn.Parameter(torch.empty(self.heads, self.head_dim))
        self.pos_bias_v = nn.Parameter(torch.empty(self.heads, self.head_dim))
        nn.init.xavier_uniform_(self.pos_bias_u)
        nn.init.xavier_uniform_(self.pos_bias_v)

    def forward(self, x: Tensor, pos_emb: Tensor, mask: Tensor | None) -> Tensor:
        b, t, _ = x.shape
        heads = (b, t, self.heads, self.head_dim)
        q, k, v = self.linear_q(x).view(heads), self.linear_k(x).view(heads), self.linear_v(x).view(heads)
        p = self.linear_pos(pos_emb).view(-1, self.heads, self.head_dim)
        context = rel_pos_attention(q, k, v, p, self.pos_bias_u, self.pos_bias_v, mask, self.form)
        return self.linear_out(context.reshape(b, t, self.heads * self.head_dim))


class ConvolutionModule(nn.Module):
    """Pointwise conv + GLU, padded frames zeroed, depthwise conv, BatchNorm (inference), SiLU, pointwise conv."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        d, k = config.d_model, config.kernel_size
        self.padding = (k - 1, 0) if config.causal else ((k - 1) // 2, (k - 1) // 2)
        self.batch_norm_eps = config.batch_norm_eps
        self.pointwise_conv1 = nn.Conv1d(d, 2 * d, 1)
        self.depthwise_conv = nn.Conv1d(d, d, k, groups=d)
        self.norm = nn.BatchNorm1d(d, eps=config.batch_norm_eps)
        self.pointwise_conv2 = nn.Conv1d(d, d, 1)

    def forward(self, x: Tensor, valid: Tensor | None) -> Tensor:
        """``x`` ``[B, T, d]``; ``valid`` ``[B, T]`` bool (None: every frame)."""
        x = F.glu(self.pointwise_conv1(x.transpose(1, 2)), dim=1)
        if valid is not None:
            x = x.masked_fill(~valid.unsqueeze(1), 0.0)
        x = self.depthwise_conv(F.pad(x, self.padding))
        norm = self.norm  # always the inference form, whatever the module's training flag
        x = F.batch_norm(x, norm.running_mean, norm.running_var, norm.weight, norm.bias, False, 0.0, norm.eps)
        return self.pointwise_conv2(F.silu(x)).transpose(1, 2)


class ConformerLayer(nn.Module):
    """A macaron Conformer layer, pre-LN: half FFN, rel-pos MHSA, convolution module, half FFN, final LayerNorm."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        d, eps = config.d_model, config.norm_eps
        self.self_attn = RelPositionAttention(config)
        self.feed_forward = FeedForward(config)
        self.feed_forward_macaron = FeedForward(config)
        self.conv_module = ConvolutionModule(config)
        self.norm_ff = nn.LayerNorm(d, eps=eps)
        self.norm_mha = nn.LayerNorm(d, eps=eps)
        self.norm_ff_macaron = nn.LayerNorm(d, eps=eps)
        self.norm_conv = nn.LayerNorm(d, eps=eps)
        self.norm_final = nn.LayerNorm(d, eps=eps)

    def forward(self, x: Tensor, pos_emb: Tensor, mask: Tensor | None, valid: Tensor | None) -> Tensor:
        """``x`` ``[B, T, d]``, ``pos_emb`` ``[P, d]``, ``mask`` from :func:`attention_mask`, ``valid`` ``[B, T]``."""
        x = x + 0.5 * self.feed_forward_macaron(self.norm_ff_macaron(x))
        x = x + self.self_attn(self.norm_mha(x), pos_emb, mask)
        x = x + self.conv_module(self.norm_conv(x), valid)
        x = x + 0.5 * self.feed_forward(self.norm_ff(x))
        return self.norm_final(x)


def check_features(name: str, feats: object, lengths: object, input_dim: int) -> None:
    """``feats`` ``[B, T, F]`` floating with T >= 7, ``lengths`` None or an integer ``[B]`` tensor on its device."""
    if not isinstance(feats, Tensor) or not feats.is_floating_point():
        what = f"a {feats.dtype} tensor" if isinstance(feats, Tensor) else type(feats).__name__
        raise TypeError(f"{name}: `feats` must be a floating-point tensor [B, T, {input_dim}], got {what}")
    if feats.dim() != 3 or feats.shape[2] != input_dim:
        raise ValueError(f"{name}: `feats` must be [B, T, {input_dim}] (F = input_dim), got {tuple(feats.shape)}")
    if feats.shape[1] < 7:
        raise ValueError(f"{name}: `feats` has T = {feats.shape[1]} frames; Conv2dSubsampling4 needs T >= 7")
    if lengths is None:
        return
    if not isinstance(lengths, Tensor) or lengths.dtype.is_floating_point or lengths.dtype.is_complex:
        what = f"a {lengths.dtype} tensor" if isinstance(lengths, Tensor) else type(lengths).__name__
        raise TypeError(f"{name}: `lengths` must be an integer tensor [B] (frames per utterance), got {what}")
    if lengths.shape != feats.shape[:1]:
        raise ValueError(f"{name}: `lengths` has shape {tuple(lengths.shape)}, expected ({feats.shape[0]},) ([B])")
    if lengths.device != feats.device:
        raise ValueError(f"{name}: `lengths` is on {lengths.device}, `feats` on {feats.device}: put them on one device")


def check_chunks(name: str, chunk_size: object, left_chunks: object) -> None:
    """``chunk_size`` None or an int >= 1 (output frames); ``left_chunks`` None or an int (< 0: all), with a chunk."""
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"{name}: `chunk_size` must be None or an int >= 1 (output frames), got {chunk_size!r}")
    if left_chunks is not None:
        if isinstance(left_chunks, bool) or not isinstance(left_chunks, int):
            raise TypeError(f"{name}: `left_chunks` must be None or an int (< 0: every chunk), got {left_chunks!r}")
        if chunk_size is None:
            raise ValueError(f"{name}: `left_chunks` needs `chunk_size` (the chunk mask's chunk, in output frames)")


class ReferenceConformerEncoder(nn.Module):
    """The Conformer encoder in plain torch (inference): ``forward(feats, lengths) -> (out, out_lengths)``.

    Parameters
    ----------
    config : ConformerConfig
        The hyper-parameters (``oasr.models.CONFIGS`` has the named ones).
    """

    Subsampling: type[nn.Module] = Conv2dSubsampling4
    Layer: type[nn.Module] = ConformerLayer
    """The parts (the oasr encoder's are subclasses of these)."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = self.Subsampling(config)
        self.encoders = nn.ModuleList(self.Layer(config) for _ in range(config.layers))
        self.after_norm = nn.LayerNorm(config.d_model, eps=config.norm_eps)
        self.requires_grad_(False)

    def forward(
        self,
        feats: Tensor,
        lengths: Tensor | None = None,
        chunk_size: int | None = None,
        left_chunks: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Encode a padded batch.

        Parameters
        ----------
        feats : torch.Tensor
            ``[B, T, F]`` features (cast to the module's dtype), T >= 7.
        lengths : torch.Tensor, optional
            Integer ``[B]``: valid frames per utterance (None: all T).
        chunk_size, left_chunks : int, optional
            The streaming chunk mask (in output frames), as :func:`chunk_mask`.

        Returns
        -------
        (torch.Tensor, torch.Tensor)
            ``[B, T', d]`` and the int64 ``[B]`` valid output frames.
        """
        check_features("ReferenceConformerEncoder", feats, lengths, self.config.input_dim)
        check_chunks("ReferenceConformerEncoder", chunk_size, left_chunks)
        frames = subsampled_length(feats.shape[1])
        full = torch.full((feats.shape[0],), feats.shape[1], device=feats.device)
        out_lengths = output_lengths(full if lengths is None else lengths.to(torch.int64))
        x, pos_emb = self.embed(feats.to(self.after_norm.weight.dtype))
        mask = attention_mask(None if lengths is None else out_lengths, frames, chunk_size, left_chunks, x.device)
        valid = None if lengths is None else key_mask(out_lengths, frames)
        for layer in self.encoders:
            x = layer(x, pos_emb, mask, valid)
        return self.after_norm(x), out_lengths


def random_state_dict(config: ConformerConfig, seed: int = 0) -> dict[str, Tensor]:
    """Random float32 weights of a ``config`` encoder, seeded: torch's default initialisations, and LayerNorm and
    BatchNorm parameters and running statistics away from their identity values (so that folding the BatchNorm and
    every norm's affine terms are exercised)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ReferenceConformerEncoder(config)
    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, nn.BatchNorm1d)):
            module.weight.copy_(1.0 + 0.1 * torch.randn(module.weight.shape, generator=generator))
            module.bias.copy_(0.1 * torch.randn(module.bias.shape, generator=generator))
        if isinstance(module, nn.BatchNorm1d):
            module.running_mean.copy_(0.1 * torch.randn(module.running_mean.shape, generator=generator))
            module.running_var.copy_(0.5 + torch.rand(module.running_var.shape, generator=generator))
            module.num_batches_tracked.fill_(1000)
    return model.state_dict()


__all__ = [
    "ConformerLayer",
    "Conv2dSubsampling4",
    "ConvolutionModule",
    "FeedForward",
    "ReferenceConformerEncoder",
    "RelPositionAttention",
    "attention_mask",
    "check_chunks",
    "check_features",
    "chunk_mask",
    "key_mask",
    "output_lengths",
    "random_state_dict",
    "rel_pos_attention",
    "rel_shift",
]
