"""oasr.models: the Conformer encoder of oasr ops against its plain-torch reference in float64.

CPU tests run the oasr encoder with every family's launchers replaced by torch code (``stand_ins``: fp32 math, each
output rounded once to its storage dtype, as the kernels do), on float16 and bfloat16 (the gemm and conv2d ops take
no float32), against the reference in float64 on the same state_dict. Tolerances, on O(1) outputs:

- one layer or the front end: elementwise, rtol = atol = 4 ulps of the storage dtype at 1 (fp16 4e-3, bf16 3e-2):
  a layer rounds about 15 intermediate results once each;
- the whole encoder: the relative error (Frobenius) at most 1.25x that of the reference itself run in the same
  dtype (torch's own rounding; measured ratios 0.93-0.96), and under 2e-3 (fp16) or 1.5e-2 (bf16);
- two oasr paths that compute the same frames with other shapes (a padded batch, streaming, compiled): 2 ulps on
  CPU; 4 on the GPU, where other shapes take other gemm tiles.

The ESPnet comparison of the reference is ``tests/test_models_espnet.py``. GPU tests (``gpu``) run the real kernels
in bfloat16 with the whole-encoder tolerance above.
"""

from __future__ import annotations

import math
import sys

import pytest
import torch
from conftest import RecordingLaunchers, standing_in
from test_compile import KERNEL_OPS, TorchLaunchers

import oasr
from oasr import _checks
from oasr.jit.families import FAMILIES, NORM
from oasr.models import (
    CONFIGS,
    ConformerConfig,
    ConformerEncoder,
    ReferenceConformerEncoder,
    random_state_dict,
)
from oasr.models import reference as ref_module
from oasr.models.config import subsampled_length
from profiling.compare import PerVariant

HALF = [torch.float16, torch.bfloat16]
ULP = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
ENCODER_RTOL = {torch.float16: 2e-3, torch.bfloat16: 1.5e-2}
SMALL = ConformerConfig(d_model=128, heads=2, ff_dim=256, layers=2, kernel_size=7)
"""Head size 64, as the attention kernels take."""


@pytest.fixture
def stand_ins(monkeypatch):
    """Every family's launchers in torch on CPU tensors: main's mechanism (tests/test_compile.py's ``cpu_launchers``,
    without its dynamo resets, which only the compile test needs), the one place to switch to another. CPU tensors
    also count as sm90 for ``oasr.conv2d``, so that channels that are multiples of 8 take its implicit-GEMM launcher
    (whose stand-in is the direct one's)."""
    for family in FAMILIES:
        _checks.ready_devices(family).add(torch.device("cpu"))
    conv2d_module = sys.modules["oasr.conv2d"]  # (the module, which `oasr.conv2d` the op shadows)
    capability = conv2d_module.compute_capability
    monkeypatch.setattr(conv2d_module, "compute_capability", lambda d: (9, 0) if d.type == "cpu" else capability(d))
    with standing_in(PerVariant(TorchLaunchers)):
        yield
    _checks.forget_devices()


def loaded(cls: type, config: ConformerConfig, dtype: torch.dtype, seed: int = 1) -> torch.nn.Module:
    """``cls(config)`` with the float32 random state_dict of ``seed``, then cast to ``dtype``."""
    module = cls(config)
    module.load_state_dict(random_state_dict(config, seed))
    return module.to(dtype)


def pair(config: ConformerConfig, dtype: torch.dtype) -> tuple[ConformerEncoder, ReferenceConformerEncoder]:
    """The oasr encoder in ``dtype`` and the reference in float64, one state_dict."""
    return loaded(ConformerEncoder, config, dtype), loaded(ReferenceConformerEncoder, config, torch.float64)


def features(batch: int, frames: int, seed: int = 0, dim: int = 80) -> torch.Tensor:
    return torch.randn(batch, frames, dim, generator=torch.Generator().manual_seed(seed))


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual.double() - expected).norm() / expected.norm()).item()


def valid_frames(x: torch.Tensor, out_lengths: torch.Tensor) -> torch.Tensor:
    return x[torch.arange(x.shape[1], device=x.device) < out_lengths.unsqueeze(1)]


def assert_layer_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert actual.dtype == dtype and not actual.isnan().any()
    torch.testing.assert_close(actual.double(), expected, rtol=4 * ULP[dtype], atol=4 * ULP[dtype])


@pytest.fixture
def poisoned_allocations(monkeypatch):
    """Every output an op allocates (all the encoder's tensors) starts as NaN, so an element no kernel writes reaches
    the encoder's output."""

    def poisoned(allocate):
        def allocate_poisoned(*args):
            out = allocate(*args)
            return out.fill_(math.nan) if out.is_floating_point() else out

        return allocate_poisoned

    for op in KERNEL_OPS:
        scope = getattr(oasr, op).__globals__  # the declared op's own namespace (oasr/_op.py)
        monkeypatch.setitem(scope, "allocate", poisoned(scope["allocate"]))


# ---------------------------------------------------------------------------
# Structure and weights (no launches)
# ---------------------------------------------------------------------------


def test_state_dict_has_the_references_keys_and_loads_strictly():
    encoder, reference = ConformerEncoder(SMALL), ReferenceConformerEncoder(SMALL)
    assert list(encoder.state_dict()) == list(reference.state_dict())
    assert "encoders.1.conv_module.norm.running_var" in encoder.state_dict()
    assert "encoders.0.self_attn.linear_pos.weight" in encoder.state_dict()
    derived = {"qkv_weight", "qkv_bias", "pw1_weight", "pw2_weight", "dw_weight", "dw_bias"}
    assert not any(key.rsplit(".", 1)[-1] in derived for key in encoder.state_dict())
    encoder.load_state_dict(reference.state_dict())


def test_a_wenet_checkpoint_loads_with_its_stored_table():
    """WeNet stores its positional table (``embed.pos_enc.pe``); it is a constant and is not loaded."""
    config = SMALL.replace(position="wenet")
    state = random_state_dict(config)
    state["embed.pos_enc.pe"] = torch.zeros(1, 5000, config.d_model)
    encoder = ConformerEncoder(config)
    encoder.load_state_dict(state)
    assert encoder.embed.pos_enc.pe.abs().max() > 0.5


def test_loading_weights_packs_them_once():
    encoder = ConformerEncoder(SMALL)
    state = random_state_dict(SMALL, seed=5)
    encoder.load_state_dict(state)
    layer = encoder.encoders[1]
    q, k, v = (state[f"encoders.1.self_attn.linear_{n}.weight"] for n in "qkv")
    assert torch.equal(layer.qkv_weight, torch.cat([q, k, v]))
    prefix = "encoders.1.conv_module."
    norm = {n: state[prefix + "norm." + n].double() for n in ("weight", "bias", "running_mean", "running_var")}
    scale = norm["weight"] / (norm["running_var"] + SMALL.batch_norm_eps).sqrt()
    taps = state[prefix + "depthwise_conv.weight"].double()[:, 0].t() * scale
    bias = (state[prefix + "depthwise_conv.bias"].double() - norm["running_mean"]) * scale + norm["bias"]
    torch.testing.assert_close(layer.dw_weight.double(), taps, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(layer.dw_bias.double(), bias, rtol=1e-6, atol=1e-7)
    assert layer.dw_weight.is_contiguous() and layer.dw_weight.shape == (SMALL.kernel_size, SMALL.d_model)
    assert not layer.qkv_weight.requires_grad
    # .to() carries the packed weights; state_dict() stays ESPnet's.
    half = encoder.to(torch.bfloat16)
    assert half.encoders[1].qkv_weight.dtype == torch.bfloat16
    assert set(half.state_dict()) == set(state)
    # New weights are packed into the same memory (a CUDA graph captured before reads them).
    before = {name: buffer.data_ptr() for name, buffer in half.named_buffers()}
    half.load_state_dict(random_state_dict(SMALL, seed=6))
    assert {name: buffer.data_ptr() for name, buffer in half.named_buffers()} == before
    assert not torch.equal(half.encoders[1].qkv_weight, torch.cat([q, k, v]).bfloat16())


def test_from_config_builds_the_named_configurations():
    wenet = ConformerEncoder.from_config("wenet", device="cpu", layers=1)
    config = wenet.config
    assert (config.d_model, config.heads, config.ff_dim, config.kernel_size, config.position) == (
        256,
        4,
        2048,
        15,
        "wenet",
    )
    assert CONFIGS["wenet"].layers == 12 and CONFIGS["conformer-l"].layers == 17
    large = CONFIGS["conformer-l"]
    assert (large.d_model, large.heads, large.ff_dim, large.kernel_size) == (512, 8, 2048, 31)
    assert wenet.dtype == torch.bfloat16 and len(wenet.encoders) == 1
    norm = wenet.encoders[0].conv_module.norm
    assert norm.running_mean.abs().mean() > 0.01 and (norm.running_var - 1).abs().mean() > 0.1
    with pytest.raises(ValueError, match="unknown `name` 'conformer'"):
        ConformerEncoder.from_config("conformer")
    with pytest.raises(TypeError, match=r"`dtype` must be torch\.float16 or torch\.bfloat16"):
        ConformerEncoder.from_config("wenet", dtype=torch.float32, layers=1)


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="`heads`"):
        ConformerConfig(d_model=100, heads=3)
    with pytest.raises(ValueError, match="`kernel_size` must be odd"):
        ConformerConfig(kernel_size=4)
    with pytest.raises(ValueError, match="`position` must be one of"):
        ConformerConfig(position="abs")
    with pytest.raises(ValueError, match="`layers` must be an int >= 1"):
        ConformerConfig(layers=0)


def test_reference_masks():
    lengths = torch.tensor([3, 1])
    assert ref_module.key_mask(lengths, 4).tolist() == [[True] * 3 + [False], [True, False, False, False]]
    mask = ref_module.chunk_mask(5, 2, 0, torch.device("cpu")).int().tolist()
    assert mask == [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]]
    every = ref_module.chunk_mask(5, 2, -1, torch.device("cpu")).int().tolist()
    assert every[4] == [1, 1, 1, 1, 1] and every[1] == [1, 1, 0, 0, 0]
    assert ref_module.output_lengths(torch.tensor([0, 6, 7, 10, 11, 161])).tolist() == [0, 0, 1, 1, 2, 39]
    assert [subsampled_length(t) for t in (6, 7, 10, 11, 161)] == [0, 1, 1, 2, 39]


def test_rel_shift_reads_position_i_minus_j():
    t = 5
    raw = torch.randn(2, t, 2 * t - 1, dtype=torch.float64)
    shifted = ref_module.rel_shift(raw, "latest")
    expected = torch.stack([torch.stack([raw[:, i, t - 1 - i + j] for j in range(t)], -1) for i in range(t)], 1)
    assert torch.equal(shifted, expected)
    square = torch.randn(t, t, dtype=torch.float64)
    legacy = ref_module.rel_shift(square, "legacy")
    assert all(legacy[i, j] == square[i, t - 1 - i + j] for i in range(t) for j in range(i + 1))
    assert legacy[0, 1] == 0 and legacy[0, 2] == square[1, 0]  # the upper triangle reads the next row
    assert torch.equal(ref_module.rel_shift(square, "wenet"), square)


# ---------------------------------------------------------------------------
# CPU, stand-in launchers
# ---------------------------------------------------------------------------


def test_poisoned_allocations_reach_the_output(stand_ins, poisoned_allocations):
    with standing_in(RecordingLaunchers(), [NORM]):  # launches nothing
        assert oasr.layer_norm(torch.ones(2, 8), torch.ones(8)).isnan().all()


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("d_model", [128, 320], ids=["fused", "two-conv2d"])
def test_front_end_matches_the_reference(stand_ins, poisoned_allocations, dtype, d_model):
    """conv2d_subsampling (d <= 256) or two conv2d (d = 320), the projection, x * sqrt(d), the embeddings."""
    config = SMALL.replace(d_model=d_model, heads=d_model // 64, layers=1)
    encoder, reference = pair(config, dtype)
    feats = features(2, 37, seed=d_model).to(dtype)
    x, pos_emb = encoder.embed(feats)
    with torch.no_grad():
        expected, expected_pos = reference.embed(feats.double())
    assert x.shape == (2, 8, d_model) and pos_emb.shape == (15, d_model)
    torch.testing.assert_close(x.double(), expected, rtol=4 * ULP[dtype], atol=4 * ULP[dtype] * math.sqrt(d_model))
    torch.testing.assert_close(pos_emb.double(), expected_pos, rtol=ULP[dtype], atol=ULP[dtype])


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("position", ["latest", "wenet", "legacy"])
def test_each_layer_matches_the_reference(stand_ins, poisoned_allocations, dtype, position):
    """Each layer on the same input (the reference's previous layer, rounded to the storage dtype)."""
    config = SMALL.replace(position=position)
    encoder, reference = pair(config, dtype)
    feats, lengths = features(3, 61), torch.tensor([61, 40, 7])
    out_lengths = ref_module.output_lengths(lengths)
    with torch.no_grad():
        x, pos_emb = reference.embed(feats.double())
    frames = x.shape[1]
    mask = ref_module.attention_mask(out_lengths, frames, None, None, x.device)
    valid = ref_module.key_mask(out_lengths, frames)
    context = encoder.context(frames, pos_emb.to(dtype), out_lengths)
    for layer, reference_layer in zip(encoder.encoders, reference.encoders, strict=True):
        stored = x.to(dtype)
        with torch.no_grad():
            x = reference_layer(stored.double(), pos_emb, mask, valid)
        assert_layer_close(layer(stored, context), x, dtype)


@pytest.mark.parametrize(
    ("dtype", "position", "chunk"),
    [
        (torch.bfloat16, "latest", None),
        (torch.float16, "latest", None),
        (torch.float16, "wenet", None),
        (torch.bfloat16, "legacy", None),
        (torch.float16, "latest", (4, 1)),
        (torch.bfloat16, "wenet", (3, -1)),
    ],
    ids=str,
)
def test_encoder_matches_the_reference(stand_ins, poisoned_allocations, dtype, position, chunk):
    config = SMALL.replace(position=position)
    encoder, reference = pair(config, dtype)
    feats, lengths = features(3, 161, seed=2), torch.tensor([161, 100, 9])
    chunk_size, left_chunks = chunk or (None, None)
    out, out_lengths = encoder(feats, lengths, chunk_size, left_chunks)
    with torch.no_grad():
        expected, expected_lengths = reference(feats.double(), lengths, chunk_size, left_chunks)
        own, _ = loaded(ReferenceConformerEncoder, config, dtype)(feats, lengths, chunk_size, left_chunks)
    assert out.shape == (3, 39, 128) and out.dtype == dtype
    assert out_lengths.dtype == torch.int64 and out_lengths.tolist() == expected_lengths.tolist() == [39, 24, 1]
    assert not out.isnan().any()
    error = relative_error(valid_frames(out, out_lengths), valid_frames(expected, out_lengths))
    torch_error = relative_error(valid_frames(own, out_lengths), valid_frames(expected, out_lengths))
    assert error <= 1.25 * torch_error and error < ENCODER_RTOL[dtype], (error, torch_error)


def test_each_utterance_gets_its_own_output_in_a_padded_batch(stand_ins):
    dtype = torch.float16
    encoder, _ = pair(SMALL, dtype)
    feats, lengths = features(3, 161, seed=4), torch.tensor([161, 57, 7])
    out, out_lengths = encoder(feats, lengths)
    for b, length in enumerate(lengths.tolist()):
        alone, alone_lengths = encoder(feats[b : b + 1, :length])
        assert alone.shape[1] == alone_lengths[0] == out_lengths[b]
        torch.testing.assert_close(out[b, : alone.shape[1]], alone[0], rtol=2 * ULP[dtype], atol=2 * ULP[dtype])


@pytest.mark.parametrize("frames", [7, 10])
def test_one_output_frame_and_one_utterance(stand_ins, frames):
    dtype = torch.bfloat16
    encoder, reference = pair(SMALL.replace(layers=1), dtype)
    feats = features(1, frames, seed=frames)
    out, out_lengths = encoder(feats)
    with torch.no_grad():
        expected, _ = reference(feats.double())
    assert out.shape == (1, 1, 128) and out_lengths.tolist() == [1]
    torch.testing.assert_close(out.double(), expected, rtol=ENCODER_RTOL[dtype], atol=4 * ULP[dtype])


def test_an_empty_batch_and_utterances_too_short_for_a_frame(stand_ins, poisoned_allocations):
    encoder, reference = pair(SMALL.replace(layers=1), torch.bfloat16)
    out, out_lengths = encoder(features(0, 20), torch.zeros(0, dtype=torch.int64))
    assert out.shape == (0, 4, 128) and out_lengths.shape == (0,)
    feats, lengths = features(2, 20), torch.tensor([0, 6])  # no valid frame: every key hidden, the conv input zero
    out, out_lengths = encoder(feats, lengths)
    with torch.no_grad():
        expected, _ = reference(feats.double(), lengths)
    assert out_lengths.tolist() == [0, 0] and not out.isnan().any()
    torch.testing.assert_close(out.double(), expected, rtol=4 * ULP[torch.bfloat16], atol=4 * ULP[torch.bfloat16])


def test_the_encoder_compiles_into_one_graph_of_oasr_ops(stand_ins):
    torch._dynamo.reset()
    graphs: list[torch.fx.GraphModule] = []

    def recording_backend(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(gm)
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    encoder, _ = pair(SMALL.replace(layers=1), torch.bfloat16)
    feats, lengths = features(2, 61), torch.tensor([61, 30])
    expected, expected_lengths = encoder(feats, lengths)
    compiled = torch.compile(encoder, backend=recording_backend, fullgraph=True)
    out, out_lengths = compiled(feats, lengths)
    assert len(graphs) == 1
    called = [str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"]
    ops = {"gemm", "gemm_glu", "add_layer_norm", "layer_norm", "depthwise_conv1d", "conv2d_subsampling", "scale_out"}
    assert {f"oasr.{op}.default" for op in ops} <= set(called)
    assert called.count("oasr.gemm.default") == 1 + 8 and called.count("oasr.add_layer_norm.default") == 4
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert torch.equal(out_lengths, expected_lengths)


@pytest.mark.parametrize(
    ("position", "chunk_size", "left_chunks"), [("latest", 4, 1), ("wenet", 3, -1), ("latest", 5, 0), ("wenet", 2, 2)]
)
def test_streaming_matches_the_chunk_masked_encoder(stand_ins, poisoned_allocations, position, chunk_size, left_chunks):
    dtype = torch.float16
    config = SMALL.replace(position=position, causal=True)
    encoder, reference = pair(config, dtype)
    feats = features(2, 101, seed=chunk_size)
    streamed = encoder.forward_chunk_by_chunk(feats, chunk_size, left_chunks)
    full, _ = encoder(feats, chunk_size=chunk_size, left_chunks=left_chunks)
    with torch.no_grad():
        expected, _ = reference(feats.double(), chunk_size=chunk_size, left_chunks=left_chunks)
        unchunked, _ = reference(feats.double())
    assert streamed.shape == full.shape == (2, 24, 128)
    torch.testing.assert_close(streamed, full, rtol=2 * ULP[dtype], atol=2 * ULP[dtype])
    assert relative_error(streamed, expected) < ENCODER_RTOL[dtype]
    assert relative_error(unchunked.to(dtype), expected) > 10 * ENCODER_RTOL[dtype]  # the mask matters


def test_streaming_steps_and_their_errors(stand_ins):
    encoder, _ = pair(SMALL.replace(causal=True, layers=1), torch.float16)
    stream = encoder.stream(batch_size=1, chunk_size=2, left_chunks=1)
    assert stream.window_frames == 11
    feats = features(1, 40)
    first, second = stream.step(feats[:, :11]), stream.step(feats[:, 8:19])
    assert first.shape == second.shape == (1, 2, 128) and stream.offset == 4
    assert stream.caches[0].qkv.shape[1] == 2  # left_chunks * chunk_size frames kept
    with pytest.raises(ValueError, match="a chunk's window has 7 to 11"):
        stream.step(feats[:, :12])
    with pytest.raises(ValueError, match=r"`feats` must be \[1, W, F\]"):
        stream.step(feats.expand(2, -1, -1))
    centred, _ = pair(SMALL.replace(layers=1), torch.float16)
    with pytest.raises(ValueError, match=r"config\.causal is False"):
        centred.stream()
    legacy, _ = pair(SMALL.replace(layers=1, position="legacy", causal=True), torch.float16)
    with pytest.raises(ValueError, match="legacy relative positions"):
        legacy.stream()
    with pytest.raises(ValueError, match="`chunk_size` must be an int >= 1"):
        encoder.stream(chunk_size=0)


def test_bad_inputs_are_refused_before_any_launch(stand_ins):
    encoder, _ = pair(SMALL.replace(layers=1), torch.bfloat16)
    feats = features(2, 20)
    with pytest.raises(TypeError, match="`feats` must be a floating-point tensor"):
        encoder(feats.long())
    with pytest.raises(TypeError, match="`feats` must be a floating-point tensor"):
        encoder([[0.0]])
    with pytest.raises(ValueError, match=r"`feats` must be \[B, T, 80\]"):
        encoder(feats[..., :40])
    with pytest.raises(ValueError, match=r"`feats` must be \[B, T, 80\]"):
        encoder(feats[0])
    with pytest.raises(ValueError, match="T = 6 frames; Conv2dSubsampling4 needs T >= 7"):
        encoder(feats[:, :6])
    with pytest.raises(TypeError, match="`lengths` must be an integer tensor"):
        encoder(feats, torch.tensor([20.0, 10.0]))
    with pytest.raises(TypeError, match="`lengths` must be an integer tensor"):
        encoder(feats, [20, 10])
    with pytest.raises(ValueError, match=r"`lengths` has shape \(3,\), expected \(2,\)"):
        encoder(feats, torch.tensor([20, 10, 5]))
    with pytest.raises(ValueError, match="`chunk_size` must be None or an int >= 1"):
        encoder(feats, chunk_size=0)
    with pytest.raises(ValueError, match="`left_chunks` needs `chunk_size`"):
        encoder(feats, left_chunks=2)
    with pytest.raises(TypeError, match="`left_chunks` must be None or an int"):
        encoder(feats, chunk_size=4, left_chunks=1.5)
    with pytest.raises(TypeError, match="the oasr ops take float16 or bfloat16"):
        encoder.float()(feats)


def test_graphed_needs_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU (the gpu tests run the runner)")
    encoder = ConformerEncoder(SMALL.replace(layers=1))
    with pytest.raises(RuntimeError, match="CUDA graphs need the encoder on a CUDA GPU"):
        encoder.graphed(max_batch=2, buckets=(64,))
    with pytest.raises(ValueError, match="`buckets` must be ints >= 7"):
        encoder.graphed(max_batch=2, buckets=(3,))


def test_the_package_exports_the_encoder():
    assert oasr.models.ConformerEncoder is ConformerEncoder
    assert "models" not in oasr.__all__  # (the ops' list)


# ---------------------------------------------------------------------------
# GPU: the real kernels in bfloat16
# ---------------------------------------------------------------------------


def gpu_pair(name: str, **changes: object) -> tuple[ConformerEncoder, ReferenceConformerEncoder]:
    """As :func:`pair` for a named configuration, in bfloat16, on the GPU."""
    encoder, reference = pair(CONFIGS[name].replace(**changes), torch.bfloat16)
    return encoder.cuda(), reference.cuda()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["wenet", "conformer-l"])
def test_encoder_on_the_gpu_matches_the_reference(device, name):
    encoder, reference = gpu_pair(name)
    feats = features(4, 1001, seed=7).to(device)
    lengths = torch.tensor([1001, 800, 250, 7], device=device)
    own_reference = loaded(ReferenceConformerEncoder, encoder.config, torch.bfloat16).cuda()
    with torch.no_grad():
        out, out_lengths = encoder(feats, lengths)
        expected, _ = reference(feats.double(), lengths)
        own, _ = own_reference(feats, lengths)
    error = relative_error(valid_frames(out, out_lengths).cpu(), valid_frames(expected, out_lengths).cpu())
    torch_error = relative_error(valid_frames(own, out_lengths).cpu(), valid_frames(expected, out_lengths).cpu())
    assert error <= 1.25 * torch_error and error < ENCODER_RTOL[torch.bfloat16], (error, torch_error)


@pytest.mark.gpu
def test_graphed_runner_matches_eager(device):
    encoder, _ = gpu_pair("wenet", layers=2)
    runner = encoder.graphed(max_batch=4, buckets=(128, 400))
    for frames, batch in ((400, 4), (123, 3), (128, 1), (401, 2)):  # 401: no bucket, eager
        feats = features(batch, frames, seed=frames).to(device)
        lengths = torch.linspace(frames, 7, batch).long().to(device)
        out, out_lengths = runner(feats, lengths)
        expected, expected_lengths = encoder(feats, lengths)
        assert torch.equal(out_lengths, expected_lengths)
        rtol = atol = 4 * ULP[torch.bfloat16]  # (other batch and time sizes: other gemm tiles, another rounding)
        actual, expected = valid_frames(out, out_lengths), valid_frames(expected, out_lengths)
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)


@pytest.mark.gpu
def test_compiled_encoder_on_the_gpu(device):
    torch._dynamo.reset()
    encoder, _ = gpu_pair("wenet", layers=2)
    feats, lengths = features(2, 300).to(device), torch.tensor([300, 123], device=device)
    expected, out_lengths = encoder(feats, lengths)
    out, _ = torch.compile(encoder, fullgraph=True)(feats, lengths)
    rtol = atol = 4 * ULP[torch.bfloat16]  # (inductor compiles the torch ops between the oasr ones)
    actual, expected = valid_frames(out, out_lengths), valid_frames(expected, out_lengths)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)


@pytest.mark.gpu
def test_streaming_on_the_gpu(device):
    encoder, reference = gpu_pair("wenet", layers=2, causal=True)
    feats = features(1, 803).to(device)
    streamed = encoder.forward_chunk_by_chunk(feats, 16, 4)
    full, _ = encoder(feats, chunk_size=16, left_chunks=4)
    expected, _ = reference(feats.double(), chunk_size=16, left_chunks=4)
    rtol = atol = 4 * ULP[torch.bfloat16]
    torch.testing.assert_close(streamed, full, rtol=rtol, atol=atol)
    assert relative_error(streamed.cpu(), expected.cpu()) < ENCODER_RTOL[torch.bfloat16]
