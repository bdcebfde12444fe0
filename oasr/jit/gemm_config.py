"""Which CUTLASS instantiation runs a gemm or bmm: tile, cluster, schedule and stages per shape.

Each :class:`GemmConfig`, with a dtype, an epilogue and B's layout, is one JIT module
(:class:`oasr.jit.core.Variant`), built the first time a call needs it. :func:`choose` picks
the configuration from the problem's shape.

The rule is read off ``dev/gemm/results/tune_h200.txt`` (``dev/gemm/tune.py`` on an H200: every
configuration of :data:`CANDIDATES` next to cuBLAS on 14 gemm and 10 bmm shapes, all measured
correct; run at d238755, ``results/d238755/``, and again at 7d8b06f, the table). It counts 128x128 output tiles against
the 132 SMs:

* a grid of less than half a wave takes 64x128 tiles, non-persistent (twice the CTAs in flight);
* a grid of at most one wave takes 128x128 tiles, non-persistent (no scheduler loop to pay for);
* more waves take 128x128 ping-pong (one warpgroup's epilogue hides under the other's math). At
  K = 2048 cooperative won the first run by 2% and lost the second by up to 16% (its times moved
  with cuBLAS's between the runs, ping-pong's did not), so ping-pong takes long K too;
* grids that overflow one wave of 128x128 tiles but fit one of 128x192 (1500x2048x512) take one wave
  of 128x192 tiles, :data:`PARTIAL_WAVE` (x0.97 of cuBLAS against x0.82 for ping-pong 128x128);
* N <= 64 takes 64x64 ping-pong, whose tiles N fills (measured on attention's context product,
  bmm 64x375x64x375: 27.1 us against 29.5 us for 128x128 ping-pong).

In the second run the rule's pick is the best configuration or within 3% of it on every gemm
shape (geomean x1.03 of cuBLAS over the 14; 1500x2048x512, 1.45 waves of 128x128 tiles, was the
worst at x0.84 until the wave study's 128x192 tiles). A shape outside the table falls into the same
tile-count bands; the bands' edges (66 and 132 tiles) are where the measured winners change.

A bias or activation epilogue (``fused``) changes the winners: ping-pong with 128x128 tiles is the slowest there, and
the best of the fused sweep (4 shapes) is cooperative, 128x128 for one wave and 128x256 (when N >= 256 fills it) for
more (``dev/gemm/results/epilogue_h200.txt``), except where the bare rule takes one wave of 128x128 tiles, where 64x128
tiles two to an SM hide one CTA's epilogue under the other's math (:data:`FUSED_ONE_WAVE`; ``tune.py --wave --fused``,
``dev/gemm/results/wave_fused_h200.txt``: 6.20 against 6.75 us on 8000x256x256, 10.43 against 10.59 on 8000x256x1024),
and where it takes :data:`PARTIAL_WAVE`: one wave of 128x192 tiles beat 128x256 cooperative with bias + SiLU on
1500x2048x512 (bf16 9.79 against 10.96 us, ``direct_biasonce_h200.txt``; fp16 11.34 against 12.23,
``direct_f16_h200.txt``), and those tiles on the family's own kernel, :data:`TAIL`, beat CUTLASS's: 8.58 against
9.74 us, x1.035 of bare cuBLAS (``dev/gemm/results/tail_h200.txt``). Its two warpgroups store from registers, and the
last k-blocks' products are issued in two column parts, the epilogue of the first under the second's products; as
128x256 tiles on the many-wave shapes it lost to the direct kernel (14.52 against 12.51 us on 8000x1024x256).
group_gemm's direct kernel (:data:`DIRECT`) takes grids of three waves or more at K <= 512:
with its producer warpgroup's registers handed to the consumers (setmaxnreg) its bias + SiLU took 13.57 us on
8000x1024x256 (504 tiles) and 18.75 on 16000x512x512 (500) against 14.10 and 19.58 for the CUTLASS picks, and lost on
the one-wave shapes (7.33 against 6.76 on 8000x256x256, 11.26 against 11.07 on 1500x2048x512;
``dev/gemm/results/direct_final_h200.txt``). Before that change it had lost on 7 of 8 shapes, winning only on
24000x2048x512 (``direct_h200.txt``); at K = 2048 it trails CUTLASS in group_gemm's sweeps. It always runs ``gemm_glu``:
one launch with the gate in the epilogue, x0.98-1.02 of cuBLAS over 2N where the gemm and ``oasr.glu`` took x1.39-1.55.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

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

NUM_SMS_H200 = 132


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


WAVE_CANDIDATES: tuple[GemmConfig, ...] = (
    # 8000x256x256 (126 tiles of 128x128, 4 K blocks each: launch and prologue bound)
    GemmConfig(128, 128, 64, 1, 2, "nonpersistent"),  # A multicast to both N tiles of a row
    GemmConfig(128, 128, 128, 1, 1, "nonpersistent"),  # half the K blocks, so half the pipeline round trips
    GemmConfig(64, 128, 64, 1, 1, "nonpersistent", 4),  # 252 CTAs, two resident per SM (4 stages: 96 KB)
    GemmConfig(64, 128, 64, 1, 2, "nonpersistent", 4),  # the same with A multicast
    GemmConfig(64, 256, 64, 1, 1, "nonpersistent", 4),  # 125 CTAs of wgmma's widest N
    # 1500x2048x512 (192 tiles of 128x128: 1.45 waves)
    GemmConfig(128, 192, 64, 1, 1, "cooperative"),  # 12 x 11 = 132 tiles: one wave
    GemmConfig(128, 192, 64, 2, 1, "cooperative"),  # the same with B multicast
    GemmConfig(128, 192, 64, 1, 1, "nonpersistent"),  # one wave, one warpgroup per tile
    GemmConfig(64, 192, 64, 1, 1, "pingpong"),  # 24 x 11 = 264 tiles: two per SM, one per warpgroup
)
"""Issue 17's candidates for the two shapes below 0.95x cuBLAS in the 7d8b06f table: tiles that fill one
wave, multicast, fewer K blocks, two CTAs per SM (``dev/gemm/tune.py --wave`` times them). Stream-K
(128x128x32 and 128x256x32) was the slowest candidate on every shape, x0.49-0.78 of cuBLAS
(``dev/gemm/results/a93ff7a/wave_h200.txt``), and was removed; so were 64x192 and 128x96 non-persistent tiles two
CTAs to an SM (3 stages), meant for 1500x2048x512's bias + SiLU: 9.44 and 12.75 us against 9.54 for the pick, 1.4-2.1x
its time on the other shapes (``dev/gemm/results/wave_fused_d32aad9_h200.txt``)."""

CANDIDATES: tuple[GemmConfig, ...] = (
    GemmConfig(128, 128, 64, 1, 1, "cooperative"),
    GemmConfig(128, 128, 64, 2, 1, "cooperative"),
    GemmConfig(128, 256, 64, 1, 1, "cooperative"),
    GemmConfig(128, 256, 64, 2, 1, "cooperative"),
    GemmConfig(256, 128, 64, 1, 2, "cooperative"),
    GemmConfig(64, 128, 64, 1, 1, "pingpong"),
    GemmConfig(64, 256, 64, 1, 1, "pingpong"),
    GemmConfig(128, 128, 64, 1, 1, "pingpong"),
    GemmConfig(128, 128, 64, 2, 1, "pingpong"),
    GemmConfig(64, 128, 64, 1, 1, "nonpersistent"),
    GemmConfig(128, 128, 64, 1, 1, "nonpersistent"),
    GemmConfig(64, 64, 64, 1, 1, "pingpong"),
    *WAVE_CANDIDATES,
)
"""What ``dev/gemm/tune.py`` times on the H200."""

NARROW = GemmConfig(64, 64, 64, 1, 1, "pingpong")
SMALL_GRID = GemmConfig(64, 128, 64, 1, 1, "nonpersistent")
ONE_WAVE = GemmConfig(128, 128, 64, 1, 1, "nonpersistent")
MANY_WAVES = GemmConfig(128, 128, 64, 1, 1, "pingpong")
PARTIAL_WAVE = GemmConfig(128, 192, 64, 1, 1, "nonpersistent")
"""Grids of more than one wave of 128x128 tiles that 128x192 tiles fit in one (1500x2048x512: 192 tiles,
12 x 11 = 132 of 128x192): one wave of 128x192 tiles, the winner of issue 17's candidates
(``dev/gemm/results/a93ff7a/wave_h200.txt``: 7.94 us, x0.973 of cuBLAS, against 9.45 us for 128x128 ping-pong, 8.51
for 128x192 cooperative)."""
FUSED_NARROW = GemmConfig(128, 128, 64, 1, 1, "cooperative")
FUSED_WIDE = GemmConfig(128, 256, 64, 1, 1, "cooperative")
FUSED_ONE_WAVE = GemmConfig(64, 128, 64, 1, 1, "nonpersistent", 4)
"""A fused gemm whose bare pick is :data:`ONE_WAVE`: 64x128 tiles two to an SM (4 stages, 96 KB), so that one CTA's
epilogue runs beside the other's math (bias + SiLU on 8000x256x256: 6.20 us against 6.75 for 128x128 cooperative,
``dev/gemm/results/wave_fused_h200.txt``)."""
TAIL = GemmConfig(128, 192, 64, 1, 1, "tail")
"""A fused gemm whose bare pick is :data:`PARTIAL_WAVE` (one wave of 128x192 tiles): the same tiles on
``include/oasr/gemm/sm90_gemm_tail.cuh``, whose epilogue runs mostly under the tile's last products (the module
docstring)."""
DIRECT = GemmConfig(128, 128, 64, 1, 1, "direct")
"""group_gemm's own kernel (``include/oasr/gemm/sm90_group_gemm_direct.cuh``); for gemm one group of every row, its
epilogue in registers: the activations, and GLU (``gemm_glu``'s one launch)."""
FUSED_DIRECT_MIN_TILES = 3 * NUM_SMS_H200
FUSED_DIRECT_MAX_K = 512
"""A fused gemm of at least this many 128x128 tiles and K up to this runs on :data:`DIRECT` (the module docstring)."""
PICKS = tuple(dict.fromkeys((NARROW, SMALL_GRID, ONE_WAVE, PARTIAL_WAVE, MANY_WAVES)))
FUSED_PICKS = (FUSED_NARROW, FUSED_WIDE, FUSED_ONE_WAVE, PARTIAL_WAVE, TAIL, DIRECT)
"""What :func:`choose` returns, without and with a bias/activation epilogue (``tune.py --build`` builds them)."""
DEFAULT = MANY_WAVES
"""The family's representative build (prebuilding, the CPU build test)."""


@functools.lru_cache(maxsize=4096)  # a model's few shapes, asked on every call
def choose(m: int, n: int, k: int, batch: int = 1, fused: bool = False) -> GemmConfig:
    """The configuration for an ``[m, k] x [k, n]`` problem, ``batch`` times (the H200 table's rule).

    ``fused``: the epilogue adds a bias or applies an activation. The rule and the measurements it
    comes from are in the module docstring.
    """
    tiles = batch * -(-m // 128) * -(-n // 128)  # 128x128 output tiles
    if fused:
        if batch == 1 and tiles >= FUSED_DIRECT_MIN_TILES and k <= FUSED_DIRECT_MAX_K:
            return DIRECT
        cutlass = choose_cutlass_fused(m, n, k, batch)
        return TAIL if batch == 1 and cutlass == PARTIAL_WAVE else cutlass
    if n <= 64:
        return NARROW
    if 2 * tiles <= NUM_SMS_H200:
        return SMALL_GRID
    if tiles <= NUM_SMS_H200:
        return ONE_WAVE
    if batch * -(-m // 128) * -(-n // 192) <= NUM_SMS_H200:
        return PARTIAL_WAVE
    return MANY_WAVES


def choose_cutlass_fused(m: int, n: int, k: int, batch: int = 1) -> GemmConfig:
    """CUTLASS's configuration for a fused ``[m, k] x [k, n]`` problem (what :func:`choose` gives the shapes it keeps
    off the direct kernel): the bare rule's one wave of 128x192 tiles where it takes them, :data:`FUSED_ONE_WAVE` where
    it takes one wave of 128x128, else 128x256 cooperative where the grid is over a wave and N fills the tile, and
    128x128 cooperative."""
    bare = choose(m, n, k, batch)
    if bare == PARTIAL_WAVE:
        return bare
    if bare == ONE_WAVE:
        return FUSED_ONE_WAVE
    tiles = batch * -(-m // 128) * -(-n // 128)
    return FUSED_WIDE if tiles > NUM_SMS_H200 and n >= 256 else FUSED_NARROW


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


GROUP_DIRECT_MAX_GROUPS = 1024
"""The direct kernel keeps a table of 12 bytes per group in shared memory beside its six 32 KB stages: up to 1024
groups fit; more take CUTLASS's kernel."""
GROUP_WIDE = GemmConfig(128, 256, 64, 1, 1, "cooperative")
GROUP_NARROW = GemmConfig(128, 128, 64, 2, 1, "cooperative")
GROUP_LONG_K = MANY_WAVES  # the gemm rule's pick at long K too
GROUP_LONG_K_NARROW = GemmConfig(256, 128, 64, 1, 1, "cooperative")  # ... where N <= 256
GROUP_LONG_K_MIN = 2048
GROUP_PICKS = (DIRECT, GROUP_WIDE, GROUP_NARROW, GROUP_LONG_K, GROUP_LONG_K_NARROW)
"""What :func:`choose_group` returns (``dev/group_gemm/bench.py --build`` builds both dtypes, plain and bias)."""
GROUP_CANDIDATES: tuple[GemmConfig, ...] = (
    *GROUP_PICKS,
    GemmConfig(128, 128, 64, 1, 1, "cooperative"),
    GemmConfig(128, 256, 64, 2, 1, "cooperative"),
    GemmConfig(128, 256, 64, 1, 2, "cooperative"),
)
"""The grouped GEMM's configurations, timed against each other by ``dev/group_gemm/bench.py``: the direct
kernel, and CUTLASS's persistent schedules (the grid is one CTA per SM and the scheduler walks the groups'
tiles): the picks, the runners-up of the first H200 sweep (128x128 cooperative, and ping-pong, the earlier
default), and larger tiles and clusters for the issue's 8 x 1000 rows (128x256 with a 2x1 or 1x2 cluster,
256x128). The 64-row ping-pong tiles lost every shape of that sweep (1.09-2.31x the best time) and are no
longer built."""
GROUP_DEFAULT = DIRECT
"""The group_gemm family's representative build (prebuilding, the CPU build test): the issue's shape's pick."""
GROUP_PDL = True
"""Whether ``oasr.group_gemm`` launches its kernels with programmatic dependent launch (PDL: each becomes
resident while the kernel before it runs, and waits on it with ``griddepcontrol.wait`` before touching memory),
below K = :data:`GROUP_LONG_K_MIN` (:func:`group_pdl`). The second H200 sweep (``dev/group_gemm/results/
bench_h200.txt``, the ``+pdl`` rows beside the same configurations without) measured 0.7-0.9 us less on every
shape of a few microseconds (8 x 1000 rows, 128x256: 16.77 against 17.62 us)."""


def group_pdl(k: int) -> bool:
    """Whether the grouped GEMM of depth ``k`` launches with PDL: :data:`GROUP_PDL`, and not from K = 2048, where
    CUTLASS's kernels took 2-10% longer with it in both of the last sweeps (``results/pingpong_h200.txt`` and
    ``results/rowstores_h200.txt``: 64 x ~16000 rows, N = 256, 256x128 cooperative 2020 and 1977 us without,
    2247 and 2171 with; N = 512, 128x128 ping-pong 4140 and 4034 without, 4145 and 4104 with)."""
    return GROUP_PDL and k < GROUP_LONG_K_MIN


@functools.lru_cache(maxsize=4096)
def choose_group(n: int, k: int, groups: int = 1) -> GemmConfig:
    """The grouped GEMM's configuration for ``groups`` groups of ``[rows, k] x [k, n]`` (with or without a
    per-group bias), from the H200 sweeps.

    ``dev/group_gemm/results/rowstores_h200.txt`` (CUDA-graph device time, bf16, with PDL, the same run): below
    K=2048 the direct kernel (one launch, no setup kernel, no per-group descriptors) takes 11.9 us on the issue's
    8 x 1000 rows (N=1024, K=256) against 17.0 for CUTLASS's best (256x128 cooperative), 13.8 with a bias, and
    3.9 and 4.2 us against 7.5 and 7.8 on the narrow shapes (32 x ~256 rows, K=64, N=64 and 128). From K=2048 it
    reaches 0.80-0.84x of CUTLASS (without PDL, :func:`group_pdl`): 64 x ~16000 rows, N=256, 256x128 cooperative
    1977 us (128x128 ping-pong 2082, direct 2596; 2020, 2209 and 2732 in ``pingpong_h200.txt``); N=512, 128x128
    ping-pong, the gemm family's long-K pick, 4034 (256x128 cooperative 4329, direct 4949). More than
    :data:`GROUP_DIRECT_MAX_GROUPS` groups keep CUTLASS's earlier picks: 128x256 cooperative where N fills it,
    else 128x128 cooperative with a 2x1 cluster.
    """
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
