"""The library's kernel families: each one declared once, here.

A family is one JIT module (``csrc/<name>.cu`` with its launchers and
``csrc/<name>_jit_binding.cu`` with its exports, built against ``include/oasr/``)
and the public ops of ``oasr/<name>.py`` that call it. Everything that needs the
list of families iterates :data:`FAMILIES`: prebuilding (``python -m oasr.jit
build``), the package's ``__all__``, the workbench (the JIT module behind each
profiled op; each notebook's text is its page, ``profiling/workbench/pages.py``)
and the tests. The harness's list of ops (``profiling/harness/ops``) names the
family of each op with these objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import conv2d_config, cutlass, env, gemm_config
from .compilation_context import SM90A
from .core import JitSpec, Variant, gen_jit_spec

ALL_CAPABILITIES: tuple[int, ...] = (80, 86, 87, 89, 90, 100, 103, 110, 120)
"""Compute capabilities (major * 10 + minor) a portable CUDA-core kernel runs on."""


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
    prebuild : callable, optional
        For a family built per configuration: ``prebuild(tests)``, the variants ``python -m oasr.jit build`` builds
        beside the default module: every one the family's rule can pick, or (``tests``) those the GPU tests use.
    """

    name: str
    ops: tuple[str, ...]
    capabilities: tuple[int, ...] = ALL_CAPABILITIES
    extra_cuda_cflags: tuple[str, ...] = ()
    include_paths: Callable[[], Sequence[Path]] | None = field(default=None, compare=False)
    library_cflags: Callable[[], Sequence[str]] | None = field(default=None, compare=False)
    default_variant: Variant | None = None
    prebuild: Callable[[bool], Sequence[Variant]] | None = field(default=None, compare=False)

    @property
    def sources(self) -> list[Path]:
        """The default module's sources: ``csrc/<name>.cu`` (or its variant's launcher) and the bindings."""
        return self.sources_of(self.default_variant)

    def sources_of(self, variant: Variant | None) -> list[Path]:
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
        and flags build it apart (another checkout's sources, an edited copy of ``include/``)."""
        variant = variant or self.default_variant
        flags = [*self.extra_cuda_cflags, *(self.library_cflags() if self.library_cflags else ())]
        if variant is not None:
            flags += variant.cuda_cflags
        return gen_jit_spec(
            name or self.module_name(variant),
            self.sources_of(variant),
            extra_cuda_cflags=[*flags, *extra_cuda_cflags],
            extra_include_paths=list(self.include_paths()) if self.include_paths else None,
            include_dir=include_dir,
        )

    def module_name(self, variant: Variant | None = None) -> str:
        """``<family>`` or, for a variant, ``<family>_<variant>``: the name of its build and its folder in the cache."""
        return self.name if variant is None else f"{self.name}_{variant.name}"

    def module(self, variant: Variant | None = None) -> Any:
        """The loaded module of ``variant`` (else the default one), built on first use; later calls
        return the same object (unless :data:`STAND_INS` names the family)."""
        stand_in = STAND_INS.get(self.name)
        if stand_in is not None:
            return stand_in(variant)
        name = self.module_name(variant or self.default_variant)
        loaded = _LOADED.get(name)
        if loaded is None:
            loaded = _LOADED[name] = self.jit_spec(variant=variant).build_and_load()
        return loaded


_LOADED: dict[str, Any] = {}
"""Loaded modules by module name (a family's variants apart: a family without a default variant
loads its plain module under the family's own name)."""
STAND_INS: dict[str, Callable[[Variant | None], Any]] = {}
"""The hook :func:`profiling.compare.stand_in` sets (and nothing else): a family named here takes each module from
its callable, given the variant (None: the default), instead of building it."""


def forget_loaded_modules() -> None:
    """Load every family's module afresh on next use: a kernel edited since then is rebuilt."""
    _LOADED.clear()


SCALE = Family(
    name="scale",
    ops=("scale",),
)

ACTIVATION = Family(
    name="activation",
    ops=("glu", "swish", "bias_activation"),
)

NORM = Family(
    name="norm",
    ops=("layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"),
)

CONV1D = Family(
    name="conv1d",
    ops=("depthwise_conv1d", "depthwise_conv1d_step", "fold_batch_norm"),
)

CONV2D = Family(
    name="conv2d",
    ops=("conv2d", "conv2d_subsampling"),
    include_paths=cutlass.include_paths,
    library_cflags=cutlass.flags,
    prebuild=conv2d_config.implicit_gemm_variants,
)

GEMM = Family(
    name="gemm",
    ops=("gemm", "gemm_glu"),
    capabilities=(90,),
    extra_cuda_cflags=(SM90A,),
    include_paths=cutlass.include_paths,
    library_cflags=cutlass.flags,
    default_variant=gemm_config.gemm_variant("bfloat16", "plain", gemm_config.DEFAULT),
    prebuild=gemm_config.gemm_variants,
)

BMM = Family(
    name="bmm",
    ops=("bmm",),
    capabilities=(90,),
    extra_cuda_cflags=(SM90A,),
    include_paths=cutlass.include_paths,
    library_cflags=cutlass.flags,
    default_variant=gemm_config.bmm_variant("bfloat16", False, gemm_config.DEFAULT),
    prebuild=gemm_config.bmm_variants,
)

GROUP_GEMM = Family(
    name="group_gemm",
    ops=("group_gemm",),
    capabilities=(90,),
    extra_cuda_cflags=(SM90A,),
    include_paths=cutlass.include_paths,
    library_cflags=cutlass.flags,
    default_variant=gemm_config.group_gemm_variant("bfloat16", gemm_config.GROUP_DEFAULT),
    prebuild=gemm_config.group_gemm_variants,
)

ATTENTION = Family(
    name="attention",
    ops=("attention", "rel_pos_attention"),
    # mma.sync and cp.async (sm_80+); the D = 128 relative form takes 101 KB of shared memory per block,
    # more than compute capability 8.6, 8.9 and 12.x give one.
    capabilities=(80, 87, 90, 100, 103),
)

FAMILIES: tuple[Family, ...] = (SCALE, ACTIVATION, NORM, CONV1D, CONV2D, GEMM, BMM, GROUP_GEMM, ATTENTION)
"""Every family, in notebook order."""


def family_named(name: str) -> Family:
    """The family whose module is ``name`` (``"gemm"``); ValueError naming the families otherwise."""
    for family in FAMILIES:
        if family.name == name:
            return family
    raise ValueError(f"no family is named {name!r}; the families are: {', '.join(f.name for f in FAMILIES)}")


def family_of(op: str) -> Family:
    """The family whose public ops include ``op``; ValueError naming the known ops otherwise."""
    for family in FAMILIES:
        if op in family.ops:
            return family
    known = ", ".join(o for f in FAMILIES for o in f.ops)
    raise ValueError(f"no family has an op {op!r}; the ops are: {known}")
