"""Which kernel configuration runs a gemm, bmm or group_gemm: tile, cluster, schedule and stages per shape.

Each :class:`GemmConfig`, with a dtype, an epilogue and B's layout, is one JIT module
(:class:`oasr.jit.core.Variant`), built the first time a call needs it. :func:`choose` picks the
configuration of a gemm or bmm from the problem's shape and the GPU's SM count, :func:`choose_group`
the grouped GEMM's. Each rule below carries its why and one figure; what else was measured, and on
which commit: dev/gemm/RESULTS.md and dev/group_gemm/RESULTS.md.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .core import Variant
from .enums import enumerator

SCHEDULES = ("cooperative", "pingpong", "nonpersistent", "direct", "tail")
"""Cooperative: two warpgroups share a 128-row tile. Ping-pong: each warpgroup owns a tile and one's
epilogue overlaps the other's math. Non-persistent: one CTA per tile, no scheduler loop. Direct (group_gemm
and gemm, not bmm): ``include/oasr/gemm/sm90_group_gemm_direct.cuh``, one kernel reading the group offsets itself
(gemm: one group), 128x128x64 tiles shared by two warpgroups, no clusters. Tail (gemm only, no GLU):
``include/oasr/gemm/sm90_gemm_tail.cuh``, one CTA per 128x128, 128x192 or 128x256 tile, whose epilogue runs mostly
under the tile's last products."""

EPILOGUES = ("plain", "bias", "relu", "gelu", "gelu_tanh", "silu")
"""The gemm epilogues: the accumulators as they are, or ``act(acc + bias)`` (a missing bias reads as 0); and
``"glu"`` (``gemm_glu``: value * sigmoid(gate) of ``acc + bias``) on :data:`DIRECT` only. Each module is built for
one, named to the launcher as ``csrc/gemm_epilogue.h``'s enumerator (:func:`~oasr.jit.enums.enumerator`)."""
_CUTLASS_SCHEDULES = {"cooperative": "Cooperative", "pingpong": "PingPong", "nonpersistent": "NonPersistent"}
"""The CUTLASS schedules' kernel types (``include/oasr/gemm/sm90_gemm.cuh``), passed by name as -DOASR_GEMM_SCHEDULE."""
_LAUNCHERS = {"direct": "{family}_direct.cu", "tail": "{family}_tail.cu"}
"""The schedules with launchers of their own (``csrc/``); the CUTLASS ones share ``csrc/<family>.cu``."""

DTYPES = ("float16", "bfloat16")
"""The storage dtypes the kernels are built for (torch's names)."""
_DTYPE_CODES = {"float16": 1, "bfloat16": 2}
_DTYPE_NAMES = {"float16": "f16", "bfloat16": "bf16"}

H200_SMS = 132
"""The SM count the rules' bands were measured with (an H200's), and the count :func:`sm_count` gives without a GPU."""


def sm_count(device: Any = None) -> int:
    """The SM count of ``device`` (a CUDA ``torch.device``; default: the current one), cached per device, or
    :data:`H200_SMS` where no GPU is visible (CPU tests, builds): the width of a wave in :func:`choose`'s bands."""
    cuda = _cuda()
    if cuda is None:
        return H200_SMS
    index = device.index if device is not None and device.index is not None else cuda.current_device()
    return _device_sms(index)


@functools.cache
def _cuda() -> Any:
    """``torch.cuda`` where a GPU is visible, else None (asked once: it costs a microsecond a call)."""
    import torch  # (oasr.jit imports torch only here, when a rule first needs the device)

    return torch.cuda if torch.cuda.is_available() else None


@functools.cache
def _device_sms(index: int) -> int:
    return _cuda().get_device_properties(index).multi_processor_count


@dataclass(frozen=True)
class GemmConfig:
    """One kernel configuration: CTA tile (M, N, K), cluster (M, N), schedule and pipeline stages (0: auto)."""

    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    cluster_m: int = 1
    cluster_n: int = 1
    schedule: str = "cooperative"
    stages: int = 0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"GemmConfig: schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.schedule == "cooperative" and self.tile_m % 128:
            raise ValueError("GemmConfig: the cooperative schedule needs a tile_m that is a multiple of 128")
        direct_tile = (self.tile_m, self.tile_n, self.tile_k, self.cluster_m, self.cluster_n) == (128, 128, 64, 1, 1)
        if self.schedule == "direct" and not direct_tile:
            raise ValueError("GemmConfig: the direct schedule takes 128x128x64 tiles without clusters")
        tail_tile = (self.tile_m, self.tile_k, self.cluster_m, self.cluster_n, self.stages) == (128, 64, 1, 1, 0)
        if self.schedule == "tail" and not (tail_tile and self.tile_n in (128, 192, 256)):
            raise ValueError("GemmConfig: the tail schedule takes 128x{128,192,256}x64 tiles, no clusters, stages 0")

    @property
    def name(self) -> str:
        """E.g. ``128x128x64_c1x1_cooperative_s0``."""
        tile = f"{self.tile_m}x{self.tile_n}x{self.tile_k}"
        return f"{tile}_c{self.cluster_m}x{self.cluster_n}_{self.schedule}_s{self.stages}"

    def flags(self) -> tuple[str, ...]:
        return (
            f"-DOASR_GEMM_TILE_M={self.tile_m}",
            f"-DOASR_GEMM_TILE_N={self.tile_n}",
            f"-DOASR_GEMM_TILE_K={self.tile_k}",
            f"-DOASR_GEMM_CLUSTER_M={self.cluster_m}",
            f"-DOASR_GEMM_CLUSTER_N={self.cluster_n}",
            *([f"-DOASR_GEMM_SCHEDULE={_CUTLASS_SCHEDULES[self.schedule]}"] if self.is_cutlass else []),
            f"-DOASR_GEMM_STAGES={self.stages}",
        )

    @property
    def is_cutlass(self) -> bool:
        """Whether the schedule is one of CUTLASS's kernels (the others are the family's own)."""
        return self.schedule in _CUTLASS_SCHEDULES

    def launcher(self, family: str) -> str | None:
        """The ``csrc/`` launcher of the schedule's own kernel for ``family``, None for CUTLASS's."""
        return _LAUNCHERS[self.schedule].format(family=family) if not self.is_cutlass else None


# The gemm/bmm rule counts the grid's 128x128 output tiles against one wave (one CTA per SM). Each bare pick won its
# band in the H200 sweep at 7d8b06f (bf16, CUDA-graph device time; every candidate's figure: dev/gemm/RESULTS.md).
NARROW = GemmConfig(64, 64, 64, 1, 1, "pingpong")
"""N <= 64, which fills the tile: bmm 64x375x64x375 27.1 us against 29.5 for 128x128 ping-pong."""
SMALL_GRID = GemmConfig(64, 128, 64, 1, 1, "nonpersistent")
"""At most half a wave, twice the CTAs in flight: 1500x512x2048 8.03 us (x1.004 of cuBLAS) against 12.57 for 128x128."""
ONE_WAVE = GemmConfig(128, 128, 64, 1, 1, "nonpersistent")
"""At most one wave, no scheduler loop: 8000x256x256 4.82 us against 5.41 for ping-pong."""
PARTIAL_WAVE = GemmConfig(128, 192, 64, 1, 1, "nonpersistent")
"""Over one wave of 128x128 tiles but within one of 128x192: 1500x2048x512 7.94 us (x0.973 of cuBLAS, at a93ff7a)
against 9.45 for 128x128 ping-pong."""
MANY_WAVES = GemmConfig(128, 128, 64, 1, 1, "pingpong")
"""More, long K too: one warpgroup's epilogue under the other's math. 8000x1024x256 10.94 us against 12.73 for
cooperative; 16000x512x2048 51.93 against 60.34."""
# A bias or an activation (fused) changes the winners; bias + SiLU on the H200.
FUSED_NARROW = GemmConfig(128, 128, 64, 1, 1, "cooperative")
"""Fused, grids of the other bands: 8000x256x256 5.99 us against 6.36 for ping-pong."""
FUSED_WIDE = GemmConfig(128, 256, 64, 1, 1, "cooperative")
"""Fused, over a wave where N >= 256: 8000x1024x256 13.62 us against 14.12 for ping-pong."""
FUSED_ONE_WAVE = GemmConfig(64, 128, 64, 1, 1, "nonpersistent", 4)
"""Fused where the bare pick is :data:`ONE_WAVE`: two CTAs to an SM, one's epilogue beside the other's math
(8000x256x256 6.20 us against 6.75 for 128x128 cooperative)."""
TAIL = GemmConfig(128, 192, 64, 1, 1, "tail")
"""Fused gemm where the bare pick is :data:`PARTIAL_WAVE`: the family's own kernel, its epilogue under the tile's last
products (1500x2048x512 8.58 us against 9.74 for CUTLASS's 128x192 tiles)."""
DIRECT = GemmConfig(128, 128, 64, 1, 1, "direct")
"""group_gemm's kernel, every row one group: fused grids of three waves or more at K <= 512 (8000x1024x256 13.57 us
against 14.10 for CUTLASS's pick), and ``gemm_glu``'s one launch."""
FUSED_DIRECT_MIN_WAVES = 3
FUSED_DIRECT_MAX_K = 512
# Long K (issue 54: 6000x768x3072 at 0.75x cuBLAS on MANY_WAVES): K tiles of 128, half the k-blocks a tile and twice
# the bytes in flight a stage. Not measured yet, so no band picks them: the autotuner times them beside the rule's
# configuration and cuBLAS for bare products of K >= LONG_K_MIN (oasr/jit/gemm_plan.py's candidates).
LONG_K_MIN = 2048
LONG_K_PINGPONG = GemmConfig(128, 128, 128, 1, 1, "pingpong")
LONG_K_COOPERATIVE = GemmConfig(128, 128, 128, 1, 1, "cooperative")
LONG_K_PICKS = (LONG_K_PINGPONG, LONG_K_COOPERATIVE)
PICKS = tuple(dict.fromkeys((NARROW, SMALL_GRID, ONE_WAVE, PARTIAL_WAVE, MANY_WAVES)))
FUSED_PICKS = (FUSED_NARROW, FUSED_WIDE, FUSED_ONE_WAVE, PARTIAL_WAVE, TAIL, DIRECT)
"""What :func:`choose` returns, without and with a bias/activation epilogue."""
DEFAULT = MANY_WAVES
"""The family's representative build (prebuilding, the CPU build test)."""


def choose(m: int, n: int, k: int, batch: int = 1, fused: bool = False, sms: int | None = None) -> GemmConfig:
    """The configuration for an ``[m, k] x [k, n]`` problem, ``batch`` times, on a GPU of ``sms`` SMs (default: the
    current device's, :func:`sm_count`). ``fused``: the epilogue adds a bias or applies an activation."""
    return _choose(m, n, k, batch, fused, sms or sm_count())


@functools.lru_cache(maxsize=4096)  # a model's few shapes, asked on every call
def _choose(m: int, n: int, k: int, batch: int, fused: bool, sms: int) -> GemmConfig:
    tiles = batch * -(-m // 128) * -(-n // 128)  # 128x128 output tiles
    if fused:
        if batch == 1 and tiles >= FUSED_DIRECT_MIN_WAVES * sms and k <= FUSED_DIRECT_MAX_K:
            return DIRECT
        cutlass = choose_cutlass_fused(m, n, k, batch, sms)
        return TAIL if batch == 1 and cutlass == PARTIAL_WAVE else cutlass
    if n <= 64:
        return NARROW
    if 2 * tiles <= sms:
        return SMALL_GRID
    if tiles <= sms:
        return ONE_WAVE
    if batch * -(-m // 128) * -(-n // 192) <= sms:
        return PARTIAL_WAVE
    return MANY_WAVES


def choose_cutlass_fused(m: int, n: int, k: int, batch: int = 1, sms: int | None = None) -> GemmConfig:
    """CUTLASS's configuration for a fused problem (the shapes :func:`choose` keeps off the direct kernel): the bare
    rule's PARTIAL_WAVE where it takes it, FUSED_ONE_WAVE for its ONE_WAVE, else FUSED_WIDE over a wave where N fills
    it, FUSED_NARROW."""
    sms = sms or sm_count()
    bare = _choose(m, n, k, batch, False, sms)
    if bare == PARTIAL_WAVE:
        return bare
    if bare == ONE_WAVE:
        return FUSED_ONE_WAVE
    tiles = batch * -(-m // 128) * -(-n // 128)
    return FUSED_WIDE if tiles > sms and n >= 256 else FUSED_NARROW


def _cutlass_schedule(config: GemmConfig, family: str) -> None:
    owner = {"direct": "group_gemm's and gemm's kernel", "tail": "gemm's own kernel"}.get(config.schedule)
    if owner is not None:
        raise ValueError(f"{family}: the {config.schedule} schedule is {owner}; pick a CUTLASS schedule")


def gemm_variant(dtype: str, epilogue: str, config: GemmConfig) -> Variant:
    """The gemm module for ``dtype`` ("float16", "bfloat16"), ``epilogue`` (of :data:`EPILOGUES`, or ``"glu"`` on
    :data:`DIRECT` only) and ``config``."""
    if epilogue == "glu" and config.schedule != "direct":
        raise ValueError("gemm_variant: the GLU epilogue runs on the direct schedule only (gemm_config.DIRECT)")
    return Variant(
        name=f"{_DTYPE_NAMES[dtype]}_{epilogue}_{config.name}",
        cuda_cflags=(
            f"-DOASR_GEMM_DTYPE={_DTYPE_CODES[dtype]}",
            f"-DOASR_GEMM_EPILOGUE={enumerator(epilogue)}",
            "-DOASR_GEMM_B_NMAJOR=0",
            *config.flags(),
        ),
        launcher=config.launcher("gemm"),
    )


def bmm_variant(dtype: str, b_n_major: bool, config: GemmConfig) -> Variant:
    """The bmm module for ``dtype``, B's layout (``[batch, K, N]`` when ``b_n_major``) and ``config``."""
    _cutlass_schedule(config, "bmm_variant")
    return Variant(
        name=f"{_DTYPE_NAMES[dtype]}_{'nn' if b_n_major else 'nt'}_{config.name}",
        cuda_cflags=(
            f"-DOASR_GEMM_DTYPE={_DTYPE_CODES[dtype]}",
            f"-DOASR_GEMM_B_NMAJOR={int(b_n_major)}",
            *config.flags(),
        ),
    )


# The grouped GEMM (dev/group_gemm/RESULTS.md; bf16, CUDA-graph device time, H200): below K = 2048 the direct kernel,
# one launch reading the offsets itself: 8 x 1000 rows (N = 1024, K = 256) 11.9 us against 17.0 for CUTLASS's best.
GROUP_DIRECT_MAX_GROUPS = 1024  # its table of 12 bytes a group fits shared memory beside six 32 KB stages up to here
GROUP_WIDE = GemmConfig(128, 256, 64, 1, 1, "cooperative")  # more groups, N >= 256
GROUP_NARROW = GemmConfig(128, 128, 64, 2, 1, "cooperative")  # more groups, N < 256
# From K = 2048 CUTLASS's ptr-array kernel (the direct one reaches 0.80-0.84x of it): 64 x ~16000 rows, N = 256,
# 256x128 cooperative 1977 us against 2082 for 128x128 ping-pong; N = 512, ping-pong 4034 against 4329.
GROUP_LONG_K_MIN = 2048
GROUP_LONG_K = MANY_WAVES  # N > 256
GROUP_LONG_K_NARROW = GemmConfig(256, 128, 64, 1, 1, "cooperative")  # N <= 256
GROUP_PICKS = (DIRECT, GROUP_WIDE, GROUP_NARROW, GROUP_LONG_K, GROUP_LONG_K_NARROW)
"""What :func:`choose_group` returns."""
GROUP_DEFAULT = DIRECT
"""The group_gemm family's representative build (prebuilding, the CPU build test): the issue's shape's pick."""
# Programmatic dependent launch (each kernel resident while the one before runs, waiting on it by griddepcontrol.wait):
# 8 x 1000 rows 16.77 us against 17.62 without; from K = 2048 CUTLASS's kernels took 2-10% longer (1977 against 2171).
GROUP_PDL = True


def group_pdl(k: int) -> bool:
    """Whether the grouped GEMM of depth ``k`` launches with PDL: :data:`GROUP_PDL`, below :data:`GROUP_LONG_K_MIN`."""
    return GROUP_PDL and k < GROUP_LONG_K_MIN


@functools.lru_cache(maxsize=4096)
def choose_group(n: int, k: int, groups: int = 1) -> GemmConfig:
    """The grouped GEMM's configuration for ``groups`` groups of ``[rows, k] x [k, n]`` (with or without a per-group
    bias)."""
    if k >= GROUP_LONG_K_MIN:
        return GROUP_LONG_K_NARROW if n <= 256 else GROUP_LONG_K
    if groups <= GROUP_DIRECT_MAX_GROUPS:
        return DIRECT
    return GROUP_NARROW if n < 256 else GROUP_WIDE


def group_gemm_variant(dtype: str, config: GemmConfig, bias: bool = False) -> Variant:
    """The group_gemm module for ``dtype`` ("float16", "bfloat16"), a persistent ``config`` and the epilogue
    (``bias``: a per-group bias added to the accumulators)."""
    if config.schedule not in ("cooperative", "pingpong", "direct"):
        raise ValueError("group_gemm_variant: the grouped GEMM runs cooperative, ping-pong or direct schedules only")
    return Variant(
        name=f"{_DTYPE_NAMES[dtype]}_{'bias' if bias else 'plain'}_{config.name}",
        cuda_cflags=(
            f"-DOASR_GEMM_DTYPE={_DTYPE_CODES[dtype]}",
            f"-DOASR_GROUP_GEMM_BIAS={int(bias)}",
            "-DOASR_GEMM_B_NMAJOR=0",
            *config.flags(),
        ),
        launcher=config.launcher("group_gemm"),
    )


def _unique(variants: Iterable[Variant]) -> list[Variant]:
    return list({variant.name: variant for variant in variants}.values())


def gemm_variants(tests: bool = False) -> list[Variant]:
    """Every gemm module :func:`choose` or the autotuner can pick, both dtypes: the bare picks and the long-K
    candidates plain, the fused picks with each bias/activation epilogue, GLU on :data:`DIRECT`. ``tests``: also the
    fused picks' plain modules, which the GPU tests force on each of them."""
    fused = [epilogue for epilogue in EPILOGUES if tests or epilogue != "plain"]
    configs = [("plain", c) for c in (*PICKS, *LONG_K_PICKS)] + [(e, c) for e in fused for c in FUSED_PICKS]
    configs.append(("glu", DIRECT))
    return _unique(gemm_variant(dtype, e, c) for dtype in DTYPES for e, c in configs)


def bmm_variants(tests: bool = False) -> list[Variant]:
    """Every bmm module :func:`choose` can pick: both dtypes and layouts of B on each bare pick (the GPU tests use
    the same, whatever ``tests``)."""
    return _unique(bmm_variant(dtype, nn, c) for dtype in DTYPES for nn in (False, True) for c in PICKS)


def group_gemm_variants(tests: bool = False) -> list[Variant]:
    """Every group_gemm module :func:`choose_group` can pick: both dtypes, with and without a bias (the GPU tests use
    the same, whatever ``tests``)."""
    return _unique(group_gemm_variant(d, c, bias) for d in DTYPES for c in GROUP_PICKS for bias in (False, True))
