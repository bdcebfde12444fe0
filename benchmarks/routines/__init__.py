"""The routine registry: one module per kernel family, loaded by name.

A routine module provides the contract in :data:`CONTRACT`; routines over
registry ops get it from :class:`benchmarks.routines.registry_routine.RegistryRoutine`:

``SUBROUTINES``
    Names accepted by ``--subroutine`` (the first is the default).
``parse_args(parser)``
    Adds the routine's own flags (e.g. ``--size``) to an ``argparse`` parser.
``run_test(args, output)``
    Runs one CLI invocation, writing results to an ``OutputWriter``.
``get_default_configs()``
    ``{subroutine: [config, ...]}``, the sweep run when no size is given (for
    fp16; a routine may take a ``dtype`` argument when a case depends on it).
``run_standalone(variant)``
    Entry of the ``bench_<variant>.py`` thin wrapper.
"""

from __future__ import annotations

import importlib
from types import ModuleType

ROUTINE_REGISTRY: dict[str, str] = {
    "activation": "benchmarks.routines.activation",
    "norm": "benchmarks.routines.norm",
    "scale": "benchmarks.routines.scale",
}

CONTRACT: tuple[str, ...] = ("SUBROUTINES", "parse_args", "run_test", "get_default_configs", "run_standalone")


def load_routine(name: str) -> ModuleType:
    """Import a registered routine module, checking that it provides :data:`CONTRACT`.

    Raises
    ------
    ValueError
        ``name`` is not registered.
    TypeError
        The module lacks part of the contract.
    """
    if name not in ROUTINE_REGISTRY:
        raise ValueError(f"unknown routine {name!r}; known routines: {', '.join(sorted(ROUTINE_REGISTRY))}")
    module = importlib.import_module(ROUTINE_REGISTRY[name])
    missing = [attr for attr in CONTRACT if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"routine module {module.__name__} lacks {', '.join(missing)}")
    return module
