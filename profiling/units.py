"""Numbers with unit prefixes, for every label and table the workbench shows.

Decimal prefixes (k, M, G, T, P) for rates and clocks, binary ones (KiB .. TiB) for sizes;
each caller chooses how the number itself is written.
"""

from __future__ import annotations

import math
from collections.abc import Callable

_DECIMAL = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def decimal(value: float, unit: str, spec: str, missing: str = "nan") -> str:
    """``value`` with the largest decimal prefix it reaches, the number formatted by ``spec``.

    ``decimal(4.2374e12, "B/s", ".2f")`` -> ``"4.24 TB/s"``; a non-finite value reads ``"<missing> <unit>"``.
    """
    if not math.isfinite(value):
        return f"{missing} {unit}"
    for factor, prefix in _DECIMAL:
        if abs(value) >= factor:
            return f"{value / factor:{spec}} {prefix}{unit}"
    return f"{value:{spec}} {unit}"


def binary(nbytes: float, number: Callable[[float], str], small: Callable[[float], str]) -> str:
    """``nbytes`` with the largest binary prefix it reaches (``number`` writes it), else ``small`` bytes + ``B``."""
    for factor, unit in _BINARY:
        if abs(nbytes) >= factor:
            return f"{number(nbytes / factor)} {unit}"
    return f"{small(nbytes)} B"


def format_rate(value: float, unit: str) -> str:
    """A rate with a decimal prefix and two decimals, ``4237396824699.9`` -> ``"4.24 TB/s"``.

    Every ceiling label (plots) and the workbench's ceilings table round through here, so one value reads the
    same everywhere.
    """
    return decimal(value, unit, ".2f", missing="?")
