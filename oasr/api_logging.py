"""Debug logging for the public Oasr API.

Decorate public functions with :func:`oasr_api`. What gets logged is chosen by
two environment variables, read when this module is imported (call
:func:`_reload_config` to read them again):

``OASR_LOGLEVEL`` (int, default ``0``)
    * ``0``: off. :func:`oasr_api` returns the function unchanged, so there
      is no overhead at all.
    * ``>= 1``: the name of each call, e.g. ``[oasr] oasr.scale`` (functions
      of the ``oasr`` package are named as exported at its top level; others
      ``<module>.<qualname>``).
    * ``>= 3``: also every argument (tensors: shape, dtype, stride, device,
      storage offset, contiguity; other values: ``repr``) and the result.
    * ``>= 5``: also, for floating-point tensors, min/max/mean over the finite
      elements and the NaN/Inf counts. **This synchronizes the GPU** (the
      statistics are copied to the host) and launches extra kernels, so it
      changes timings and must not be used under CUDA graph capture.

``OASR_LOGDEST`` (default ``"stderr"``)
    ``"stdout"``, ``"stderr"`` or a file path (appended to).

``OASR_NVTX`` (default unset)
    ``1``: each call runs inside an NVTX push/pop range of domain ``oasr`` named as in the log (``oasr.gemm``),
    so that a profiler attributes every kernel to the op that launched it. The region profiler
    (``profiling/nsight/region.py``) sets it in the process it profiles; unset, nothing is wrapped.

The level and destination are bound when a function is decorated, i.e. when
the module that defines it is imported.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from torch.compiler import is_compiling

__all__ = ["describe_tensor", "describe_value", "oasr_api"]

F = TypeVar("F", bound=Callable[..., Any])

_PREFIX = "[oasr]"
_MAX_REPR = 200

_LOGLEVEL: int = 0
_LOGDEST: str = "stderr"
_NVTX: bool = False
NVTX_DOMAIN = "oasr"


def _reload_config() -> tuple[int, str]:
    """Read ``OASR_LOGLEVEL`` / ``OASR_LOGDEST`` from the environment again.

    Only functions decorated after this call see the new values.

    Returns
    -------
    tuple[int, str]
        The new ``(level, destination)``.

    Raises
    ------
    ValueError
        If ``OASR_LOGLEVEL`` is not an integer.
    """
    global _LOGLEVEL, _LOGDEST, _NVTX
    _NVTX = os.environ.get("OASR_NVTX", "").strip() not in ("", "0")
    raw = os.environ.get("OASR_LOGLEVEL", "0").strip() or "0"
    try:
        level = int(raw)
    except ValueError:
        raise ValueError(f"OASR_LOGLEVEL must be an integer, got {raw!r}") from None
    _LOGLEVEL = level
    _LOGDEST = os.environ.get("OASR_LOGDEST", "stderr").strip() or "stderr"
    return _LOGLEVEL, _LOGDEST


_reload_config()


def _write(dest: str, lines: list[str]) -> None:
    """Write log lines to ``"stdout"``, ``"stderr"`` or an appended file."""
    text = "".join(f"{_PREFIX} {line}\n" for line in lines)
    if dest == "stdout":
        sys.stdout.write(text)
        sys.stdout.flush()
    elif dest == "stderr":
        sys.stderr.write(text)
        sys.stderr.flush()
    else:
        with open(dest, "a", encoding="utf-8") as f:
            f.write(text)


def describe_tensor(t: Any, level: int) -> str:
    """Describe a tensor in one line.

    Parameters
    ----------
    t : torch.Tensor
        The tensor to describe (any device).
    level : int
        Detail level. ``>= 5`` adds, for floating-point tensors, min/max/mean
        over the finite elements (omitted when there are none) and the NaN
        and Inf counts. Those statistics synchronize the GPU.

    Returns
    -------
    str
        E.g. ``Tensor(shape=(2, 3), dtype=torch.float16, stride=(3, 1),
        device=cuda:0, storage_offset=0, contiguous=True)``.
    """
    import torch

    fields = [
        f"shape={tuple(t.shape)}",
        f"dtype={t.dtype}",
        f"stride={tuple(t.stride())}",
        f"device={t.device}",
        f"storage_offset={t.storage_offset()}",
        f"contiguous={t.is_contiguous()}",
    ]
    if level >= 5 and t.is_floating_point() and t.device.type != "meta":
        with torch.no_grad():
            x = t.detach()
            finite = torch.isfinite(x)
            nan = int(torch.isnan(x).sum().item())
            inf = int(torch.isinf(x).sum().item())
            n_finite = int(finite.sum().item())
            if n_finite > 0:
                vals = x[finite].double()
                fields += [
                    f"min={vals.min().item()!r}",
                    f"max={vals.max().item()!r}",
                    f"mean={vals.mean().item()!r}",
                ]
            fields += [f"nan={nan}", f"inf={inf}"]
    return "Tensor(" + ", ".join(fields) + ")"


def describe_value(v: Any, level: int) -> str:
    """Describe an argument or result: tensors via :func:`describe_tensor`,
    lists/tuples element-wise, anything else by a (truncated) ``repr``."""
    import torch

    if isinstance(v, torch.Tensor):
        return describe_tensor(v, level)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(describe_value(e, level) for e in v)
        if isinstance(v, tuple):
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return f"[{inner}]"
    r = repr(v)
    return r if len(r) <= _MAX_REPR else r[: _MAX_REPR - 3] + "..."


def _named_args(sig: inspect.Signature | None, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """Pair call arguments with parameter names (defaults applied).

    Falls back to ``arg0, arg1, ...`` when the signature is unknown or the
    call does not match it (the function itself will then raise).
    """
    if sig is not None:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            pass
        else:
            bound.apply_defaults()
            return list(bound.arguments.items())
    return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())


def _api_name(fn: Callable[..., Any]) -> str:
    """Name used in the log: ``oasr.<qualname>`` for functions of the ``oasr``
    package (the public name, e.g. ``oasr.scale`` for ``oasr/scale.py``'s
    ``scale``), ``<module>.<qualname>`` otherwise."""
    module = getattr(fn, "__module__", None) or "?"
    if module.split(".")[0] == "oasr":
        module = "oasr"
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


def oasr_api(fn: F) -> F:
    """Decorator adding debug logging to a public API function.

    With ``OASR_LOGLEVEL=0`` (the default) this returns ``fn`` itself, so
    undecorated and decorated functions cost the same. Otherwise each call
    logs the name (level >= 1; ``oasr.<qualname>`` for Oasr's own functions),
    the arguments with defaults applied and the result (level >= 3), and
    tensor statistics (level >= 5; this synchronizes the GPU). Arguments are logged before the call, so they are
    visible even if the call fails. Calls traced by ``torch.compile`` are not logged.

    Parameters
    ----------
    fn : callable
        The function to wrap.

    Returns
    -------
    callable
        ``fn`` at level 0, else a ``functools.wraps`` wrapper.
    """
    level, dest = _LOGLEVEL, _LOGDEST
    if _NVTX:
        fn = _nvtx_marked(fn, _api_name(fn))
    if level <= 0:
        return fn

    name = _api_name(fn)
    try:
        sig: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if is_compiling():  # torch.compile traces the op, not its logging (which would break the graph)
            return fn(*args, **kwargs)
        lines = [name]
        if level >= 3:
            lines += [f"  {k}: {describe_value(v, level)}" for k, v in _named_args(sig, args, kwargs)]
        _write(dest, lines)
        result = fn(*args, **kwargs)
        if level >= 3:
            _write(dest, [f"  -> {describe_value(result, level)}"])
        return result

    return wrapper  # type: ignore[return-value]


def _nvtx_marked(fn: F, name: str) -> F:
    """``fn`` inside an NVTX range ``name`` of domain :data:`NVTX_DOMAIN` (``OASR_NVTX=1``)."""
    try:
        import nvtx
    except ImportError:
        raise ImportError(
            "OASR_NVTX=1 marks every oasr call with an NVTX range, which needs the `nvtx` package: "
            "pip install 'nvtx>=0.2.10', or unset OASR_NVTX"
        ) from None

    @functools.wraps(fn)
    def marked(*args: Any, **kwargs: Any) -> Any:
        if is_compiling():  # a range is a host-side call: torch.compile traces the op alone
            return fn(*args, **kwargs)
        with nvtx.annotate(name, domain=NVTX_DOMAIN):
            return fn(*args, **kwargs)

    return marked  # type: ignore[return-value]
