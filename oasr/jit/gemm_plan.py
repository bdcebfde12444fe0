"""Which backend runs a gemm, gemm_glu or bmm: oasr's kernels or cuBLAS through torch, and why.

The rule is data: :data:`BANDS`, a table read top to bottom, the first band a problem falls in deciding. Each band
names its backend and a two-line why that cites a measured figure (H200, bf16, CUDA-graph device time) and where it
is recorded; where nothing was measured the why says so and the band picks cuBLAS, the safe default (a user who swaps
``F.linear`` for ``oasr.gemm`` must never be slower). Sources cited: issue 54's table (measured at 47462e1, its
shapes and figures also in the wave-3 notes), an H200 run at a named commit, ``reports/h200/tables/``.

The cuBLAS candidate of an epilogue is cuBLASLt's own epilogue through torch where it has one (a bias: ``torch.addmm``;
a bias and ReLU or tanh-GELU: ``torch._addmm_activation``), else cuBLAS then ``oasr.bias_activation`` (one pass);
``gemm_glu``'s is ``torch.addmm`` then ``oasr.glu``. :mod:`oasr.jit.gemm_tune` (``OASR_AUTOTUNE=1``) times the
candidates (:func:`candidates`: those two, and for long K the long-K configurations) instead of reading the table.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import NamedTuple

from . import gemm_config
from .gemm_config import GemmConfig

BACKENDS = ("oasr", "cublas")
OPS = ("gemm", "gemm_glu", "bmm")
LT_ACTIVATIONS = (None, "relu", "gelu_tanh")
"""The activations cuBLASLt's epilogue applies after a bias (its GELU is the tanh form; it has no SiLU)."""
KINDS = ("bare", "lt", "fused", "glu", "bmm")
"""A problem's kind: a gemm without epilogue; one whose epilogue cuBLASLt has; one it lacks; gemm_glu; bmm."""
_INF = float("inf")


class Problem(NamedTuple):
    """One product: ``op`` of ``[m, k] x [k, n]`` (``batch`` of them for bmm; gemm_glu: n is the output's, the weight
    has 2n rows), with a ``bias`` or not and an ``activation`` (gemm's names, None for none). (A named tuple: every
    call makes one, and a tuple is made and hashed in a third of a frozen dataclass's time.)"""

    op: str
    m: int
    n: int
    k: int
    batch: int = 1
    bias: bool = False
    activation: str | None = None

    @property
    def kind(self) -> str:
        if self.op != "gemm":
            return "glu" if self.op == "gemm_glu" else "bmm"
        if not self.bias and self.activation is None:
            return "bare"
        return "lt" if self.bias and self.activation in LT_ACTIVATIONS else "fused"

    @property
    def epilogue(self) -> str:
        """The epilogue's name: ``plain``, ``bias``, ``bias+silu``, ``silu`` (no bias), ``glu``..."""
        if self.op != "gemm":
            return "glu" if self.op == "gemm_glu" else "plain"
        if self.activation is None:
            return "bias" if self.bias else "plain"
        return f"bias+{self.activation}" if self.bias else self.activation

    @property
    def shape(self) -> str:
        return f"{self.batch}x{self.m}x{self.n}x{self.k}" if self.op == "bmm" else f"{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True)
class Band:
    """A region of problems and its backend: every bound inclusive (``k_max`` too), ``kinds`` the problem kinds it
    covers, ``picks`` (when given) the oasr configurations :func:`gemm_config.choose` must pick for the problem,
    ``odd_n`` (when given) whether N must (True) or must not (False) be a multiple of 8 (16-byte rows)."""

    name: str
    kinds: tuple[str, ...]
    backend: str
    why: str
    m_min: int = 0
    m_max: float = _INF
    n_min: int = 0
    k_min: int = 0
    k_max: float = _INF
    picks: tuple[GemmConfig, ...] = ()
    odd_n: bool | None = None
    min_waves: int = 0
    """128x128 output tiles over the output (gemm_glu: its 2N columns), in waves of one CTA per SM."""

    def covers(self, p: Problem, config: GemmConfig, sms: int) -> bool:
        tiles = p.batch * -(-p.m // 128) * -(-(2 * p.n if p.op == "gemm_glu" else p.n) // 128)
        return (
            p.kind in self.kinds
            and self.m_min <= p.m <= self.m_max
            and p.n >= self.n_min
            and self.k_min <= p.k <= self.k_max
            and (not self.picks or config in self.picks)
            and (self.odd_n is None or (p.n % 8 != 0) == self.odd_n)
            and tiles >= self.min_waves * sms
        )


# Read top to bottom; each kind's last band covers the rest. "0.75x" is cuBLAS's time over ours (< 1: slower).
BANDS: tuple[Band, ...] = (
    Band(
        "long-k",
        ("bare",),
        "cublas",
        k_min=2048,
        why=(
            "K >= 2048 loses: 6000x768x3072 0.75x cuBLAS (52.1 us against 39.3, issue 54);\n"
            "1500x512x2048 x1.004 (H200 at 7d8b06f) is a tie, so cuBLAS."
        ),
    ),
    Band(
        "few-rows",
        ("bare",),
        "cublas",
        m_max=1499,
        why=("no oasr-against-cuBLAS figure below 1500 rows (M = 1, 16, 500 unmeasured):\ncuBLAS, the safe default."),
    ),
    Band(
        "wide",
        ("bare",),
        "oasr",
        n_min=3072,
        picks=(gemm_config.MANY_WAVES,),
        why=(
            "many waves of a wide output: 12000x3072x768 1.14x cuBLAS (81.5 us against 93.1, issue 54);\n"
            "the one bare band measured clearly faster than cuBLAS."
        ),
    ),
    Band(
        "one-wave",
        ("bare",),
        "cublas",
        picks=(gemm_config.ONE_WAVE, gemm_config.SMALL_GRID),
        why=(
            "at most one wave: 8000x256x256 x0.942 (H200 at 7d8b06f), x1.079 (H200 at abcec41):\n"
            "a tie within cuBLAS's own spread, so cuBLAS."
        ),
    ),
    Band(
        "partial-wave",
        ("bare",),
        "cublas",
        picks=(gemm_config.PARTIAL_WAVE,),
        why=(
            "one wave of 128x192 tiles: 1500x2048x512 x0.973-1.046 (H200 at a93ff7a, abcec41),\n"
            "4000x768x768 0.98x (9.31 us against 9.17, issue 54): a tie at best, so cuBLAS."
        ),
    ),
    Band(
        "bare",
        ("bare",),
        "cublas",
        why=(
            "many waves, N < 3072: 6000x512x512 0.84x (8.96 us against 7.51, issue 54), 8000x1024x256 x0.999\n"
            "(H200 at 7d8b06f); unmeasured shapes (N <= 64 among them) also take cuBLAS."
        ),
    ),
    Band(
        "fused-long-k",
        ("lt", "fused"),
        "cublas",
        k_min=2049,
        why=(
            "K > 2048: 6000x768x3072 bias + SiLU fused 72.3 us, slower than torch's unfused F.silu(F.linear) at 51.7\n"
            "(issue 54); at K = 2048 fused still won (16000x256x2048 1.23x, reports/h200/tables/gemm.timing.csv)."
        ),
    ),
    Band(
        "fused-few-rows",
        ("lt", "fused"),
        "cublas",
        m_max=1499,
        why=(
            "no fused figure below 1500 rows (M = 1, 16, 500 unmeasured):\n"
            "cuBLAS and its epilogue (or oasr.bias_activation after it), the safe default."
        ),
    ),
    Band(
        "lt-epilogue",
        ("lt",),
        "cublas",
        why=(
            "cuBLASLt has this epilogue, so about cuBLAS's time: oasr's fused bias + SiLU beat bare cuBLAS on\n"
            "issue 17's (x1.047-1.170, H200 at eda59e9), lost on issue 54's (6000x512x512 10.6 us, bare 7.51)."
        ),
    ),
    Band(
        "fused",
        ("fused",),
        "oasr",
        why=(
            "cuBLAS has no SiLU or erf GELU epilogue: fused bias + SiLU 1.22-1.90x torch's unfused pair on 7 shapes\n"
            "of 1500-16000 rows (reports/h200/tables/gemm.timing.csv); 4000x768x768 9.43 us against 14.52 (issue 54)."
        ),
    ),
    Band(
        "glu-direct",
        ("glu",),
        "oasr",
        k_max=512,
        min_waves=3,
        why=(
            "the direct kernel's one launch: 16000x256x256 2.10-2.17x torch's F.glu(F.linear), 8000x512x512\n"
            "1.78-1.94x (reports/h200/tables/gemm_glu.timing.csv); x0.98-1.01 of cuBLAS over 2N (H200 at af93c77)."
        ),
    ),
    Band(
        "glu",
        ("glu",),
        "cublas",
        why=(
            "outside the direct kernel's measured grids (K <= 512, three waves or more) nothing was measured:\n"
            "cuBLAS then oasr.glu, the safe default."
        ),
    ),
    Band(
        "bmm-odd-n",
        ("bmm",),
        "oasr",
        odd_n=True,
        why=(
            "rows of N not a multiple of 8 (T' = 375): scores 64x375x375x64 12.65 us against torch.bmm's 30.0,\n"
            "2.37x (reports/h200/tables/bmm.timing.csv)."
        ),
    ),
    Band(
        "bmm",
        ("bmm",),
        "cublas",
        why=(
            "aligned rows: scores at T' = 200 and 400 0.78-0.93x torch.bmm, at 376 0.94x bf16 and 1.04x fp16\n"
            "(reports/h200/tables/bmm.timing.csv), context 0.79x (issue 54): cuBLAS."
        ),
    ),
)
"""The rule: the first band covering a problem decides."""


@dataclass(frozen=True)
class GemmPlan:
    """Which backend runs a problem, with which configuration, and why.

    Attributes
    ----------
    problem : Problem
    backend : {"oasr", "cublas"}
    config : GemmConfig
        The oasr configuration (what runs when ``backend`` is "oasr"; the candidate otherwise).
    band : str
        The band of :data:`BANDS` that decided, or ``"autotune"``.
    why : str
        The band's two lines, or the timings that decided.
    """

    problem: Problem
    backend: str
    config: GemmConfig
    band: str
    why: str

    @property
    def runs(self) -> str:
        """What the backend launches, in words."""
        p = self.problem
        if self.backend == "oasr":
            return f"oasr's {self.config.name} kernel"
        if p.kind == "bmm":
            return "cuBLAS (torch.bmm)"
        if p.kind == "glu":
            return "cuBLAS (torch.addmm) then oasr.glu"
        if p.kind == "bare":
            return "cuBLAS (torch.mm)"
        if p.kind == "lt":
            return (
                "cuBLASLt with its epilogue (torch.addmm)"
                if p.activation is None
                else ("cuBLASLt with its epilogue (torch._addmm_activation)")
            )
        return "cuBLAS (torch.mm) then oasr.bias_activation"

    @property
    def sentence(self) -> str:
        """One readable sentence: the op, the shape, the epilogue, what runs, the band and its why."""
        p = self.problem
        why = " ".join(self.why.split("\n"))
        return f"oasr.{p.op} {p.shape} ({p.epilogue}): {self.runs}, band {self.band!r}: {why}"

    def __str__(self) -> str:
        return self.sentence

    def with_backend(self, backend: str, band: str, why: str) -> GemmPlan:
        return replace(self, backend=backend, band=band, why=why)


def oasr_config(p: Problem, sms: int) -> GemmConfig:
    """The oasr configuration of ``p``: ``gemm_glu``'s direct kernel, else :func:`gemm_config.choose`'s."""
    if p.op == "gemm_glu":
        return gemm_config.DIRECT
    return gemm_config.choose(p.m, p.n, p.k, p.batch, fused=p.kind in ("lt", "fused"), sms=sms)


@functools.lru_cache(maxsize=4096)  # a model's few shapes, asked on every call
def rule(p: Problem, sms: int = gemm_config.H200_SMS) -> GemmPlan:
    """The plan :data:`BANDS` gives ``p`` on a GPU of ``sms`` SMs."""
    if p.op not in OPS:
        raise ValueError(f"gemm_plan: `op` must be one of {OPS}, got {p.op!r}")
    config = oasr_config(p, sms)
    band = next(b for b in BANDS if b.covers(p, config, sms))
    return GemmPlan(p, band.backend, config, band.name, band.why)


def candidates(plan: GemmPlan) -> dict[str, tuple[str, GemmConfig]]:
    """What the autotuner times for ``plan``'s problem, by name: (backend, configuration) of cuBLAS, of oasr's
    configuration of the rule, and for a bare product of K >= ``gemm_config.LONG_K_MIN`` of the long-K ones."""
    named = {"cublas": ("cublas", plan.config), "oasr": ("oasr", plan.config)}
    if plan.problem.kind == "bare" and plan.problem.k >= gemm_config.LONG_K_MIN:
        named.update({f"oasr:{c.name}": ("oasr", c) for c in gemm_config.LONG_K_PICKS if c != plan.config})
    return named
