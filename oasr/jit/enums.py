"""Names shared by Python and the C++ kernels: Python passes a name, C++ spells it as an enumerator.

A module built for one activation or schedule gets ``-D<MACRO>=<enumerator>`` (``silu`` is ``kSilu``,
``gelu_tanh`` ``kGeluTanh``, none ``kNone``), which the launcher reads as ``oasr::Activation::<MACRO>``:
the C++ enum is the one list, and a name it lacks fails to compile rather than selecting another kernel.
"""

from __future__ import annotations


def enumerator(name: str | None) -> str:
    """The C++ enumerator of ``name``: ``k`` and its words capitalised (None: ``kNone``)."""
    return "k" + "".join(word.capitalize() for word in (name or "none").split("_"))
