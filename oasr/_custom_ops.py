"""torch.compile support: every public op is also a torch custom op, ``torch.ops.oasr.<op>``.

A public op calls its custom op only while ``torch.compile`` (or ``torch.export``) traces it,
i.e. when ``torch.compiler.is_compiling()`` is true: the graph then holds one node per call
and no break. Eager calls never go through the dispatcher, which would cost microseconds.

Each custom op mirrors its CUDA launcher: it writes into ``out`` (and ``residual_out``),
declared mutated in its schema, and returns nothing, so its fake implementation has nothing
to compute. Its real implementation is the eager op, argument checks included, so a compiled
graph raises the same errors as eager code, when it runs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def define(name: str, schema: str, mutates: tuple[str, ...], impl: Callable[..., None]) -> torch._ops.OpOverload:
    """Register ``torch.ops.oasr.<name>`` with ``schema`` (``mutates`` are its ``Tensor(a!)`` arguments)."""
    op = torch.library.custom_op(f"oasr::{name}", impl, mutates_args=mutates, schema=schema)
    op.register_fake(_writes_only)
    return getattr(torch.ops.oasr, name).default


def _writes_only(*args: object) -> None:
    """The fake implementation of every op: it only writes into tensors it was given."""
    return None
