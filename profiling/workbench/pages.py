"""What each notebook says beside its cells: a family's page (:class:`Page`: its file, title, opening paragraph, the
kernel's design and the headers it shows) or a model's (:class:`ModelPage`: an encoder composed of the families' ops).
``notebooks/generate.py`` writes the notebooks from these pages; the workbench titles its summary and shows the headers
from them; the JIT layer's :data:`oasr.jit.families.FAMILIES` holds none of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from oasr.jit.families import ACTIVATION, ATTENTION, BMM, CONV1D, CONV2D, GEMM, GROUP_GEMM, NORM, SCALE, Family


@dataclass(frozen=True)
class Page:
    """One family's notebook.

    Attributes
    ----------
    family : Family
        The family it is about.
    notebook : str
        Its file, ``notebooks/<notebook>.ipynb`` (``"03_norm"``).
    title, summary, design : str
        Its title, its opening paragraph and the kernel's design in a paragraph (Markdown).
    headers : tuple of str
        The kernel headers a reader should see, relative to ``include/``.
    """

    family: Family
    notebook: str
    title: str
    summary: str
    design: str
    headers: tuple[str, ...]


SCALE_PAGE = Page(
    family=SCALE,
    notebook="01_scale",
    title="01 · scale — `out = input * factor`",
    summary="The simplest memory-bound kernel, walked through end to end.",
    design="`include/oasr/scale.cuh` is a functor on the shared element-wise body "
    "`include/oasr/common/elementwise.cuh`: 128-bit loads and stores (streaming, evict-first, "
    "from 64 KiB up), contiguous chunks per block, a grid-stride loop, and a scalar head and tail "
    "for pointers that are not 16-byte aligned. `csrc/scale.cu` dispatches on dtype; "
    "`oasr/scale.py` is the Python API.",
    headers=("oasr/scale.cuh", "oasr/common/elementwise.cuh"),
)

ACTIVATION_PAGE = Page(
    family=ACTIVATION,
    notebook="02_activation",
    title="02 · activation — GLU and Swish",
    summary="The Conformer's activations: `glu(x[..., 2C]) = x[..., :C] * sigmoid(x[..., C:])` "
    "(as `torch.nn.functional.glu(x, -1)`) and `swish(x) = x * sigmoid(x)` (SiLU), "
    "on the Conformer shapes `[B, T, C]` and a large case.",
    design="`include/oasr/activation.cuh`: GLU reads both halves of each row as 128-bit "
    "streaming vectors when C, the row strides and the pointers allow (a scalar path "
    "otherwise); Swish is a functor on the shared element-wise body. Math is fp32 on "
    "fp32, fp16 and bf16 storage.",
    headers=("oasr/activation.cuh",),
)

NORM_PAGE = Page(
    family=NORM,
    notebook="03_norm",
    title="03 · norm — LayerNorm, RMSNorm and the fused residual forms",
    summary="Row norms over the channel dimension: `layer_norm`, `rms_norm`, and the fused "
    "`add_layer_norm` / `add_rms_norm` that every encoder block runs "
    "(`norm(residual + alpha * input)`), against torch's add followed by the norm.",
    design="`include/oasr/norm.cuh`: each row is streamed from DRAM once and kept in "
    "registers as loaded (converted to fp32 at each use); a group of lanes per row for short rows "
    "(more threads per row when rows are few), a block per row for long ones, two-pass "
    "fp32 statistics, the weight and bias staged once per block as fp32 in shared memory, "
    "one rounding on output.",
    headers=("oasr/norm.cuh",),
)

CONV1D_PAGE = Page(
    family=CONV1D,
    notebook="04_conv1d",
    title="04 · conv1d — depthwise convolution over time (masked, streaming)",
    summary="The depthwise part of the Conformer convolution module: a per-channel convolution over time "
    "(K = 15 or 31) on channels-last `[B, T, C]`, with optional padding, mask, bias and SiLU, "
    "and a streaming step that carries the last K-1 frames between chunks.",
    design="`include/oasr/conv1d/tensor_core.cuh` (fp16/bf16, 16-byte aligned views, K <= 65): per channel, a "
    "Toeplitz matrix of the taps (in registers) times the input frames on tensor cores (mma.sync); a "
    "block stages tiles of frames for 64 channels with cp.async, three deep, each warp transposes its "
    "8 channels with ldmatrix/stmatrix and writes its outputs through a shared output tile in whole "
    "rows. The streaming step and fp32 at K = 15 and 31 take the FFMA kernel of "
    "`include/oasr/conv1d/staged.cuh` (the taps in registers, 16 outputs per lane; a step that fits one "
    "tile also writes the new state, in one launch), other K and layouts the direct kernels of "
    "`include/oasr/conv1d/direct.cuh` (a register window sliding over the input frames).",
    headers=("oasr/conv1d.cuh", "oasr/conv1d/tensor_core.cuh", "oasr/conv1d/staged.cuh", "oasr/conv1d/direct.cuh"),
)

CONV2D_PAGE = Page(
    family=CONV2D,
    notebook="05_conv2d",
    title="05 · conv2d — NHWC convolution and the fused Conv2dSubsampling front end",
    summary="The speech encoder's front end: `conv2d(input [N, H, W, C], weight [K, R, S, C])` with bias and "
    "ReLU/SiLU (as `F.conv2d` on permuted tensors), and `conv2d_subsampling`, WeNet's Conv2dSubsampling4 "
    "(two 3x3 stride-2 convolutions with ReLU) in one kernel, against torch channels-last and NCHW.",
    design="`include/oasr/conv2d/direct.cuh`: few input channels (IC = 1: a pure write problem): with at most "
    "15 taps a warp multiplies 16 pixels x 256 channels on tensor cores (mma.sync, the bias a 16th tap, "
    "the weights in registers) and each lane stores 16-byte chunks of 8 channels; other filters run a "
    "CUDA-core kernel. `include/oasr/conv2d/sm90_implicit_gemm.cuh`: C % 8 == 0 through CUTLASS 3.x's "
    "sm90 implicit GEMM (TMA im2col, wgmma), bias and activation in the epilogue; one JIT module per "
    "(dtype, activation, tile), the tile chosen from K (`oasr/jit/conv2d_config.py`). "
    "`include/oasr/conv2d/subsampling.cuh` (sm_90a): two warpgroups of a CTA each take 64 output pixels "
    "x all channels and walk the second conv's K in steps of (tap, 32 input channels): the step's first-conv "
    "output is one wgmma (the pixels' 3x3 input patches times w1, the bias a 10th tap) whose accumulators, "
    "rounded with ReLU, are the register A operand of the step's second-conv wgmmas, so the first conv's "
    "output never leaves registers; w2 streams through a TMA ring.",
    headers=("oasr/conv2d/direct.cuh", "oasr/conv2d/sm90_implicit_gemm.cuh", "oasr/conv2d/subsampling.cuh"),
)

GEMM_PAGE = Page(
    family=GEMM,
    notebook="06_gemm",
    title="06 · gemm — `act(input @ weight.T + bias)` on Hopper tensor cores",
    summary="The Conformer's linear layers (feed-forward, attention projections, the pointwise convolutions): "
    "`gemm(input [..., K], weight [N, K], bias [N], activation)` as `act(F.linear(...))`, and `gemm_glu` "
    "(`F.glu(F.linear(...), -1)`, the pointwise convolution before the depthwise one), bf16 and fp16 "
    "with fp32 accumulation, against cuBLAS through torch.",
    design="`include/oasr/gemm/sm90_gemm.cuh`: CUTLASS 3.x's TMA warp-specialized kernel (a producer warp "
    "streams A and B tiles into a shared-memory ring with TMA; consumer warpgroups run wgmma into fp32 "
    "accumulators), cooperative, ping-pong or non-persistent, with clusters that multicast the shared "
    "tile. The bias and the activation are an epilogue visitor tree computed on the accumulators and "
    "rounded once. Each (dtype, epilogue, tile, cluster, schedule) is its own JIT module, built on first "
    "use; `oasr/jit/gemm_config.py` chooses one per shape by a rule measured on the H200 "
    "(dev/gemm/RESULTS.md): 128x128 ping-pong tiles for most shapes (long K too), "
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
    "the epilogue stores value * sigmoid(gate).",
    headers=("oasr/gemm/sm90_gemm.cuh", "oasr/gemm/sm90_gemm_tail.cuh", "oasr/gemm/sm90_group_gemm_direct.cuh"),
)

BMM_PAGE = Page(
    family=BMM,
    notebook="07_bmm",
    title="07 · bmm — batched matrix products for attention",
    summary="Attention's two batched products on Hopper tensor cores: scores `a [batch, M, K] @ b [batch, N, K]^T` "
    "and context `a [batch, M, K] @ b [batch, K, N]`, any sizes (odd sequence lengths such as 375 "
    "included), against torch.bmm (cuBLAS).",
    design="The gemm family's CUTLASS kernel (`include/oasr/gemm/sm90_gemm.cuh`) with the batch as its L "
    "mode and B K-major or N-major. TMA needs 16-byte row strides, not 16-byte extents: an odd "
    "length is a ragged tile (zero-filled loads, clipped stores), and a row of odd length is given "
    "a padded stride (a strided result view; a copy only for an operand that has none).",
    headers=("oasr/gemm/sm90_gemm.cuh",),
)

GROUP_GEMM_PAGE = Page(
    family=GROUP_GEMM,
    notebook="08_group_gemm",
    title="08 · group_gemm — one GEMM per group of rows, the groups sized on the device",
    summary="`group_gemm(input [L, K], weight [G, N, K], offsets [G], bias [G, N])`: the rows of `input` come in G "
    "consecutive groups whose ends `offsets` holds on the device, and group g's rows go through "
    "`F.linear(rows, weight[g], bias[g])`. bf16 and fp16 with fp32 accumulation, against "
    "`torch._grouped_mm`, a dense GEMM over all rows and a Python loop of `F.linear`.",
    design="Two kernels, chosen per shape (`gemm_config.choose_group`). Below K = 2048 (up to 1024 groups), "
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
    "memory (`oasr.group_gemm_check()`).",
    headers=("oasr/gemm/sm90_group_gemm_direct.cuh", "oasr/gemm/sm90_group_gemm.cuh", "oasr/gemm/sm90_gemm.cuh"),
)

ATTENTION_PAGE = Page(
    family=ATTENTION,
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
)

PAGES: tuple[Page, ...] = (
    SCALE_PAGE,
    ACTIVATION_PAGE,
    NORM_PAGE,
    CONV1D_PAGE,
    CONV2D_PAGE,
    GEMM_PAGE,
    BMM_PAGE,
    GROUP_GEMM_PAGE,
    ATTENTION_PAGE,
)
"""One page per family, in notebook order."""


def page_of(family: Family) -> Page:
    """The notebook page of ``family``; ValueError naming the families that have one otherwise."""
    for page in PAGES:
        if page.family == family:
            return page
    raise ValueError(
        f"no notebook page for the family {family.name!r}; pages: {', '.join(p.family.name for p in PAGES)}"
    )


@dataclass(frozen=True)
class ModelPage:
    """One model's notebook (an encoder of :mod:`oasr.models`, not a kernel family).

    Attributes
    ----------
    notebook : str
        Its file, ``notebooks/<notebook>.ipynb`` (``"10_conformer"``).
    title, summary, design : str
        Its title, its opening paragraph and the model's composition in a paragraph (Markdown).
    """

    notebook: str
    title: str
    summary: str
    design: str


CONFORMER_PAGE = ModelPage(
    notebook="10_conformer",
    title="10 · Conformer — the whole encoder of oasr ops against torch",
    summary="`oasr.models.ConformerEncoder`: ESPnet/WeNet's Conformer encoder (their structure and state_dict keys, "
    "inference only) composed of the library's ops, in bfloat16, on issue 52's workloads: 16 utterances of 8-15 s, "
    "64 of 2.5 s and one of 60 s.",
    design="`oasr/models/encoder.py`: the front end is `conv2d_subsampling` + `gemm` (weights packed once at load) and "
    "the relative positional encoding; each layer runs the macaron feed-forward half-steps (`add_layer_norm` with "
    "alpha = 0.5, `gemm` with bias + SiLU), the relative-position self-attention (one packed QKV `gemm`, "
    "`rel_pos_attention`, the output projection; ESPnet's legacy form in torch), the convolution module "
    "(`gemm_glu`, `depthwise_conv1d` with the BatchNorm folded at load, SiLU and the padding mask, `gemm`) and the "
    "final LayerNorm, every residual add fused into the next norm. `encoder.graphed(...)` replays one CUDA graph "
    "per bucket of input frames; `oasr/models/reference.py` is the same module in plain torch, the baseline and the "
    "float64 reference.",
)

MODEL_PAGES: tuple[ModelPage, ...] = (CONFORMER_PAGE,)
"""One page per model, after the families' notebooks."""
