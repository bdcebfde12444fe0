"""The peers: libraries a kernel engineer would use instead of Oasr, and how each computes an op of the harness.

A :class:`Library` is a package (how to import it, its distribution for the version, and what stops it
travelling to the lent H200 when it cannot); a :class:`Peer` is one way of running ops with it (FlashInfer's
kernels, Inductor in one mode, one SDPA backend), one :class:`Impl` per op of
:data:`profiling.harness.ops.OPS` it computes. An impl turns one of the op's input sets into a zero-argument
launch: what a model would do once (a weight in float32, GLU's halves in the order the peer gates them) is
done there, untimed; the launch does the op. ``lacks`` says, per op, why the peer has no such function, so the
table says it rather than leaving a blank. Nothing here runs at import: a library is imported on first use,
and a missing one is a reason, not an error.

Semantics are checked, not assumed: ``benchmarks/peers.py`` compares every peer's output with the op's
float64 reference (:func:`profiling.harness.correctness.compare`), so a peer that computes another function
(a norm without its weight, eps elsewhere, the gate on the other half) is flagged there.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from profiling.harness.ops import OPS, Inputs, OpSpec, dtype_name
from profiling.harness.ops.norm import ALPHA, EPS


class Unsupported(Exception):
    """The peer does not run this op in this dtype, shape or layout; the message says why (a table cell)."""


@dataclass
class UnitContext:
    """What the impls of one (op, config, dtype) share: the loaded library, what its ``prepare`` made (built
    JIT modules), and a cache for what they build once for the shape (a compiled function, a cuDNN graph) and
    reuse for every input set."""

    op: OpSpec
    config: Mapping[str, int]
    dtype: torch.dtype
    module: Any
    prepared: Any = None
    cache: dict[str, Any] = field(default_factory=dict)


Launch = Callable[[], torch.Tensor]
Make = Callable[[UnitContext, Inputs], Launch]


@dataclass(frozen=True)
class Impl:
    """How a peer computes one op: ``make(ctx, inputs)`` returns the launch (raises :class:`Unsupported`).

    ``dtypes``: the storage dtypes the peer takes (None: all of the op's). ``note``: how it computes the op
    where that is not the obvious call (shown under the table). ``reference``: ``"op"`` checks it against the
    op's float64 reference, ``"torch"`` against the torch backend's (for a compiled torch backend, which
    rounds where torch's does)."""

    make: Make
    dtypes: tuple[str, ...] | None = None
    note: str = ""
    reference: str = "op"


@dataclass(frozen=True)
class Library:
    """A package a peer needs. ``load`` imports it (ImportError and friends become the peer's reason);
    ``cannot_travel``, when set, says why the device call cannot carry it (shown when it does not import);
    ``prepare``, when set, builds what its peers load (JIT modules) once per process, before the timing."""

    name: str
    distribution: str
    load: Callable[[], Any]
    cannot_travel: str | None = None
    prepare: Callable[[], Any] | None = None

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"


@dataclass(frozen=True)
class Peer:
    """One way of running ops with a library: a column of the table."""

    name: str
    library: Library
    impls: Mapping[str, Impl]
    lacks: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    optional_flag: str | None = None
    """The command-line flag that turns it on (it is slow); without it the peer is a 'not requested' row."""


def rows(x: torch.Tensor) -> torch.Tensor:
    """``[..., c]`` as ``[rows, c]`` (a view of a contiguous tensor): the 2-D layout the norm libraries take."""
    return x.reshape(-1, x.shape[-1])


def _weight_f32(ctx: UnitContext, inputs: Inputs, name: str) -> torch.Tensor:
    return inputs[name].float()


# ---------------------------------------------------------------------------------------------- FlashInfer

GATE_NAME = "oasr_sigmoid"
"""The activation FlashInfer's act-and-mul template is instantiated with for GLU: ``act(x[:d]) * x[d:]``."""
GATE_FUNCTION = f"{GATE_NAME}_and_mul"
"""The template's function, and its module's name."""
GATE_DEFINITION = r"""
__device__ __forceinline__ float oasr_sigmoid(const float& val) {
  return 1.0f / (1.0f + __expf(-val));
}
"""


def flashinfer_jit_specs(fi: Any) -> list[Any]:
    """The FlashInfer JIT modules the peers load: its norm module and its act-and-mul kernel template with a
    sigmoid (FlashInfer ships SiLU and GeLU only). ``scripts/fetch-peer-wheels.sh`` keeps their sources."""
    from flashinfer.jit import activation as act_jit
    from flashinfer.jit.core import gen_jit_spec
    from flashinfer.jit.norm import gen_norm_module
    from flashinfer.jit.utils import write_if_different

    source = Path(act_jit.jit_env.FLASHINFER_GEN_SRC_DIR) / f"{GATE_FUNCTION}.cu"
    source.parent.mkdir(parents=True, exist_ok=True)
    write_if_different(source, act_jit.get_act_and_mul_cu_str(GATE_NAME, GATE_DEFINITION))
    return [gen_norm_module(), gen_jit_spec(GATE_FUNCTION, [source])]


CUDA_LIBRARY_HEADERS = ("cublasLt.h", "cublas_v2.h", "curand_kernel.h")
"""Headers of CUDA libraries that FlashInfer's norm module includes; where the toolkit lacks them, the
``nvidia-*`` wheels' copies are added to its nvcc flags."""


def _cuda_library_includes() -> list[str]:
    from torch.utils.cpp_extension import CUDA_HOME

    toolkit = Path(CUDA_HOME or "/usr/local/cuda") / "include"
    try:
        wheels = [Path(p) for p in importlib.import_module("nvidia").__path__]
    except ImportError:  # no nvidia-* wheels: the toolkit's headers or none
        wheels = []
    found: list[str] = []
    for header in CUDA_LIBRARY_HEADERS:
        if (toolkit / header).is_file():
            continue
        for root in wheels:
            hits = sorted(root.glob(f"*/include/{header}")) + sorted(root.glob(f"*/*/include/{header}"))
            if hits and str(hits[0].parent) not in found:
                found.append(str(hits[0].parent))
                break
    return [f"-isystem {folder}" for folder in found]


def build_flashinfer() -> dict[str, Any]:
    """Build the FlashInfer modules in parallel (its ninja, every core), then load them: name -> module."""
    fi = importlib.import_module("flashinfer")
    from flashinfer.jit.core import build_jit_specs

    extra = _cuda_library_includes()
    if extra:
        os.environ["FLASHINFER_EXTRA_CUDAFLAGS"] = " ".join([os.environ.get("FLASHINFER_EXTRA_CUDAFLAGS", ""), *extra])
    specs = flashinfer_jit_specs(fi)
    build_jit_specs(specs, verbose=False)
    return {spec.name: spec.build_and_load() for spec in specs}


FLASHINFER = Library(
    "flashinfer", "flashinfer-python", lambda: importlib.import_module("flashinfer"), prepare=build_flashinfer
)


def _fi_modules(ctx: UnitContext) -> dict[str, Any]:
    if not ctx.prepared:
        raise Unsupported("FlashInfer's JIT modules were not built (see the preparation lines)")
    return ctx.prepared


def _fi_rms_norm(ctx: UnitContext, i: Inputs) -> Launch:
    fi, x, out = ctx.module, rows(i["x"]), rows(i["out"])
    return lambda: fi.rmsnorm(x, i["weight"], EPS, out=out).view(i["x"].shape)


def _fi_layer_norm(ctx: UnitContext, i: Inputs) -> Launch:
    fi, x = ctx.module, rows(i["x"])
    gamma, beta = _weight_f32(ctx, i, "weight"), _weight_f32(ctx, i, "bias")
    return lambda: fi.layernorm(x, gamma, beta, EPS).view(i["x"].shape)


def _fi_add_rms_norm(ctx: UnitContext, i: Inputs) -> Launch:
    fi = ctx.module
    x = rows(ALPHA * i["x"])  # exact: ALPHA is a power of two; its add has no alpha
    residual = rows(i["residual"]).clone()  # updated in place, like x: the harness's set stays as made

    def launch() -> torch.Tensor:
        fi.fused_add_rmsnorm(x, residual, i["weight"], EPS)
        return x.view(i["x"].shape)

    return launch


def _fi_glu(ctx: UnitContext, i: Inputs) -> Launch:
    module = _fi_modules(ctx)[GATE_FUNCTION]
    value, gate = i["x"].chunk(2, dim=-1)
    swapped = rows(torch.cat([gate, value], dim=-1))  # the gate first, as the template gates
    out = rows(i["out"])
    pdl = torch.cuda.get_device_capability(out.device)[0] >= 9 if out.is_cuda else False
    function = getattr(module, GATE_FUNCTION)

    def launch() -> torch.Tensor:
        function(out, swapped, pdl)
        return i["out"]

    return launch


FLASHINFER_PEER = Peer(
    name="flashinfer",
    library=FLASHINFER,
    description="FlashInfer's CUDA JIT kernels (its CuTe-DSL norms need nvidia-cutlass-dsl, which cannot travel)",
    impls={
        "rms_norm": Impl(_fi_rms_norm, dtypes=("float16", "bfloat16"), note="`flashinfer.rmsnorm` on [b*t, c]"),
        "layer_norm": Impl(
            _fi_layer_norm,
            dtypes=("bfloat16",),
            note="`flashinfer.layernorm` on [b*t, c]; gamma and beta as float32 copies, made once (it takes fp32)",
        ),
        "add_rms_norm": Impl(
            _fi_add_rms_norm,
            dtypes=("float16", "bfloat16"),
            note="`flashinfer.fused_add_rmsnorm` on x pre-scaled by 0.5 once (its add has no alpha); it also "
            "writes the sum back into residual, so it moves 4 tensors to oasr's 3",
        ),
        "glu": Impl(
            _fi_glu,
            dtypes=("float16", "bfloat16"),
            note="FlashInfer's act-and-mul kernel template (`act(x[:d]) * x[d:]`) built with a sigmoid, on the "
            "input with its halves swapped once (the gate first: a model would order its weights so)",
        ),
    },
    lacks={
        "swish": "no element-wise SiLU: `silu_and_mul` gates one half of its input with the other",
        "add_layer_norm": "no fused residual LayerNorm",
        "scale": "no scale op",
        "gemm": "`mm_bf16` has a bias epilogue but no SiLU one: it would be a GEMM and a separate activation",
        "gemm_glu": "no GLU epilogue on its GEMMs",
        "group_gemm": "`SegmentGEMMWrapper` is not wired here: its sm90 CUTLASS module is a JIT build of its own, "
        "left out of the one-call budget",
    },
)


# ---------------------------------------------------------------------------------------------- QuACK

QUACK = Library(
    "quack",
    "quack-kernels",
    lambda: importlib.import_module("quack"),
    cannot_travel="quack-kernels needs nvidia-cutlass-dsl, whose CUDA 13 library wheel is 92 MB (its MLIR "
    "library alone 73 MB compressed, already stripped): past the 64 MiB a device call carries",
)


def _quack_rms_norm(ctx: UnitContext, i: Inputs) -> Launch:
    quack, x = ctx.module, rows(i["x"])
    return lambda: quack.rmsnorm(x, i["weight"], eps=EPS).view(i["x"].shape)


def _quack_add_rms_norm(ctx: UnitContext, i: Inputs) -> Launch:
    quack, x, residual = ctx.module, rows(ALPHA * i["x"]), rows(i["residual"])
    return lambda: quack.rmsnorm(x, i["weight"], residual=residual, eps=EPS).view(i["x"].shape)


def _quack_layer_norm(ctx: UnitContext, i: Inputs) -> Launch:
    from quack.rmsnorm import layernorm_fwd

    x, gamma, beta = rows(i["x"]), _weight_f32(ctx, i, "weight"), _weight_f32(ctx, i, "bias")
    return lambda: layernorm_fwd(x, gamma, beta, eps=EPS).view(i["x"].shape)


QUACK_PEER = Peer(
    name="quack",
    library=QUACK,
    description="QuACK's CuTe-DSL kernels",
    impls={
        "rms_norm": Impl(_quack_rms_norm, note="`quack.rmsnorm` on [b*t, c]"),
        "add_rms_norm": Impl(
            _quack_add_rms_norm, note="`quack.rmsnorm(x, w, residual=...)` on x pre-scaled by 0.5 once"
        ),
        "layer_norm": Impl(_quack_layer_norm, note="`quack.rmsnorm.layernorm_fwd`; gamma and beta as float32 copies"),
    },
    lacks={"glu": "no GLU", "swish": "no element-wise SiLU", "add_layer_norm": "no fused residual LayerNorm"},
)


# ---------------------------------------------------------------------------------------------- Inductor

TORCH = Library("torch", "torch", lambda: importlib.import_module("torch"))


def _inductor(mode: str | None) -> Make:
    def make(ctx: UnitContext, i: Inputs) -> Launch:
        if "torch" not in ctx.op.backends:
            raise Unsupported("the op has no torch backend to compile")
        compiled = ctx.cache.get("compiled")
        if compiled is None:
            compiled = torch.compile(ctx.op.backends["torch"], fullgraph=True, dynamic=False, mode=mode)
            ctx.cache["compiled"] = compiled
        return lambda: compiled(i)

    return make


def _inductor_impls(mode: str | None) -> dict[str, Impl]:
    """Every op of the harness with a torch backend: that backend, compiled for the shape (one graph)."""
    return {name: Impl(_inductor(mode), reference="torch") for name, op in OPS.items() if "torch" in op.backends}


INDUCTOR_PEER = Peer(
    name="inductor",
    library=TORCH,
    description="`torch.compile(torch backend, fullgraph=True, dynamic=False)`: Inductor's default mode, "
    "compiled per shape",
    impls=_inductor_impls(None),
)
INDUCTOR_MAX_PEER = Peer(
    name="inductor_max",
    library=TORCH,
    description="the same with `mode='max-autotune-no-cudagraphs'` (autotuned Triton templates; the timing "
    "makes its own CUDA graphs)",
    impls=_inductor_impls("max-autotune-no-cudagraphs"),
    optional_flag="--max-autotune",
)


# ---------------------------------------------------------------------------------------------- cuDNN frontend

CUDNN = Library("cudnn", "nvidia-cudnn-frontend", lambda: importlib.import_module("cudnn"))


def _cudnn_type(cudnn: Any, dtype: torch.dtype) -> Any:
    return {torch.float16: cudnn.data_type.HALF, torch.bfloat16: cudnn.data_type.BFLOAT16}[dtype]


def _cudnn_handle(ctx: UnitContext) -> Any:
    if "handle" not in ctx.cache:
        ctx.cache["handle"] = ctx.module.create_handle()
    return ctx.cache["handle"]


def _cudnn_conv_graph(ctx: UnitContext, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                      padding: tuple[int, int], stride: tuple[int, int], relu: bool) -> Any:  # fmt: skip
    """A cuDNN graph ``[relu](conv(x, w) + b)`` over NCHW-indexed tensors with the strides given (NHWC memory),
    built and planned once per shape (``ctx.cache``): returns (graph, tensors, workspace)."""
    if "graph" in ctx.cache:
        return ctx.cache["graph"]
    cudnn = ctx.module
    io = _cudnn_type(cudnn, x.dtype)
    graph = cudnn.pygraph(
        io_data_type=io,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=_cudnn_handle(ctx),
    )
    tx = graph.tensor(name="x", dim=list(x.shape), stride=list(x.stride()), data_type=io)
    tw = graph.tensor(name="w", dim=list(w.shape), stride=list(w.stride()), data_type=io)
    tb = graph.tensor(name="b", dim=list(b.shape), stride=list(b.stride()), data_type=io)
    y = graph.conv_fprop(image=tx, weight=tw, padding=list(padding), stride=list(stride), dilation=[1, 1])
    y = graph.bias(input=y, bias=tb)
    if relu:
        y = graph.relu(input=y)
    y.set_output(True).set_data_type(io).set_dim(list(out.shape)).set_stride(list(out.stride()))
    graph.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    workspace = torch.empty(graph.get_workspace_size(), dtype=torch.uint8, device=x.device)
    ctx.cache["graph"] = (graph, (tx, tw, tb, y), workspace)
    return ctx.cache["graph"]


def _cudnn_launch(ctx: UnitContext, x, w, b, out, padding, stride, relu: bool, result: torch.Tensor) -> Launch:
    graph, (tx, tw, tb, ty), workspace = _cudnn_conv_graph(ctx, x, w, b, out, padding, stride, relu)
    cudnn, handle = ctx.module, _cudnn_handle(ctx)

    def launch() -> torch.Tensor:
        cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)  # the capture stream under a graph
        graph.execute({tx: x, tw: w, tb: b, ty: out}, workspace, handle=handle)
        return result

    return launch


def _cudnn_conv2d(ctx: UnitContext, i: Inputs) -> Launch:
    # NHWC memory as NCHW-indexed views: [n, c, h, w] with channels innermost; the same for the KRSC weight.
    x, w, out = i["x"].permute(0, 3, 1, 2), i["weight"].permute(0, 3, 1, 2), i["out"].permute(0, 3, 1, 2)
    b = i["bias"].view(1, -1, 1, 1)
    pad, stride = i["pad"], i["stride"]
    return _cudnn_launch(ctx, x, w, b, out, (pad, pad), (stride, stride), True, i["out"])


def _cudnn_depthwise(ctx: UnitContext, i: Inputs) -> Launch:
    # [b, t, c] as an NHWC image of height 1; the depthwise filter [c, 1, 1, k] (its C is c / groups = 1).
    x, out = i["x"].unsqueeze(1).permute(0, 3, 1, 2), i["out"].unsqueeze(1).permute(0, 3, 1, 2)
    w = i["weight"].t().contiguous().view(-1, 1, 1, i["weight"].shape[0])
    b = i["bias"].view(1, -1, 1, 1)
    return _cudnn_launch(ctx, x, w, b, out, (0, i["padding"]), (1, 1), False, i["out"])


def _cudnn_sdpa(ctx: UnitContext, i: Inputs) -> Launch:
    cudnn = ctx.module
    q, k, v, out = (i[name].transpose(1, 2) for name in ("q", "k", "v", "out"))  # [b, h, t, d] views
    lengths = i.get("lengths")
    b, t = q.shape[0], q.shape[2]
    if "graph" not in ctx.cache:
        io = _cudnn_type(cudnn, q.dtype)
        graph = cudnn.pygraph(
            io_data_type=io,
            intermediate_data_type=cudnn.data_type.FLOAT,
            compute_data_type=cudnn.data_type.FLOAT,
            handle=_cudnn_handle(ctx),
        )
        tq, tk, tv = (graph.tensor(name=n, dim=list(a.shape), stride=list(a.stride()), data_type=io)
                      for n, a in (("q", q), ("k", k), ("v", v)))  # fmt: skip
        extra: dict[str, Any] = {}
        seq = None
        if lengths is not None:
            seq = tuple(graph.tensor(name=n, dim=[b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=cudnn.data_type.INT32)
                        for n in ("seq_q", "seq_kv"))  # fmt: skip
            extra = dict(use_padding_mask=True, seq_len_q=seq[0], seq_len_kv=seq[1])
        o, _ = graph.sdpa(q=tq, k=tk, v=tv, attn_scale=1.0 / math.sqrt(q.shape[-1]), generate_stats=False, **extra)
        o.set_output(True).set_data_type(io).set_dim(list(out.shape)).set_stride(list(out.stride()))
        graph.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        workspace = torch.empty(graph.get_workspace_size(), dtype=torch.uint8, device=q.device)
        ctx.cache["graph"] = (graph, (tq, tk, tv, o), seq, workspace)
    graph, (tq, tk, tv, to), seq, workspace = ctx.cache["graph"]
    bindings: dict[Any, torch.Tensor] = {tq: q, tk: k, tv: v, to: out}
    if seq is not None:
        bindings[seq[0]] = torch.full((b, 1, 1, 1), t, dtype=torch.int32, device=q.device)  # every query row
        bindings[seq[1]] = lengths.view(b, 1, 1, 1).to(torch.int32)
    handle = _cudnn_handle(ctx)

    def launch() -> torch.Tensor:
        cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
        graph.execute(bindings, workspace, handle=handle)
        return i["out"]

    return launch


CUDNN_PEER = Peer(
    name="cudnn",
    library=CUDNN,
    description="cuDNN frontend graphs (the backend's engines; its Python CuTe-DSL engines need "
    "nvidia-cutlass-dsl, which cannot travel)",
    impls={
        "conv2d": Impl(_cudnn_conv2d, dtypes=("float16", "bfloat16"), note="one graph: conv_fprop, bias, relu (NHWC)"),
        "depthwise_conv1d": Impl(
            _cudnn_depthwise,
            dtypes=("float16", "bfloat16"),
            note="one graph: a grouped conv_fprop (height 1, one channel per group) and bias, channels-last; "
            "the [c, k] filter copy made once",
        ),
        "attention": Impl(
            _cudnn_sdpa,
            dtypes=("float16", "bfloat16"),
            note="`graph.sdpa`, key lengths as a padding mask (every query row valid)",
        ),
    },
    lacks={
        "conv2d_subsampling": "two convolutions with a flatten between: two graphs, not one fused op",
        "rel_pos_attention": "no relative-position score term in its SDPA node",
    },
)


# ---------------------------------------------------------------------------------------------- attention


def _sdpa(backend_name: str) -> Make:
    def make(ctx: UnitContext, i: Inputs) -> Launch:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = SDPBackend[backend_name]
        if backend_name == "FLASH_ATTENTION" and i.get("key_mask") is not None:
            raise Unsupported("the flash backend takes no mask (ragged key lengths)")
        q, k, v = (i[name].transpose(1, 2) for name in ("q", "k", "v"))
        mask = i.get("key_mask")

        def launch() -> torch.Tensor:
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)

        return launch

    return make


def _flex_attention(ctx: UnitContext, i: Inputs) -> Launch:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    compiled = ctx.cache.setdefault("flex", torch.compile(flex_attention, fullgraph=True, dynamic=False))
    q, k, v = (i[name].transpose(1, 2) for name in ("q", "k", "v"))
    lengths = i.get("lengths")
    block_mask = None
    if lengths is not None:  # made once per input set, as a model makes its mask once per forward

        def keep(batch, head, query, key):  # flex's mask_mod signature
            return key < lengths[batch]

        block_mask = create_block_mask(keep, q.shape[0], None, q.shape[2], k.shape[2], device=q.device)
    return lambda: compiled(q, k, v, block_mask=block_mask).transpose(1, 2)


def _flash_attn(ctx: UnitContext, i: Inputs) -> Launch:
    if i.get("lengths") is not None:
        raise Unsupported("ragged key lengths need flash_attn_varlen_func's packed layout")
    q, k, v = i["q"], i["k"], i["v"]
    return lambda: ctx.module.flash_attn_func(q, k, v)


def _sdpa_peer(name: str, backend: str, what: str) -> Peer:
    return Peer(
        name=name,
        library=TORCH,
        description=f"torch SDPA pinned to its {what} backend",
        impls={"attention": Impl(_sdpa(backend), dtypes=("float16", "bfloat16"))},
        lacks={"rel_pos_attention": "SDPA has no relative-position term (ESPnet's matrix_bd)"},
    )


SDPA_FLASH_PEER = _sdpa_peer("sdpa_flash", "FLASH_ATTENTION", "FlashAttention-2")
SDPA_CUDNN_PEER = _sdpa_peer("sdpa_cudnn", "CUDNN_ATTENTION", "cuDNN")
SDPA_EFFICIENT_PEER = _sdpa_peer("sdpa_efficient", "EFFICIENT_ATTENTION", "memory-efficient")
FLEX_PEER = Peer(
    name="flex",
    library=TORCH,
    description="FlexAttention, compiled per shape",
    impls={"attention": Impl(_flex_attention, dtypes=("float16", "bfloat16"), note="key lengths as a block mask")},
    lacks={"rel_pos_attention": "needs ESPnet's matrix_bd as a score_mod over a [b, h, t, t] tensor: not wired"},
)
FLASH_ATTN = Library(
    "flash_attn",
    "flash-attn",
    lambda: importlib.import_module("flash_attn"),
    cannot_travel="flash-attn has no cp312 manylinux wheel (a source build takes hours) and flash-attn-4 has "
    "none either: torch SDPA's flash backend (sdpa_flash) and cuDNN SDPA stand in",
)
FLASH_ATTN_PEER = Peer(
    name="flash_attn",
    library=FLASH_ATTN,
    description="the flash-attn package",
    impls={"attention": Impl(_flash_attn, dtypes=("float16", "bfloat16"), note="`flash_attn_func` on [b, t, h, d]")},
)

PEERS: tuple[Peer, ...] = (
    FLASHINFER_PEER,
    QUACK_PEER,
    INDUCTOR_PEER,
    INDUCTOR_MAX_PEER,
    CUDNN_PEER,
    SDPA_FLASH_PEER,
    SDPA_CUDNN_PEER,
    SDPA_EFFICIENT_PEER,
    FLEX_PEER,
    FLASH_ATTN_PEER,
)
"""Every peer, in the table's column order."""
LIBRARIES: tuple[Library, ...] = tuple(dict.fromkeys(peer.library for peer in PEERS))


def supports_dtype(impl: Impl, dtype: torch.dtype | str) -> str | None:
    """None if ``impl`` takes ``dtype``, else the reason."""
    name = dtype if isinstance(dtype, str) else dtype_name(dtype)
    if impl.dtypes is not None and name not in impl.dtypes:
        return f"takes {', '.join(impl.dtypes)} only"
    return None
