"""The library's kernel families: each one declared once, here.

A family is one JIT module (``csrc/<name>.cu`` with its launchers and
``csrc/<name>_jit_binding.cu`` with its exports, built against ``include/oasr/``)
and the public ops of ``oasr/<name>.py`` that call it. Everything that needs the
list of families iterates :data:`FAMILIES`: prebuilding (``python -m oasr.jit
build``), the package's ``__all__``, the workbench (its notebooks and the JIT
module behind each profiled op) and the tests. The harness's list of ops
(``profiling/harness/ops``) names the family of each op with these objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cutlass, env, gemm_config
from .core import JitSpec, Variant, gen_jit_spec

ALL_CAPABILITIES: tuple[int, ...] = (80, 86, 87, 89, 90, 100, 103, 110, 120)
"""Compute capabilities (major * 10 + minor) a portable CUDA-core kernel runs on."""
SM90A = "-gencode=arch=compute_90a,code=sm_90a"
"""The one target of the wgmma/TMA (CUTLASS) families, whatever other GPUs the JIT builds for."""


@dataclass(frozen=True)
class Family:
    """One kernel family.

    Attributes
    ----------
    name : str
        The JIT module's name; its sources are ``csrc/<name>.cu`` and
        ``csrc/<name>_jit_binding.cu``, its Python API ``oasr/<name>.py``.
    ops : tuple of str
        The public ops (``oasr.<op>``), in the order the docs list them.
    notebook : str
        The workbench notebook, ``notebooks/<notebook>.ipynb`` (``"03_norm"``).
    title, summary, design : str
        The notebook's title, its opening paragraph and the kernel's design in a
        paragraph (Markdown).
    headers : tuple of str
        The kernel headers a reader should see, relative to ``include/``.
    capabilities : tuple of int
        Compute capabilities the kernels run on (``90`` alone for sm90a kernels);
        any other GPU gets one sentence before a launch.
    extra_cuda_cflags : tuple of str
        nvcc flags beyond the common ones.
    include_paths : callable, optional
        Extra include folders, looked up when the module is built (e.g. a library
        installed as a Python package).
    library_cflags : callable, optional
        nvcc flags looked up when the module is built (the version of that library, for the key).
    default_variant : Variant, optional
        For a family built per configuration: the one prebuilding, the profiler's key and the
        notebook's build step use (calls pass theirs to :meth:`module`).
    """

    name: str
    ops: tuple[str, ...]
    notebook: str
    title: str
    summary: str
    design: str
    headers: tuple[str, ...]
    capabilities: tuple[int, ...] = ALL_CAPABILITIES
    extra_cuda_cflags: tuple[str, ...] = ()
    include_paths: Callable[[], Sequence[Path]] | None = field(default=None, compare=False)
    library_cflags: Callable[[], Sequence[str]] | None = field(default=None, compare=False)
    default_variant: Variant | None = None

    def sources(self, variant: Variant | None = None) -> list[Path]:
        """The launcher (``csrc/<name>.cu``, or the variant's own) and the bindings."""
        launcher = variant.launcher if variant is not None and variant.launcher else f"{self.name}.cu"
        return [env.OASR_CSRC_DIR / launcher, env.OASR_CSRC_DIR / f"{self.name}_jit_binding.cu"]

    def jit_spec(
        self,
        *,
        variant: Variant | None = None,
        name: str | None = None,
        include_dir: Path | None = None,
        extra_cuda_cflags: Sequence[str] = (),
    ) -> JitSpec:
        """The module's build spec (of ``variant``, else the default one); ``name``, ``include_dir``
        and flags let ``dev/`` build variants of it."""
        variant = variant or self.default_variant
        flags = [*self.extra_cuda_cflags, *(self.library_cflags() if self.library_cflags else ())]
        if variant is not None:
            flags += variant.cuda_cflags
        return gen_jit_spec(
            name or self.module_name(variant),
            self.sources(variant),
            extra_cuda_cflags=[*flags, *extra_cuda_cflags],
            extra_include_paths=list(self.include_paths()) if self.include_paths else None,
            include_dir=include_dir,
        )

    def module_name(self, variant: Variant | None = None) -> str:
        """``<family>`` or, for a variant, ``<family>_<variant>``: the name of its build and its folder in the cache."""
        return self.name if variant is None else f"{self.name}_{variant.name}"

    def module(self, variant: Variant | None = None) -> Any:
        """The loaded module of ``variant`` (else the default one), built on first use; later calls
        return the same object. A module set with :meth:`use_module` stands in for every variant."""
        stand_in = _STAND_INS.get(self.name)
        if stand_in is not None:
            return stand_in(variant) if isinstance(stand_in, PerVariant) else stand_in
        name = self.module_name(variant or self.default_variant)
        loaded = _LOADED.get(name)
        if loaded is None:
            loaded = _LOADED[name] = self.jit_spec(variant=variant).build_and_load()
        return loaded

    def use_module(self, module: Any | None) -> None:
        """Make :meth:`module` return ``module`` (``None``: build and load it again on next use).

        For a family built per configuration, ``module`` stands in for every variant, unless it is a
        :class:`PerVariant`, which gives each variant its own; ``None`` forgets them all.
        """
        if module is None:
            _STAND_INS.pop(self.name, None)
            for name in [n for n in _LOADED if n == self.name or n.startswith(self.name + "_")]:
                del _LOADED[name]
        else:
            _STAND_INS[self.name] = module


class PerVariant:
    """A stand-in (:meth:`Family.use_module`) that gives each variant its module: ``modules(variant)``, called once
    per variant (``None``: the family's default), e.g. each variant built from another checkout."""

    def __init__(self, modules: Callable[[Variant | None], Any]):
        self._modules = modules
        self._loaded: dict[str | None, Any] = {}

    def __call__(self, variant: Variant | None) -> Any:
        key = variant.name if variant is not None else None
        if key not in self._loaded:
            self._loaded[key] = self._modules(variant)
        return self._loaded[key]


_LOADED: dict[str, Any] = {}
"""Loaded modules by module name (a family's variants apart: a family without a default variant
loads its plain module under the family's own name)."""
_STAND_INS: dict[str, Any] = {}
"""Modules set with :meth:`Family.use_module`, by family name."""


def forget_loaded_modules() -> None:
    """Load every family's module afresh on next use: a kernel edited since then is rebuilt."""
    _LOADED.clear()
    _STAND_INS.clear()


SCALE = Family(
    name="scale",
    ops=("scale",),
    notebook="01_scale",
    title="01 · scale — `out = input * factor`",
    summary="The simplest memory-bound kernel, walked through end to end.",
    design=(
        "`include/oasr/scale.cuh` is a functor on the shared element-wise body "
        "`include/oasr/common/elementwise.cuh`: 128-bit loads and stores (streaming, evict-first, "
        "from 64 KiB up), contiguous chunks per block, a grid-stride loop, and a scalar head and tail "
        "for pointers that are not 16-byte aligned. `csrc/scale.cu` dispatches on dtype; "
        "`oasr/scale.py` is the Python API."
    ),
    headers=("oasr/scale.cuh", "oasr/common/elementwise.cuh"),
)

ACTIVATION = Family(
    name="activation",
    ops=("glu", "swish"),
    notebook="02_activation",
    title="02 · activation — GLU and Swish",
    summary=(
        "The Conformer's activations: `glu(x[..., 2C]) = x[..., :C] * sigmoid(x[..., C:])` "
        "(as `torch.nn.functional.glu(x, -1)`) and `swish(x) = x * sigmoid(x)` (SiLU), "
        "on the Conformer shapes `[B, T, C]` and a large case."
    ),
    design=(
        "`include/oasr/activation.cuh`: GLU reads both halves of each row as 128-bit "
        "streaming vectors when C, the row strides and the pointers allow (a scalar path "
        "otherwise); Swish is a functor on the shared element-wise body. Math is fp32 on "
        "fp32, fp16 and bf16 storage."
    ),
    headers=("oasr/activation.cuh",),
)

NORM = Family(
    name="norm",
    ops=("layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"),
    notebook="03_norm",
    title="03 · norm — LayerNorm, RMSNorm and the fused residual forms",
    summary=(
        "Row norms over the channel dimension: `layer_norm`, `rms_norm`, and the fused "
        "`add_layer_norm` / `add_rms_norm` that every encoder block runs "
        "(`norm(residual + alpha * input)`), against torch's add followed by the norm."
    ),
    design=(
        "`include/oasr/norm.cuh`: each row is streamed from DRAM once and kept in "
        "registers as loaded (converted to fp32 at each use); a group of lanes per row for short rows "
        "(more threads per row when rows are few), a block per row for long ones, two-pass "
        "fp32 statistics, the weight and bias staged once per block as fp32 in shared memory, "
        "one rounding on output."
    ),
    headers=("oasr/norm.cuh",),
)

CONV1D = Family(
    name="conv1d",
    ops=("depthwise_conv1d", "depthwise_conv1d_step", "fold_batch_norm"),
    notebook="04_conv1d",
    title="04 · conv1d — depthwise convolution over time (masked, streaming)",
    summary=(
        "The depthwise part of the Conformer convolution module: a per-channel convolution over time "
        "(K = 15 or 31) on channels-last `[B, T, C]`, with optional padding, mask, bias and SiLU, "
        "and a streaming step that carries the last K-1 frames between chunks."
    ),
    design=(
        "`include/oasr/conv1d/tensor_core.cuh` (fp16/bf16, 16-byte aligned views, K <= 65): per channel, a "
        "Toeplitz matrix of the taps (in registers) times the input frames on tensor cores (mma.sync); a "
        "block stages tiles of frames for 64 channels with cp.async, three deep, each warp transposes its "
        "8 channels with ldmatrix/stmatrix and writes its outputs through a shared output tile in whole "
        "rows. The streaming step and fp32 at K = 15 and 31 take the FFMA kernel of "
        "`include/oasr/conv1d/staged.cuh` (the taps in registers, 16 outputs per lane; a step that fits one "
        "tile also writes the new state, in one launch), other K and layouts the direct kernels of "
        "`include/oasr/conv1d/direct.cuh` (a register window sliding over the input frames)."
    ),
    headers=(
        "oasr/conv1d.cuh",
        "oasr/conv1d/tensor_core.cuh",
        "oasr/conv1d/staged.cuh",
        "oasr/conv1d/direct.cuh",
    ),
)

CONV2D = Family(
    name="conv2d",
    ops=("conv2d", "conv2d_subsampling"),
    notebook="05_conv2d",
    title="05 · conv2d — NHWC convolution and the fused Conv2dSubsampling front end",
    summary=(
        "The speech encoder's front end: `conv2d(input [N, H, W, C], weight [K, R, S, C])` with bias and "
        "ReLU/SiLU (as `F.conv2d` on permuted tensors), and `conv2d_subsampling`, WeNet's Conv2dSubsampling4 "
        "(two 3x3 stride-2 convolutions with ReLU) in one kernel, against torch channels-last and NCHW."
    ),
    design=(
        "`include/oasr/conv2d/direct.cuh`: few input channels (IC = 1: a pure write problem): with at most "
        "15 taps a warp multiplies 16 pixels x 256 channels on tensor cores (mma.sync, the bias a 16th tap, "
        "the weights in registers) and each lane stores 16-byte chunks of 8 channels; other filters run a "
        "CUDA-core kernel. `include/oasr/conv2d/sm90_implicit_gemm.cuh`: C % 8 == 0 through CUTLASS 3.x's "
        "sm90 implicit GEMM (TMA im2col, wgmma), bias and activation in the epilogue; one JIT module per "
        "(dtype, activation, tile), the tile chosen from K (`oasr/jit/conv2d_config.py`). "
        "`include/oasr/conv2d/subsampling.cuh` (sm_90a): two warpgroups of a CTA each take 64 output pixels "
        "x all channels and walk the second conv's K in steps of (tap, 32 input channels): the step's first-conv "
        "output is one wgmma (the pixels' 3x3 input patches times w1, the bias a 10th tap) whose accumulators, "
        "rounded with ReLU, are the register A operand of the step's second-conv wgmmas, so the first conv's "
        "output never leaves registers; w2 streams through a TMA ring."
    ),
    headers=("oasr/conv2d/direct.cuh", "oasr/conv2d/sm90_implicit_gemm.cuh", "oasr/conv2d/subsampling.cuh"),
    include_paths=cutlass.include_paths,
    library_cflags=cutlass.flags,
)

GEMM = Family(
    name="gemm",
    ops=("gemm", "gemm_glu"),
    notebook="06_gemm",
    title="06 · gemm — `act(input @ weight.T + bias)` on Hopper tensor cores",
    summary=(
        "The Conformer's linear layers (feed-forward, attention projections, the pointwise convolutions): "
        "`gemm(input [..., K], weight [N, K], bias [N], activation)` as `act(F.linear(...))`, and `gemm_glu` "
        "(`F.glu(F.linear(...), -1)`, the pointwise convolution before the depthwise one), bf16 and fp16 "
        "with fp32 accumulation, against cuBLAS through torch."
    ),
    design=(
        "`include/oasr/gemm/sm90_gemm.cuh`: CUTLASS 3.x's TMA warp-specialized kernel (a producer warp "
        "streams A and B tiles into a shared-memory ring with TMA; consumer warpgroups run wgmma into fp32 "
        "accumulators), cooperative, ping-pong or non-persistent, with clusters that multicast the shared "
        "tile. The bias and the activation are an epilogue visitor tree computed on the accumulators and "
        "rounded once. Each (dtype, epilogue, tile, cluster, schedule) is its own JIT module, built on first "
        "use; `oasr/jit/gemm_config.py` chooses one per shape by a rule read off `dev/gemm/tune.py`'s "
        "H200 table (`dev/gemm/results/tune_h200.txt`): 128x128 ping-pong tiles for most shapes (long K too), "
        "non-persistent tiles for grids of one wave or less (128x192 where those fit one wave and 128x128 do not; "
        "with a bias/activation epilogue, 64x128 tiles two to an SM where one wave of 128x128 fits, "
        "so that one tile's epilogue runs beside the other's math), cooperative for the other bias/activation "
        "epilogues below three waves or at long K. A bias/activation epilogue on one wave of 128x192 tiles runs on "
        "the family's own kernel (`include/oasr/gemm/sm90_gemm_tail.cuh`): each warpgroup's accumulators are two "
        "column parts with their own wgmma, the last k-blocks are issued part after part, and the first part's "
        "epilogue runs while the tensor cores finish the second. Fused "
        "grids of three waves or more at K <= 512, and `gemm_glu`, run as one "
        "launch of group_gemm's own kernel (`include/oasr/gemm/sm90_group_gemm_direct.cuh`, every row one group, "
        "its epilogue in registers: SiLU and the GLU gate as h (1 + tanh u) on halved values, one SFU op and one "
        "FMA each); for `gemm_glu` each tile's B holds 64 weight rows and their 64 gate rows, and "
        "the epilogue stores value * sigmoid(gate)."
    ),
    headers=("oasr/gemm/sm90_gemm.cuh", "oasr/gemm/sm90_gemm_tail.cuh", "oasr/gemm/sm90_group_gemm_direct.cuh"),
    capabilities=(90,),
    extra_cuda_cflags=(SM90A,),
    include_paths=cutlass.include_paths,
    library_cflags=cutlass.flags,
    default_variant=gemm_config.gemm_variant("bfloat16", "plain", gemm_config.DEFAULT),
)

BMM = Family(
    name="bmm",
    ops=("bmm",),
    notebook="07_bmm",
    title="07 · bmm — batched matrix products for attention",
    summary=(
        "Attention's two batched products on Hopper tensor cores: scores `a [batch, M, K] @ b [batch, N, K]^T` "
        "and context `a [batch, M, K] @ b [batch, K, N]`, any sizes (odd sequence lengths such as 375 "
        "included), against torch.bmm (cuBLAS)."
    ),
    design=(
        "The gemm family's CUTLASS kernel (`include/oasr/gemm/sm90_gemm.cuh`) with the batch as its L "
        "mode and B K-major or N-major. TMA needs 16-byte row strides, not 16-byte extents: an odd "
        "length is a ragged tile (zero-filled loads, clipped stores), and a row of odd length is given "
        "a padded stride (a strided result view; a copy only for an operand that has none)."
    ),
    headers=("oasr/gemm/sm90_gemm.cuh",),
    capabilities=(90,),
    extra_cuda_cflags=(SM90A,),
    include_paths=cutlass.include_paths,
    library_cflags=cutlass.flags,
    default_variant=gemm_config.bmm_variant("bfloat16", False, gemm_config.DEFAULT),
)

GROUP_GEMM = Family(
    name="group_gemm",
    ops=("group_gemm",),
    notebook="08_group_gemm",
    title="08 · group_gemm — one GEMM per group of rows, the groups sized on the device",
    summary=(
        "`group_gemm(input [L, K], weight [G, N, K], offsets [G], bias [G, N])`: the rows of `input` come in G "
        "consecutive groups whose ends `offsets` holds on the device, and group g's rows go through "
        "`F.linear(rows, weight[g], bias[g])`. bf16 and fp16 with fp32 accumulation, against "
        "`torch._grouped_mm`, a dense GEMM over all rows and a Python loop of `F.linear`."
    ),
    design=(
        "Two kernels, chosen per shape (`gemm_config.choose_group`). Below K = 2048 (up to 1024 groups), "
        "`include/oasr/gemm/sm90_group_gemm_direct.cuh`: one launch that reads the device offsets itself. "
        "Each CTA scans them into a table of the groups' first tiles in shared memory; a tile is 128 rows "
        "starting at a row of its group (the last may run into the next group's rows, computed and not "
        "stored), so A is one TMA descriptor over [L, K] read at any row and B one over [G, N, K]; a producer "
        "warp streams k-blocks into a ring of mbarrier'd stages and two pairs of warpgroups take the tiles in "
        "turns on wgmma, one pair's epilogue (the bias added, a transpose through shared memory, eight lanes "
        "storing a row's 128 bytes under a row predicate) running under the other's products. From K = 2048, "
        "`include/oasr/gemm/sm90_group_gemm.cuh`: a one-thread-per-group setup kernel turns the offsets into "
        "per-group problem shapes, pointers and strides in a workspace cached per shape, and CUTLASS's "
        "ptr-array TMA warp-specialized kernel reads them and walks every group's tiles, rewriting its TMA "
        "descriptors as it enters a group. Both wait on the kernel before them with `griddepcontrol.wait`, so "
        "they are launched with programmatic dependent launch (below K = 2048: `gemm_config.group_pdl`). "
        "Nothing comes back to the host, so a CUDA graph "
        "replays with new offsets; offsets that decrease or end past L are clamped and flagged in host-mapped "
        "memory (`oasr.group_gemm_check()`)."
    ),
    headers=("oasr/gemm/sm90_group_gemm_direct.cuh", "oasr/gemm/sm90_group_gemm.cuh", "oasr/gemm/sm90_gemm.cuh"),
    capabilities=(90,),
    extra_cuda_cflags=(SM90A,),
    include_paths=cutlass.include_paths,
    library_cflags=cutlass.flags,
    default_variant=gemm_config.group_gemm_variant("bfloat16", gemm_config.GROUP_DEFAULT),
)

ATTENTION = Family(
    name="attention",
    ops=("attention", "rel_pos_attention"),
    notebook="09_attention",
    title="09 · attention — softmax attention and the Conformer's relative-position form, fused",
    summary=(
        "`attention(q, k, v)` (softmax(q k^T * scale) v per batch row and head, as SDPA) and `rel_pos_attention`, "
        "the relative-position attention of ESPnet, NeMo and WeNet Conformers: scores "
        "`((q + u) k^T + rel_shift((q + v) p^T)) * scale`, or WeNet's unshifted `(q + v) p^T`. `q`, `k`, `v` are "
        "`[B, T, H, D]` views (the packed QKV GEMM's output, no copy), with key lengths and the streaming chunk "
        "mask computed in the kernel; fp16 and bf16, fp32 accumulation, against every SDPA backend, ESPnet's eager "
        "code, SDPA with the positional scores as a mask, and FlexAttention."
    ),
    design=(
        "`include/oasr/attention.cuh`: FlashAttention-2's scheme on mma.sync m16n8k16. A block of 4 or 8 warps owns "
        "64 or 128 queries of one (batch row, head), 16 per warp, their q (+ u) fragments in registers (8 warps "
        "for the shifted form at D = 128, whose 4-warp kernel spills); it walks the key blocks of 64 that the key "
        "length and the chunk mask leave (the others are skipped), K, V and p staged "
        "with cp.async in XOR-swizzled tiles (V's copy under the score products, the next K's under the softmax), "
        "and keeps an online softmax in registers: no score matrix leaves the SM. The rel-shift is an index map: "
        "per key block a warp multiplies (q + v) by the 80 consecutive rows of p its 16 x 64 tile spans and reads "
        "the band back through its own shared memory, `bd[i][j] = W[i][j - i + 15]` (1.25x the Q K^T work); WeNet's "
        "unshifted p is a second K accumulated into the same scores."
    ),
    headers=("oasr/attention.cuh", "oasr/common/mma.cuh", "oasr/common/cp_async.cuh"),
    # mma.sync and cp.async (sm_80+); the D = 128 relative form takes 101 KB of shared memory per block,
    # more than compute capability 8.6, 8.9 and 12.x give one.
    capabilities=(80, 87, 90, 100, 103),
)

FAMILIES: tuple[Family, ...] = (SCALE, ACTIVATION, NORM, CONV1D, CONV2D, GEMM, BMM, GROUP_GEMM, ATTENTION)
"""Every family, in notebook order."""


def family_of(op: str) -> Family:
    """The family whose public ops include ``op``; ValueError naming the known ops otherwise."""
    for family in FAMILIES:
        if op in family.ops:
            return family
    known = ", ".join(o for f in FAMILIES for o in f.ops)
    raise ValueError(f"no family has an op {op!r}; the ops are: {known}")
