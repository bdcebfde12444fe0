"""Scale family benchmark routine: ``x * factor``, oasr's kernel (``cuda``) against ``torch.mul`` (``torch``).

``--size N [N ...]`` are element counts; the defaults are the registry's sweep,
4 KiB .. 1 GiB of fp16 input (:data:`profiling.ops.SCALE`). The logic is
:class:`~benchmarks.routines.registry_routine.RegistryRoutine`.
"""

from __future__ import annotations

from benchmarks.routines.registry_routine import SIZE_FLAG, RegistryRoutine

ROUTINE = RegistryRoutine("scale", ("scale",), SIZE_FLAG)
SUBROUTINES, parse_args, run_test, get_default_configs, run_standalone = ROUTINE.contract()
