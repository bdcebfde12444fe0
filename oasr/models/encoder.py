"""The Conformer encoder composed of oasr ops (inference): ``ConformerEncoder(feats, lengths) -> (out, out_lengths)``.

The modules subclass the torch reference's (``oasr/models/reference.py``), so their parameters, buffers and
state_dict keys are ESPnet's; a checkpoint's encoder weights load with ``load_state_dict``. What only depends on the
weights is done once, when they are loaded (a ``load_state_dict`` post-hook, and at construction) by ``prepare()``:
the q, k and v projections concatenated into one packed QKV weight, the BatchNorm folded into the depthwise
convolution (``oasr.fold_batch_norm``), the front end's second convolution packed for ``oasr.conv2d_subsampling``.
These live in non-persistent buffers: ``.to()`` moves them with the module, ``state_dict()`` leaves them out. Call
``prepare()`` after changing parameters by hand.

One layer (``d`` wide; every residual add fused into the norm after it)::

    h = layer_norm(x)                                  # norm_ff_macaron (the previous layer's output x)
    f = gemm(gemm(h, w_1, b_1, "silu"), w_2, b_2)      # feed_forward_macaron
    h = add_layer_norm(f, x, alpha=0.5, residual_out=x1)            # norm_mha
    qkv = gemm(h, w_qkv, b_qkv); p = gemm(pos_emb, w_pos)
    a = gemm(rel_pos_attention(q, k, v, p, u, v, lengths), w_out, b_out)
    h = add_layer_norm(a, x1, residual_out=x1)                      # norm_conv
    c = gemm(depthwise_conv1d(gemm_glu(h, w_pw1, b_pw1), w_bn, b_bn, "silu", mask), w_pw2, b_pw2)
    h = add_layer_norm(c, x1, residual_out=x1)                      # norm_ff
    f = gemm(gemm(h, w_1, b_1, "silu"), w_2, b_2)      # feed_forward
    y = add_layer_norm(f, x1, alpha=0.5)                            # norm_final

The ops take float16 or bfloat16 (``from_config`` builds bfloat16). Padded frames (past ``lengths``) are hidden from
the attention's keys and zeroed before the depthwise convolution, so each utterance's valid frames are what it gets
alone; no op reads ``lengths`` on the host, so the forward can be captured in a CUDA graph (:meth:`graphed`) or
compiled whole (``torch.compile(encoder, fullgraph=True)``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..conv1d import depthwise_conv1d, depthwise_conv1d_step, fold_batch_norm
from ..conv2d import conv2d, conv2d_subsampling, pack_subsampling_weight2
from ..gemm import gemm, gemm_glu
from ..norm import add_layer_norm, layer_norm
from ..scale import scale
from . import reference
from .attention import rel_pos_attention
from .config import CONFIGS, ConformerConfig, subsampled_length
from .graphs import GraphedEncoder
from .streaming import ConformerStream, LayerCache

_HALF = (torch.float16, torch.bfloat16)


class Context(NamedTuple):
    """What every layer of one forward reads besides its input."""

    pos_emb: Tensor
    """``[P, d]`` relative-position embeddings (2T - 1 or T rows)."""
    lengths: Tensor | None
    """int32 ``[B]`` valid frames, on the device (None: every frame)."""
    valid: Tensor | None
    """``[B, T]`` bool, True on valid frames (None: every frame)."""
    chunk_size: int | None
    left_chunks: int | None


def _prepared(module: torch.nn.Module, incompatible_keys: object) -> None:
    module.prepare()


def _derive(module: torch.nn.Module, name: str, value: Tensor) -> None:
    """Set the derived (non-persistent) buffer ``name``: in place when it exists with ``value``'s shape, dtype and
    device, so that CUDA graphs captured before new weights were loaded read the new ones."""
    current = module._buffers.get(name)
    layout = (value.shape, value.dtype, value.device)
    if current is not None and (current.shape, current.dtype, current.device) == layout:
        current.copy_(value)
    else:
        module.register_buffer(name, value, persistent=False)


class Conv2dSubsampling4(reference.Conv2dSubsampling4):
    """WeNet's front end: ``oasr.conv2d_subsampling`` (d a multiple of 16 up to 256; two ``oasr.conv2d`` otherwise),
    the ``out`` projection by ``oasr.gemm`` and ``x * sqrt(d)`` by ``oasr.scale``."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__(config)
        d = config.d_model
        self.fused = d % 16 == 0 and 16 <= d <= 256  # (oasr.conv2d_subsampling's range)
        self.prepare()
        self.register_load_state_dict_post_hook(_prepared)

    @torch.no_grad()
    def prepare(self) -> None:
        """Pack the convolutions' weights (and, unfused, the projection's columns) for the kernels."""
        first, second, linear = self.conv[0], self.conv[2], self.out[0]
        if self.fused:
            _derive(self, "weight2", pack_subsampling_weight2(second.weight).contiguous())
            return
        # NHWC convolutions give [B, T', F', d]; the projection was trained on torch's [B, T', d, F'] order.
        d, f = first.weight.shape[0], linear.weight.shape[1] // first.weight.shape[0]
        _derive(self, "weight1", first.weight.permute(0, 2, 3, 1).contiguous())
        _derive(self, "weight2", second.weight.permute(0, 2, 3, 1).contiguous())
        columns = linear.weight.view(d, d, f).transpose(1, 2).reshape(d, f * d)
        _derive(self, "projection", columns)

    def subsample(self, feats: Tensor) -> Tensor:
        """``[B, T, F]`` features (the model's dtype) to ``x * sqrt(d)`` ``[B, T', d]``."""
        first, second = self.conv[0], self.conv[2]
        if self.fused:
            y = conv2d_subsampling(feats, first.weight, first.bias, self.weight2, second.bias)
        else:
            y = conv2d(feats.unsqueeze(-1), self.weight1, first.bias, 2, 0, "relu")
            y = conv2d(y, self.weight2, second.bias, 2, 0, "relu")
            y = y.view(y.shape[0], y.shape[1], -1)
        x = gemm(y, self.out[0].weight if self.fused else self.projection, self.out[0].bias)
        return scale(x, self.pos_enc.xscale, out=x)

    def forward(self, feats: Tensor) -> tuple[Tensor, Tensor]:
        x = self.subsample(feats)
        return x, self.pos_enc.position_embedding(x.shape[1], dtype=x.dtype)


class ConformerLayer(reference.ConformerLayer):
    """One macaron Conformer layer of oasr ops (the module docstring has them)."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__(config)
        self.form, self.eps = config.position, config.norm_eps
        self.heads, self.head_dim = config.heads, config.head_dim
        self.padding = self.conv_module.padding
        self.prepare()
        self.register_load_state_dict_post_hook(_prepared)

    @torch.no_grad()
    def prepare(self) -> None:
        """The packed QKV projection, the pointwise convolutions as ``[N, K]`` weights, the BatchNorm folded."""
        attn, conv = self.self_attn, self.conv_module
        projections = (attn.linear_q, attn.linear_k, attn.linear_v)
        _derive(self, "qkv_weight", torch.cat([m.weight for m in projections]))
        _derive(self, "qkv_bias", torch.cat([m.bias for m in projections]))
        _derive(self, "pw1_weight", conv.pointwise_conv1.weight.squeeze(2))
        _derive(self, "pw2_weight", conv.pointwise_conv2.weight.squeeze(2))
        depthwise, norm = conv.depthwise_conv, conv.norm
        taps = depthwise.weight.squeeze(1).t()  # [K, d]
        weight, bias = fold_batch_norm(
            taps, depthwise.bias, norm.running_mean, norm.running_var, norm.weight, norm.bias, norm.eps
        )
        _derive(self, "dw_weight", weight.contiguous())
        _derive(self, "dw_bias", bias)

    def _feed_forward(self, module: reference.FeedForward, h: Tensor) -> Tensor:
        return gemm(gemm(h, module.w_1.weight, module.w_1.bias, "silu"), module.w_2.weight, module.w_2.bias)

    def _attention(self, h: Tensor, context: Context, cache: LayerCache | None) -> Tensor:
        attn = self.self_attn
        b, t, d = h.shape
        qkv = gemm(h, self.qkv_weight, self.qkv_bias).view(b, t, 3, self.heads, self.head_dim)
        if cache is not None:  # the cached frames' keys and values, then the chunk's (the cached queries are unused)
            qkv = cache.window(qkv)
        p = gemm(context.pos_emb, attn.linear_pos.weight).view(-1, self.heads, self.head_dim)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        args = (context.lengths, self.form, context.chunk_size, context.left_chunks)
        out = rel_pos_attention(q, k, v, p, attn.pos_bias_u, attn.pos_bias_v, *args)
        if cache is not None:
            out = out[:, out.shape[1] - t :]
        return gemm(out.reshape(b, t, d), attn.linear_out.weight, attn.linear_out.bias)

    def _convolution(self, h: Tensor, context: Context, cache: LayerCache | None) -> Tensor:
        conv = self.conv_module
        g = gemm_glu(h, self.pw1_weight, conv.pointwise_conv1.bias)
        if cache is None:
            c = depthwise_conv1d(g, self.dw_weight, self.dw_bias, self.padding, "silu", context.valid)
        else:
            c = depthwise_conv1d_step(g, cache.conv, self.dw_weight, self.dw_bias, "silu")
        return gemm(c, self.pw2_weight, conv.pointwise_conv2.bias)

    def forward(self, x: Tensor, context: Context, cache: LayerCache | None = None) -> Tensor:
        """``x`` ``[B, T, d]`` to the layer's output; ``cache``: a streaming step's caches (updated)."""
        eps, norm = self.eps, self.norm_ff_macaron
        f = self._feed_forward(self.feed_forward_macaron, layer_norm(x, norm.weight, norm.bias, eps))
        residual, norm = f, self.norm_mha  # the sum goes where f was; x, the caller's, stays
        h = add_layer_norm(f, x, norm.weight, norm.bias, eps, 0.5, residual_out=residual)
        a = self._attention(h, context, cache)
        norm = self.norm_conv
        h = add_layer_norm(a, residual, norm.weight, norm.bias, eps, 1.0, residual_out=residual)
        c = self._convolution(h, context, cache)
        norm = self.norm_ff
        h = add_layer_norm(c, residual, norm.weight, norm.bias, eps, 1.0, residual_out=residual)
        f = self._feed_forward(self.feed_forward, h)
        norm = self.norm_final
        return add_layer_norm(f, residual, norm.weight, norm.bias, eps, 0.5)


class ConformerEncoder(reference.ReferenceConformerEncoder):
    """A Conformer encoder (ESPnet/WeNet's structure and state_dict keys) composed of oasr ops; inference only.

    Parameters
    ----------
    config : ConformerConfig
        The hyper-parameters; the head size ``d_model / heads`` is 64 or 128 for the attention kernels.

    Notes
    -----
    The module is built in float32 on the CPU, as torch modules are; cast it to float16 or bfloat16 on an sm90 GPU
    (``.to("cuda", torch.bfloat16)``), or use :meth:`from_config`. ``forward`` casts ``feats`` to the module's dtype.
    """

    Subsampling = Conv2dSubsampling4
    Layer = ConformerLayer

    @classmethod
    def from_config(
        cls,
        name: str,
        *,
        dtype: torch.dtype = torch.bfloat16,
        device: torch.device | str | None = None,
        seed: int = 0,
        **changes: object,
    ) -> ConformerEncoder:
        """A named configuration (:data:`oasr.models.CONFIGS`: ``"wenet"``, ``"conformer-l"``) with random weights.

        Parameters
        ----------
        name : str
            The configuration.
        dtype : torch.dtype
            float16 or bfloat16.
        device : torch.device or str, optional
            Default ``"cuda"`` when a GPU is present, else ``"cpu"``.
        seed : int
            Seeds :func:`oasr.models.random_state_dict` (non-trivial LayerNorm and BatchNorm statistics).
        **changes
            Fields of :class:`ConformerConfig` to change (``layers=2``, ``causal=True``).
        """
        if name not in CONFIGS:
            raise ValueError(
                f"ConformerEncoder.from_config: unknown `name` {name!r}; the configurations are {list(CONFIGS)}"
            )
        if dtype not in _HALF:
            raise TypeError(
                f"ConformerEncoder.from_config: `dtype` must be torch.float16 or torch.bfloat16, got {dtype}"
            )
        config = CONFIGS[name].replace(**changes)
        encoder = cls(config)
        encoder.load_state_dict(reference.random_state_dict(config, seed))
        device = device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
        return encoder.to(device=device, dtype=dtype)

    @property
    def dtype(self) -> torch.dtype:
        return self.after_norm.weight.dtype

    def prepare(self) -> None:
        """Redo the load-time work (packing, folding) from the current parameters."""
        self.embed.prepare()
        for layer in self.encoders:
            layer.prepare()

    def context(
        self,
        frames: int,
        pos_emb: Tensor,
        out_lengths: Tensor | None,
        chunk_size: int | None = None,
        left_chunks: int | None = None,
    ) -> Context:
        """The layers' :class:`Context` for ``frames`` output frames (``out_lengths`` None: every frame valid)."""
        if out_lengths is None:
            return Context(pos_emb, None, None, chunk_size, left_chunks)
        lengths = out_lengths.to(torch.int32)
        return Context(pos_emb, lengths, reference.key_mask(lengths, frames), chunk_size, left_chunks)

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
            ``[B, T, F]`` features on the module's GPU (any float dtype: cast to the module's), T >= 7.
        lengths : torch.Tensor, optional
            Integer ``[B]`` on ``feats``' device: valid frames per utterance (None: all T).
        chunk_size, left_chunks : int, optional
            The streaming (U2) chunk mask, in output frames: a query sees its chunk and ``left_chunks`` chunks before
            it (all when None or < 0).

        Returns
        -------
        (torch.Tensor, torch.Tensor)
            ``out`` ``[B, T', d]`` (the module's dtype; T' = ``((T - 1) // 2 - 1) // 2``) and ``out_lengths``, int64
            ``[B]``: ``((L - 1) // 2 - 1) // 2``.

        Raises
        ------
        TypeError, ValueError
            ``feats`` not a float ``[B, T, input_dim]`` tensor with T >= 7, ``lengths`` not an integer ``[B]`` tensor on
            its device, bad chunk arguments, a module that is not float16 or bfloat16; the ops' own errors.
        """
        name = "ConformerEncoder"
        reference.check_features(name, feats, lengths, self.config.input_dim)
        reference.check_chunks(name, chunk_size, left_chunks)
        if self.dtype not in _HALF:
            raise TypeError(
                f"{name}: the module is {self.dtype}; the oasr ops take float16 or bfloat16: call `.bfloat16()`"
            )
        frames = subsampled_length(feats.shape[1])
        x, pos_emb = self.embed(feats.to(self.dtype))
        if lengths is None:
            out_lengths = torch.full((feats.shape[0],), frames, dtype=torch.int64, device=feats.device)
            context = self.context(frames, pos_emb, None, chunk_size, left_chunks)
        else:
            out_lengths = reference.output_lengths(lengths.to(torch.int64))
            context = self.context(frames, pos_emb, out_lengths, chunk_size, left_chunks)
        for layer in self.encoders:
            x = layer(x, context)
        return self.output_norm(x), out_lengths

    def output_norm(self, x: Tensor) -> Tensor:
        """``after_norm`` of the last layer's output."""
        return layer_norm(x, self.after_norm.weight, self.after_norm.bias, self.config.norm_eps)

    def graphed(self, max_batch: int, buckets: tuple[int, ...] = (256, 512, 1024, 1536, 3072, 6144)) -> GraphedEncoder:
        """A runner that replays one CUDA graph per bucket of input frames (:class:`GraphedEncoder`)."""
        return GraphedEncoder(self, max_batch, buckets)

    def stream(self, batch_size: int = 1, chunk_size: int = 16, left_chunks: int = -1) -> ConformerStream:
        """A chunk-by-chunk encoder with caches (:class:`ConformerStream`); needs ``config.causal``."""
        return ConformerStream(self, batch_size, chunk_size, left_chunks)

    def forward_chunk_by_chunk(self, feats: Tensor, chunk_size: int, left_chunks: int = -1) -> Tensor:
        """Encode ``[B, T, F]`` features of B streams as a streaming decoder would (:meth:`ConformerStream.encode`)."""
        return self.stream(feats.shape[0], chunk_size, left_chunks).encode(feats)


__all__ = ["ConformerEncoder", "ConformerLayer", "Context", "Conv2dSubsampling4"]
