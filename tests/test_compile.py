"""torch.compile: every public op traces into one graph (fullgraph=True), as ``torch.ops.oasr.<op>``.

CPU tests: a small Conformer-style block of oasr ops (add_rms_norm -> projection -> glu ->
swish -> layer_norm -> scale) is traced by dynamo with fullgraph=True into one FX graph
holding the oasr custom ops; run with ``aot_eager`` (functionalization of the ops' ``out=``
and in-place ``residual_out=`` writes) on CPU tensors, with every family's launchers
replaced by torch code, it matches eager. Eager calls do not go through the dispatcher.

GPU test: the block compiled with the default backend (inductor) matches eager, for
float32, float16 and bfloat16.

Public ops in ``PURE_TORCH`` launch no kernel: they are plain torch code, which dynamo traces
natively, so they have no custom op; :func:`every_op` still calls them inside the compiled
function, which proves they cause no graph break.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import get_rtol_atol, standing_in, unpack_subsampling_weight2

import oasr
from oasr import _checks
from oasr.jit import gemm_config
from oasr.jit.enums import enumerator
from oasr.jit.families import FAMILIES
from profiling.compare import PerVariant

PURE_TORCH = {"fold_batch_norm"}
"""Public ops written in plain torch (no kernel, no custom op): dynamo traces through them."""
KERNEL_OPS = [op for family in FAMILIES for op in family.ops if op not in PURE_TORCH]
OASR_OPS = {f"oasr.{op}.default" for op in KERNEL_OPS}
"""The allocating custom ops; ``oasr.<op>_out`` writes a given ``out``."""
ACTIVATIONS = {None: lambda y: y, "silu": F.silu, "relu": F.relu, "gelu": F.gelu}
"""The activations the launchers take by name."""
BIAS_ACTIVATIONS = {**ACTIVATIONS, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}
"""bias_activation's (gemm's)."""
GEMM_EPILOGUES = {
    "plain": lambda y: y,
    "bias": lambda y: y,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
    "silu": F.silu,
    "glu": lambda y: F.glu(y, -1),
}
"""A gemm module's epilogue (its variant's -DOASR_GEMM_EPILOGUE; glu: weight [2N, K])."""
assert set(GEMM_EPILOGUES) == {*gemm_config.EPILOGUES, "glu"}


class ConformerBlock(torch.nn.Module):
    """Macaron half-step residual with RMSNorm, a GLU projection, Swish, LayerNorm, a scale."""

    def __init__(self, channels: int, dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)

        def param(*shape: int, scale: float = 1.0, offset: float = 0.0) -> torch.nn.Parameter:
            value = offset + scale * torch.randn(shape, generator=generator)
            return torch.nn.Parameter(value.to(dtype=dtype, device=device), requires_grad=False)

        self.rms_weight = param(channels, scale=0.1, offset=1.0)
        self.projection = param(channels, 2 * channels, scale=channels**-0.5)
        self.ln_weight = param(channels, scale=0.1, offset=1.0)
        self.ln_bias = param(channels, scale=0.1)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        # residual += 0.5 * x, in place; h = rms_norm(residual)
        h = oasr.add_rms_norm(x, residual, self.rms_weight, None, 1e-5, 0.5, residual_out=residual)
        g = oasr.glu(h @ self.projection)
        s = oasr.swish(g, out=g)
        n = oasr.layer_norm(s, self.ln_weight, self.ln_bias)
        return oasr.scale(n, 0.5, out=torch.empty_like(n))


def _inputs(dtype: torch.dtype, device: torch.device | str, channels: int = 64) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2, 7, channels, generator=generator).to(dtype=dtype, device=device)
    residual = torch.randn(2, 7, channels, generator=generator).to(dtype=dtype, device=device)
    return x, residual


# ---------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------


class TorchLaunchers:
    """Every family's launchers, written with torch (fp32 math, one rounding): run on CPU tensors. A module built
    per configuration reads its configuration from ``variant``'s flags."""

    def __init__(self, variant=None):
        flags = (
            dict(flag.removeprefix("-D").split("=", 1) for flag in variant.cuda_cflags if "=" in flag)
            if variant
            else {}
        )
        epilogues = {enumerator(name): name for name in GEMM_EPILOGUES}
        self.epilogue = GEMM_EPILOGUES[epilogues.get(flags.get("OASR_GEMM_EPILOGUE"), "plain")]
        self.b_n_major = flags.get("OASR_GEMM_B_NMAJOR") == "1"

    def scale(self, out, input, factor):
        out.copy_(input.float() * factor)

    def glu(self, out, input):
        out.copy_(F.glu(input.float(), -1))

    def swish(self, out, input):
        out.copy_(F.silu(input.float()))

    def bias_activation(self, out, input, bias, activation):
        out.copy_(BIAS_ACTIVATIONS[activation](input.float() + (0.0 if bias is None else bias.float())))

    def layer_norm(self, out, input, weight, bias, eps):
        cols = (input.shape[-1],)
        out.copy_(F.layer_norm(input.float(), cols, weight.float(), None if bias is None else bias.float(), eps))

    def rms_norm(self, out, input, weight, bias, eps):
        y = F.rms_norm(input.float(), (input.shape[-1],), weight.float(), eps)
        out.copy_(y if bias is None else y + bias.float())

    def add_layer_norm(self, out, residual_out, input, residual, weight, bias, eps, alpha):
        total = residual.float() + alpha * input.float()
        if residual_out is not None:
            residual_out.copy_(total)
        self.layer_norm(out, total, weight, bias, eps)

    def add_rms_norm(self, out, residual_out, input, residual, weight, bias, eps, alpha):
        total = residual.float() + alpha * input.float()
        if residual_out is not None:
            residual_out.copy_(total)
        self.rms_norm(out, total, weight, bias, eps)

    def depthwise_conv1d(self, out, input, weight, bias, pad_left, pad_right, mask, activation):
        x = input.float()
        if mask is not None:  # [B, T] uint8 (a view of the bool mask): zero the masked frames
            x = x.masked_fill(~mask.bool().unsqueeze(-1), 0.0)
        x = F.pad(x.transpose(1, 2), (pad_left, pad_right))
        y = F.conv1d(x, weight.float().t().unsqueeze(1), None if bias is None else bias.float(), groups=x.shape[1])
        out.copy_(ACTIVATIONS[activation](y).transpose(1, 2))

    def gemm(self, out, input, weight, bias):  # [M, K] x [N, K] -> [M, N], fp32
        y = F.linear(input.float(), weight.float(), None if bias is None else bias.float())
        out.copy_(self.epilogue(y))

    def bmm(self, out, a, b):
        out.copy_(a.float() @ (b.float() if self.b_n_major else b.float().transpose(1, 2)))

    def group_gemm_workspace_size(self, groups, device):
        return 0

    def group_gemm(self, out, input, weight, offsets, bias, workspace, error, pdl):  # rows of [L, K] by group
        start = 0
        for g, end in enumerate(offsets.tolist()):
            b = None if bias is None else bias[g].float()
            out[start:end] = F.linear(input[start:end].float(), weight[g].float(), b)
            start = end

    def depthwise_conv1d_step(self, out, input, state, weight, bias, activation):
        full = torch.cat([state, input], dim=1)  # the left context, then the chunk
        self.depthwise_conv1d(out, full, weight, bias, 0, 0, None, activation)
        state.copy_(full[:, full.shape[1] - state.shape[1] :])

    def conv2d_direct(self, out, input, weight, bias, sh, sw, ph, pw, activation):  # NHWC, KRSC
        x, w = input.float().permute(0, 3, 1, 2), weight.float().permute(0, 3, 1, 2)
        y = F.conv2d(x, w, None if bias is None else bias.float(), (sh, sw), (ph, pw))
        out.copy_(ACTIVATIONS[activation](y).permute(0, 2, 3, 1))

    conv2d_implicit_gemm = conv2d_direct

    def attention(self, out, q, k, v, lengths, scale, chunk_size, left_chunks):
        self._attend(out, q, k, v, None, lengths, scale, chunk_size, left_chunks)

    def rel_pos_attention(self, out, q, k, v, p, pos_bias_u, pos_bias_v, lengths, shift, scale, chunk, left):
        t = q.shape[1]
        positional = (q + pos_bias_v).float().transpose(1, 2) @ p.float().permute(1, 2, 0)  # [B, H, T, P]
        if shift:  # p's row r is the relative position T - 1 - r
            i, j = torch.arange(t, device=q.device)[:, None], torch.arange(t, device=q.device)[None]
            positional = positional.gather(-1, (t - 1 - i + j).expand(*positional.shape[:2], t, t))
        self._attend(out, q + pos_bias_u, k, v, positional, lengths, scale, chunk, left)

    def _attend(self, out, q, k, v, positional, lengths, scale, chunk, left):  # [B, T, H, D], masked rows zero
        t = q.shape[1]
        scores = q.float().transpose(1, 2) @ k.float().permute(0, 2, 3, 1)
        if positional is not None:
            scores = scores + positional
        i, j = torch.arange(t, device=q.device)[:, None], torch.arange(t, device=q.device)[None]
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device)
        if chunk > 0:
            start = torch.zeros_like(i) if left < 0 else ((i // chunk - left) * chunk).clamp(min=0)
            mask = (j >= start) & (j < (i // chunk + 1) * chunk)
        if lengths is not None:
            mask = mask & (j < lengths.clamp(0, t).view(-1, 1, 1, 1))
        weights = torch.softmax((scores * scale).masked_fill(~mask, float("-inf")), -1).masked_fill(~mask, 0.0)
        out.copy_((weights @ v.float().transpose(1, 2)).transpose(1, 2))

    def conv2d_subsampling_smem_bytes(self, f2, d):
        return 0

    def conv2d_subsampling(self, out, input, weight1, bias1, weight2, bias2):  # weight2: the kernel's image
        weight2 = unpack_subsampling_weight2(weight2, weight1.shape[0])
        y1 = F.relu(F.conv2d(input.float()[:, None], weight1.float()[:, None], bias1.float(), stride=2))
        y2 = F.relu(F.conv2d(y1.to(input.dtype).float(), weight2.float(), bias2.float(), stride=2))
        out.copy_(y2.transpose(1, 2).reshape(out.shape))


@pytest.fixture
def cpu_launchers():
    """CPU tensors pass the device check and every family runs TorchLaunchers."""
    for family in FAMILIES:
        _checks.ready_devices(family).add(torch.device("cpu"))
    torch._dynamo.reset()
    with standing_in(PerVariant(TorchLaunchers)):
        yield
    torch._dynamo.reset()
    _checks.forget_devices()


def test_every_op_is_a_custom_op_with_the_launchers_signature():
    for op in KERNEL_OPS:
        written = getattr(torch.ops.oasr, f"{op}_out").default._schema
        assert written.returns == [] and written.arguments[0].name == "out" and written.arguments[0].alias_info.is_write
        allocating = getattr(torch.ops.oasr, op).default._schema
        assert [a.name for a in allocating.arguments] == [a.name for a in written.arguments[1:]]
        assert len(allocating.returns) == 1
    assert not any(hasattr(torch.ops.oasr, op) for op in PURE_TORCH)  # traced as the torch code they are
    assert {op for family in FAMILIES for op in family.ops} >= PURE_TORCH


def opcheck_cases(device: torch.device | str) -> dict[str, tuple]:
    """Arguments of each custom op: the outputs first (as the launchers take them), then the op's arguments."""
    x = torch.randn(2, 3, 8, device=device)
    w, r = torch.rand(8, device=device) + 0.5, torch.randn(2, 3, 8, device=device)
    taps, mask = torch.randn(3, 8, device=device), torch.tensor([[True, False, True]] * 2, device=device)

    def new(*shape: int) -> torch.Tensor:
        return torch.empty(shape or x.shape, device=device)

    q, k, v, p, bias = attention_inputs(x.bfloat16(), w.bfloat16())
    lengths = torch.tensor([3, 1], dtype=torch.int32, device=device)
    return {
        "attention": (torch.empty_like(q), q, k, v, lengths, 0.125, 2, 0),
        "rel_pos_attention": (torch.empty_like(q), q, k, v, p, bias, bias, None, True, None, None, None),
        "scale": (new(), x, 2.0),
        "glu": (new(2, 3, 4), x),
        "swish": (new(), x),
        "bias_activation": (new(), x, w, "gelu"),
        "layer_norm": (new(), x, w, w, 1e-5),
        "rms_norm": (new(), x, w, None, 1e-5),
        "add_layer_norm": (new(), new(), x, r, w, w, 1e-5, 0.5),
        "add_rms_norm": (new(), None, x, r, w, None, 1e-5, 0.5),
        "depthwise_conv1d": (new(2, 4, 8), x, taps, w, [2, 1], "silu", mask),
        "depthwise_conv1d_step": (new(), x, torch.randn(2, 2, 8, device=device), taps, None, "gelu"),
        "conv2d": (
            new(2, 2, 4, 8).bfloat16(),
            x[..., None].bfloat16(),
            w.view(8, 1, 1, 1).bfloat16(),
            None,
            [2, 2],
            [0, 0],
            "silu",
        ),
        "conv2d_subsampling": (
            new(1, 1, 16).bfloat16(),
            torch.randn(1, 9, 9, device=device).bfloat16(),
            torch.randn(16, 1, 3, 3, device=device).bfloat16(),
            w.repeat(2).bfloat16(),
            torch.randn(16, 16, 3, 3, device=device).bfloat16(),
            w.repeat(2).bfloat16(),
        ),
    }


def attention_inputs(h: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q, k, v [B, T, 2, 64], p [2T - 1, 2, 64] and a bias [2, 64] from a half [B, T, C] tensor and a [C] one."""

    def widened(x: torch.Tensor) -> torch.Tensor:  # the last dimension repeated or cut to 128
        return torch.cat([x] * -(-128 // x.shape[-1]), -1)[..., :128]

    q = widened(h).reshape(*h.shape[:2], 2, 64)
    p = torch.cat([q[0], q[0, 1:]], 0)
    return q, q.flip(1), q * 0.5, p, widened(w).reshape(2, 64)


def test_opcheck(cpu_launchers):
    """torch.library.opcheck: schema, fake implementation and AOT dispatch agree with the op (both forms)."""
    for name, args in opcheck_cases("cpu").items():
        torch.library.opcheck(getattr(torch.ops.oasr, f"{name}_out").default, args)
        torch.library.opcheck(getattr(torch.ops.oasr, name).default, args[1:])


def test_the_block_traces_into_one_graph_of_oasr_ops(cpu_launchers):
    graphs: list[torch.fx.GraphModule] = []

    def recording_backend(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(gm)
        return gm.forward

    block = ConformerBlock(64, torch.float32, "cpu")
    x, residual = _inputs(torch.float32, "cpu")
    torch.compile(block, backend=recording_backend, fullgraph=True)(x, residual.clone())
    assert len(graphs) == 1
    called = {str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"}
    # (swish and scale write a given `out`)
    block_ops = {"oasr.add_rms_norm.default", "oasr.glu.default", "oasr.swish_out.default"}
    block_ops |= {"oasr.layer_norm.default", "oasr.scale_out.default"}
    assert block_ops <= called, f"missing: {block_ops - called}"
    # The ops of this block and none of the ops they would decompose into.
    assert not {"aten.native_layer_norm.default", "aten.silu.default", "aten.glu.default"} & called


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_compiled_block_matches_eager(cpu_launchers, dtype):
    block = ConformerBlock(64, dtype, "cpu")
    x, residual = _inputs(dtype, "cpu")
    eager_residual, compiled_residual = residual.clone(), residual.clone()
    expected = block(x, eager_residual)
    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    for _ in range(2):  # the second call runs the cached graph
        compiled_residual.copy_(residual)
        actual = compiled(x, compiled_residual)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        torch.testing.assert_close(compiled_residual, eager_residual, rtol=0, atol=0)


def every_op(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> list[torch.Tensor]:
    """Each public op, allocating and with ``out=``."""
    results = [
        oasr.scale(x, 3.0),
        oasr.glu(x),
        oasr.swish(x),
        oasr.bias_activation(x, weight, "silu"),
        oasr.layer_norm(x, weight, weight),
        oasr.rms_norm(x, weight),
        oasr.add_layer_norm(x, residual, weight, alpha=0.5),
        oasr.add_rms_norm(x, residual, weight, weight, 1e-6, 2.0),
    ]
    out = torch.empty_like(x)
    total = torch.empty_like(x)
    results.append(oasr.add_layer_norm(x, residual, weight, out=out, residual_out=total).clone())
    results.append(total)
    results.append(oasr.rms_norm(x, weight, out=torch.empty_like(x)))
    # conv1d: taps [3, C] folded with a BatchNorm (plain torch), a masked "same" convolution,
    # a causal one into `out=`, and two streaming steps that update their state in place.
    taps, bias = oasr.fold_batch_norm(residual[0, :3], weight, weight - 1.0, weight, weight, weight)
    results += [taps, bias]
    results.append(oasr.depthwise_conv1d(x, taps, bias, padding=1, activation="silu", mask=residual[..., 0] > 0))
    causal = torch.empty(x.shape[0], x.shape[1] + 1, x.shape[2], dtype=x.dtype, device=x.device)
    results.append(oasr.depthwise_conv1d(x, taps.unsqueeze(1), None, (3, 0), out=causal))
    state = torch.zeros_like(x[:, :2])
    results.append(oasr.depthwise_conv1d_step(x[:, :4], state, taps, bias, "gelu"))
    results.append(oasr.depthwise_conv1d_step(x[:, 4:], state, taps, out=torch.empty_like(x[:, 4:])))
    results.append(state)
    # gemm, bmm and group_gemm take half types: a bf16 projection with each epilogue kind, GLU, both attention
    # products, two groups of rows.
    h, w = x.to(torch.bfloat16), weight.to(torch.bfloat16)
    projection = torch.outer(w, w[: h.shape[-1] // 2].repeat(2)) / h.shape[-1]  # [C, C]
    results.append(oasr.gemm(h, projection))
    results.append(oasr.gemm(h, projection, w, "silu", out=torch.empty_like(h)))
    results.append(oasr.gemm_glu(h, projection, w))
    results.append(oasr.bmm(h, h.transpose(1, 2)))
    results.append(oasr.bmm(h, projection.expand(h.shape[0], -1, -1)))
    experts, ends = (
        torch.stack([projection, projection.flip(0)]),
        torch.tensor([3, 7], dtype=torch.int32, device=h.device),
    )
    results.append(oasr.group_gemm(h[0], experts, ends))
    results.append(oasr.group_gemm(h[0], experts, ends, torch.stack([w, w.flip(0)]), out=torch.empty_like(h[0])))
    # conv2d: a 1 -> 8 channel convolution of [B, T, C] seen as an NHWC image, and the fused Conv2dSubsampling4.
    results.append(oasr.conv2d(h[..., None], projection[:8, :9].reshape(8, 3, 3, 1), w[:8], 2, 1, "relu"))
    w1 = projection[:, :9].reshape(-1, 1, 3, 3)
    w2 = projection[:, :, None, None].expand(-1, -1, 3, 3).contiguous()
    results.append(oasr.conv2d_subsampling(h, w1, w, w2, w))
    # attention: q, k, v [B, T, 2, 64] and p from h; key lengths, a chunk mask, both relative forms.
    q, k, v, p, bias = attention_inputs(h, w)
    lengths = torch.tensor([h.shape[1], 2], dtype=torch.int32, device=h.device)
    results.append(oasr.attention(q, k, v, lengths, chunk_size=2, left_chunks=1))
    results.append(oasr.rel_pos_attention(q, k, v, p, bias, bias, lengths, out=torch.empty_like(q)))
    results.append(oasr.rel_pos_attention(q, k, v, p[: h.shape[1]], bias, bias, shift=False))
    results.append(oasr.scale(x, 0.25, out=x))  # in place, last
    return results


def test_every_op_compiles_without_a_break_and_matches_eager(cpu_launchers):
    graphs: list[torch.fx.GraphModule] = []

    def recording_backend(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(gm)
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    x, residual = _inputs(torch.float32, "cpu", channels=16)
    weight = torch.rand(16) + 0.5
    expected = every_op(x.clone(), residual, weight)
    actual = torch.compile(every_op, backend=recording_backend, fullgraph=True)(x.clone(), residual, weight)
    assert len(graphs) == 1
    called = {str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"}
    missing = {op for op in KERNEL_OPS if not {f"oasr.{op}.default", f"oasr.{op}_out.default"} & called}
    assert not missing, f"missing: {missing}"
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=0, atol=0)


def test_dynamo_explain_finds_no_break(cpu_launchers):
    block = ConformerBlock(32, torch.float32, "cpu")
    explanation = torch._dynamo.explain(block)(*_inputs(torch.float32, "cpu", channels=32))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0


def test_compiled_errors_are_the_eager_ones(cpu_launchers):
    """The custom op runs the eager op, checks included: a bad `out` raises its own error."""

    def bad(x):
        return oasr.swish(x, out=torch.empty(3, dtype=x.dtype))

    with pytest.raises(ValueError, match=r"oasr.swish: `out` has shape \(3,\), expected \(2, 4\)"):
        torch.compile(bad, backend="aot_eager", fullgraph=True)(torch.ones(2, 4))

    def bad_conv(x, activation, padding):
        return oasr.depthwise_conv1d(x, torch.ones(3, 4), activation=activation, padding=padding)

    compiled = torch.compile(bad_conv, backend="aot_eager", fullgraph=True)
    with pytest.raises(ValueError, match=r"oasr.depthwise_conv1d: unknown `activation` 'swish'"):
        compiled(torch.ones(1, 5, 4), "swish", 1)
    with pytest.raises(ValueError, match=r"oasr.depthwise_conv1d: the kernel size K=3 .* larger than the padded"):
        compiled(torch.ones(1, 1, 4), None, 0)
    with pytest.raises(ValueError, match=r"oasr.depthwise_conv1d: `padding` must be >= 0"):
        compiled(torch.ones(1, 5, 4), None, -1)


def test_eager_calls_skip_the_dispatcher(cpu_launchers, monkeypatch):
    def dispatched(*args):
        raise AssertionError("an eager call went through torch.ops.oasr")

    for op in (oasr.rms_norm, oasr.glu, oasr.scale, oasr.depthwise_conv1d, oasr.depthwise_conv1d_step):
        for name in ("custom", "custom_out"):  # the custom ops the declared op calls while compiling
            monkeypatch.setitem(op.__globals__, name, dispatched)
    x = torch.randn(2, 8)
    oasr.rms_norm(x, torch.ones(8))
    oasr.glu(x)
    oasr.scale(x, 2.0)
    oasr.depthwise_conv1d(x.view(1, 2, 8), torch.ones(2, 8))
    oasr.depthwise_conv1d_step(x.view(1, 2, 8), torch.zeros(1, 1, 8), torch.ones(2, 8))


def test_eager_and_compiled_outputs_have_one_layout(cpu_launchers):
    """One allocation serves both paths (the op's declared layout): a gemm whose N rows are not 16-byte multiples
    gets the same padded rows eager and compiled."""
    x, w = torch.randn(5, 16, dtype=torch.bfloat16), torch.randn(12, 16, dtype=torch.bfloat16)
    eager = oasr.gemm(x, w)
    compiled = torch.compile(lambda a, b: oasr.gemm(a, b), backend="aot_eager", fullgraph=True)(x, w)
    assert eager.stride() == compiled.stride() == (16, 1)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------


def test_opcheck_on_cuda(device):
    for name, args in opcheck_cases(device).items():
        torch.library.opcheck(getattr(torch.ops.oasr, f"{name}_out").default, args)
        torch.library.opcheck(getattr(torch.ops.oasr, name).default, args[1:])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_compiled_block_matches_eager_on_cuda(device, dtype):
    torch._dynamo.reset()
    block = ConformerBlock(256, dtype, device)
    x, residual = _inputs(dtype, device, channels=256)
    eager_residual, compiled_residual = residual.clone(), residual.clone()
    with torch.no_grad():
        expected = block(x, eager_residual)
        actual = torch.compile(block, fullgraph=True)(x, compiled_residual)
    rtol, atol = get_rtol_atol(dtype)
    torch.testing.assert_close(compiled_residual, eager_residual, rtol=rtol, atol=atol)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_every_op_compiled_matches_eager_on_cuda(device, dtype):
    torch._dynamo.reset()
    x, residual = _inputs(dtype, device, channels=256)
    weight = (torch.rand(256) + 0.5).to(dtype=dtype, device=device)
    expected = every_op(x.clone(), residual, weight)
    actual = torch.compile(every_op, fullgraph=True)(x.clone(), residual, weight)
    # The same kernels, though inductor's buffers may take another (vector or scalar) path.
    rtol, atol = get_rtol_atol(dtype)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=rtol, atol=atol)
