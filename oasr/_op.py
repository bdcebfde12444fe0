"""One way to declare a public op: its signature and docstring, its check and its launcher.

::

    @op(check=_check_scale, launch=_launch_scale, layout=LIKE_INPUT)
    def scale(input: Tensor, factor: float, out: Tensor | None = None) -> Tensor:
        \"\"\"The docstring: shapes, dtypes, returns, raises.\"\"\"

From these the decorator derives everything else:

- the eager op: ``check(*arguments)`` (every argument in signature order, the outputs included) raises
  before any launch and returns the shape of ``out``; ``out`` is allocated from it when not given, in the
  op's ``layout`` and its first tensor's dtype and device; then ``launch(*outputs, *inputs)`` (outputs
  first, then the other arguments in signature order, as the C++ launchers take them);
- two torch custom ops, their schemas read from the annotations: ``torch.ops.oasr.<name>`` allocates ``out``
  and returns it, ``torch.ops.oasr.<name>_out`` writes a given one (the outputs first and mutated, as the
  launchers take them). Their real implementations are the eager op, checks included, so a compiled graph
  raises the eager errors when it runs; the allocating one's fake implementation derives ``out`` from the same
  check and allocation (the memory and device steps of ``oasr/_checks.py`` wait for the real run);
- the ``torch.compile`` path: one custom-op node per call.

Eager calls never go through the dispatcher, which would cost microseconds; the op and its custom op are
generated as plain functions with the declared signature, so a call binds no arguments by hand.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence

import torch
from torch import Tensor
from torch.compiler import is_compiling

from ._tma import padded_empty
from .api_logging import oasr_api

LIKE_INPUT = "like_input"
"""``out`` has the first tensor's shape: ``torch.empty_like`` of it, contiguous (cheaper than the general case)."""
CONTIGUOUS = "contiguous"
"""``out`` is a contiguous tensor of the shape the check returns."""
PADDED_ROWS = "padded_rows"
"""``out``'s rows are padded to 16 bytes (what TMA addresses), a strided view of the shape the check returns."""
LAYOUTS = (LIKE_INPUT, CONTIGUOUS, PADDED_ROWS)

_SCHEMA_TYPES: dict[object, str] = {
    Tensor: "Tensor",
    Tensor | None: "Tensor?",
    float: "float",
    float | None: "float?",
    int: "int",
    int | None: "int?",
    bool: "bool",
    str: "str",
    str | None: "str?",
    int | tuple[int, int]: "SymInt[2]",  # a single int is passed as the pair it means
}
"""The annotations a public op may use, and their custom-op schema types."""


def _allocate(layout: str, shape: Sequence[int] | None, like: Tensor) -> Tensor:
    """``out`` of ``layout`` and ``shape`` (None: the check refused the fake arguments torch.compile traces with, so an
    empty stand-in; the graph's run refuses them with the check's error)."""
    if shape is None:
        return torch.empty(0, dtype=like.dtype, device=like.device) if isinstance(like, Tensor) else torch.empty(0)
    if layout == LIKE_INPUT:
        return torch.empty_like(like, memory_format=torch.contiguous_format)
    if layout == CONTIGUOUS:
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    return padded_empty(tuple(shape), like.dtype, like.device)


def _aliases(outputs: tuple[str, ...], mutates: tuple[str, ...], order: tuple[str, ...]) -> list[str | None]:
    """Each argument's alias letter in a schema (``Tensor(a!)``): the written ones get one, in order."""
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    return [next(letters) if n in outputs or n in mutates else None for n in order]


def _writes_only(*args: object) -> None:
    """The fake implementation of every op: it only writes into tensors it was given."""
    return None


def op(
    *,
    check: Callable[..., Sequence[int]],
    launch: Callable[..., None],
    layout: str = CONTIGUOUS,
    outputs: tuple[str, ...] = ("out",),
    mutates: tuple[str, ...] = (),
) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """Declare the public op whose signature and docstring the decorated function gives (its body is unused).

    Parameters
    ----------
    check : callable
        ``check(*arguments)``, in signature order: raises TypeError/ValueError naming the argument, and
        returns the shape of ``out`` (the first of ``outputs``).
    launch : callable
        ``launch(*outputs, *inputs)``: runs the kernels into the outputs; returns nothing.
    layout : {LIKE_INPUT, CONTIGUOUS, PADDED_ROWS}
        How ``out`` is allocated when not given; its dtype and device are the first argument's.
    outputs : tuple of str
        The written arguments, ``out`` first (allocated and returned); the others (``residual_out``) stay
        None when not given. Each must default to None.
    mutates : tuple of str
        Inputs also written in place (a streaming state).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")

    def declare(signature_of: Callable[..., Tensor]) -> Callable[..., Tensor]:
        name = signature_of.__name__
        signature = inspect.signature(signature_of)
        hints = typing.get_type_hints(signature_of)
        names = list(signature.parameters)
        missing = [n for n in (*outputs, *mutates) if n not in names]
        if missing or any(signature.parameters[n].default is not None for n in outputs):
            raise TypeError(f"oasr.{name}: outputs {outputs} must be parameters defaulting to None ({missing} are not)")
        inputs = [n for n in names if n not in outputs]
        fields = {}
        for n, alias in zip((*outputs, *inputs), _aliases(outputs, mutates, (*outputs, *inputs)), strict=True):
            schema_type = _SCHEMA_TYPES.get(hints[n])
            if schema_type is None:
                raise TypeError(f"oasr.{name}: `{n}` has annotation {hints[n]}, which no custom-op schema type matches")
            fields[n] = schema_type.replace("Tensor", f"Tensor({alias}!)") if alias else schema_type
        out, first = outputs[0], names[0]
        rest = [*outputs[1:], *inputs]
        writes = (*outputs, *mutates)
        schema_out = f"({fields[out].removesuffix('?')} {out}, {', '.join(f'{fields[n]} {n}' for n in rest)}) -> ()"
        schema_new = f"({', '.join(f'{fields[n]} {n}' for n in rest)}) -> Tensor"

        ordered, rest_list, arguments = ", ".join((out, *rest)), ", ".join(rest), ", ".join(names)
        scope = {
            "check": check,
            "launch": launch,
            "allocate": _allocate,
            "layout": layout,
            "is_compiling": is_compiling,
        }
        # The custom ops' implementations: `<name>_out` writes a given `out`, `<name>` allocates it, and so does its
        # fake implementation, from the same check and allocation (both paths lay `out` out alike).
        exec(
            f"def write({ordered}):\n"
            f"    check({arguments})\n"
            f"    launch({ordered})\n"
            f"def allocate_and_write({rest_list}):\n"
            f"    {out} = None\n"
            f"    {out} = allocate(layout, check({arguments}), {first})\n"
            f"    launch({ordered})\n"
            f"    return {out}\n"
            f"def fake_allocation({rest_list}):\n"
            f"    {out} = None\n"
            f"    try:\n"
            f"        shape = check({arguments})\n"
            f"    except (TypeError, ValueError):\n"
            f"        shape = None\n"
            f"    return allocate(layout, shape, {first})\n",
            scope,
        )
        written = torch.library.custom_op(f"oasr::{name}_out", scope["write"], mutates_args=writes, schema=schema_out)
        written.register_fake(_writes_only)
        allocating = torch.library.custom_op(
            f"oasr::{name}", scope["allocate_and_write"], mutates_args=writes[1:], schema=schema_new
        )
        allocating.register_fake(scope["fake_allocation"])
        scope["custom_out"], scope["custom"] = written, allocating

        parameters = _parameters_source(signature)
        scope.update({f"default_{n}": p.default for n, p in signature.parameters.items()})
        pairs = "".join(
            f"        {n} = {n} if isinstance({n}, (tuple, list)) else ({n}, {n})\n"
            for n in inputs
            if hints[n] == int | tuple[int, int]
        )
        exec(
            f"def {name}({parameters}):\n"
            f"    if is_compiling():\n"
            f"{pairs}"
            f"        if {out} is None:\n"
            f"            return custom({rest_list})\n"
            f"        custom_out({ordered})\n"
            f"        return {out}\n"
            f"    shape = check({arguments})\n"
            f"    if {out} is None:\n"
            f"        {out} = allocate(layout, shape, {first})\n"
            f"    launch({ordered})\n"
            f"    return {out}\n",
            scope,
        )
        public = scope[name]
        public.__doc__ = signature_of.__doc__
        public.__module__ = signature_of.__module__
        public.__qualname__ = signature_of.__qualname__
        public.__signature__ = signature
        public.__annotations__ = signature_of.__annotations__
        public.custom_ops = (scope["custom"], scope["custom_out"])
        return oasr_api(public)

    return declare


def _parameters_source(signature: inspect.Signature) -> str:
    """The parameter list of ``signature`` as a ``def`` spells it, each default read from ``default_<name>``."""
    parts = []
    for p in signature.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"`{p.name}`: an op takes plain or keyword-only parameters, not {p.kind.description}")
        if p.kind is p.KEYWORD_ONLY and "*" not in parts:
            parts.append("*")
        parts.append(p.name if p.default is p.empty else f"{p.name}=default_{p.name}")
    return ", ".join(parts)


__all__ = ["CONTIGUOUS", "LAYOUTS", "LIKE_INPUT", "PADDED_ROWS", "op"]
