"""Built-in regions for :func:`profiling.nsight.region.profile_region`: one Conformer layer, of oasr ops or in torch.

A region is a call that ncu profiles whole; it has to be importable by reference, because ncu starts the process
that runs it. Each built-in is :func:`conformer_layer` bound to one implementation (a ``functools.partial``, which
pickles by reference): the first call builds the layer and its input (random weights, seeded) and caches them, so
the worker's warm-up call pays for that and the profiled call runs the layer's forward alone.

The layer is ``ConformerEncoder``'s (``oasr/models/encoder.py``) and its torch reference's
(``oasr/models/reference.py``) with one layer, built from one seeded state dict: pre-LN macaron, relative-position
attention of ESPnet's "latest" form, ``heads = d / 64``, ``ff = 4 d``, no padding. The input is the front end's
output for ``4 T' + 3`` frames, so the layer sees ``[B, T', d]`` and its ``2 T' - 1`` position embeddings.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from oasr.models import ConformerConfig, ConformerEncoder, ReferenceConformerEncoder, random_state_dict

IMPLEMENTATIONS = ("oasr", "torch")
CONFORMER_SHAPE: dict[str, int] = {"d": 256, "b": 64, "t": 250, "k": 15}
"""The default layer: d 256, batch 64, 250 frames after subsampling, 15 taps (the first row of
``shared/notes/wave3-anchors.md``'s layer table)."""
DTYPE = torch.bfloat16
"""The layers' dtype (their recordings' entries name it ``"bfloat16"``)."""


@dataclass(frozen=True)
class BuiltinRegion:
    """A built-in region: its name (the NVTX range and the recordings' folder), implementation and description."""

    name: str
    impl: str
    description: str


REGIONS: dict[str, BuiltinRegion] = {
    f"conformer_layer_{impl}": BuiltinRegion(
        f"conformer_layer_{impl}", impl, f"one Conformer layer ({'oasr ops' if impl == 'oasr' else 'torch eager'})"
    )
    for impl in IMPLEMENTATIONS
}


def region_call(name: str, shape: dict[str, int] | None = None) -> functools.partial[None]:
    """The built-in region ``name`` at ``shape`` (default :data:`CONFORMER_SHAPE`) as an importable call.

    Raises
    ------
    ValueError
        ``name`` is not a built-in region, or ``shape`` has fields other than ``d``, ``b``, ``t``, ``k``.
    """
    if name not in REGIONS:
        raise ValueError(f"unknown built-in region {name!r}; the built-in regions are {', '.join(REGIONS)}")
    unknown = sorted(set(shape or {}) - set(CONFORMER_SHAPE))
    if unknown:
        raise ValueError(f"`shape` has fields {unknown}; a Conformer layer's are {', '.join(CONFORMER_SHAPE)}")
    return functools.partial(conformer_layer, REGIONS[name].impl, **{**CONFORMER_SHAPE, **(shape or {})})


def region_shape(name: str, shape: dict[str, int] | None = None) -> dict[str, int]:
    """The full shape the built-in ``name`` runs at (its recordings' config)."""
    return dict(region_call(name, shape).keywords)


def conformer_layer(impl: str, d: int, b: int, t: int, k: int) -> None:
    """Run one Conformer layer forward (the first call also builds it; see the module docstring).

    Parameters
    ----------
    impl : {"oasr", "torch"}
        The layer of oasr ops or the torch reference.
    d, b, t, k : int
        Model width (a multiple of 64), batch, frames after subsampling, depthwise taps (odd).
    """
    _layer(impl, d, b, t, k)()


@functools.cache
def _layer(impl: str, d: int, b: int, t: int, k: int, device: str = "cuda") -> Callable[[], None]:
    """The layer's forward on its cached input (``device`` is the GPU; the tests build the torch one on the CPU)."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"`impl` must be one of {IMPLEMENTATIONS}, got {impl!r}")
    config = ConformerConfig(d_model=d, heads=max(d // 64, 1), ff_dim=4 * d, layers=1, kernel_size=k)
    encoder = (ConformerEncoder if impl == "oasr" else ReferenceConformerEncoder)(config)
    encoder.load_state_dict(random_state_dict(config, seed=0))
    encoder = encoder.to(device, DTYPE)
    generator = torch.Generator(device=device).manual_seed(0)
    feats = torch.randn(b, 4 * t + 3, config.input_dim, device=device, generator=generator, dtype=DTYPE)
    layer = encoder.encoders[0]
    with torch.inference_mode():
        x, pos_emb = encoder.embed(feats)
    if impl == "oasr":
        context = encoder.context(t, pos_emb, None)

        def run() -> None:
            with torch.inference_mode():
                layer(x, context)
    else:

        def run() -> None:
            with torch.inference_mode():
                layer(x, pos_emb, None, None)

    return run
