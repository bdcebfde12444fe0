"""Backend and compute-capability requirements for Oasr APIs.

* :func:`supported_compute_capability` tags a check function with the CUDA
  compute capabilities (``major * 10 + minor``, e.g. 90 for SM 9.0) it
  supports.
* :func:`backend_requirement` validates a call (backend name, device compute
  capability, problem size) before running the decorated function, and can
  pick a backend when called with ``backend="auto"``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch

__all__ = [
    "backend_requirement",
    "get_compute_capability",
    "is_sm90a_supported",
    "is_sm100a_supported",
    "supported_compute_capability",
]

F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------
# Device queries
# ---------------------------------------------------------------------------


def get_compute_capability(device: torch.device | str | int) -> tuple[int, int]:
    """Return the ``(major, minor)`` compute capability of a CUDA device.

    Parameters
    ----------
    device : torch.device, str or int
        A CUDA device (``"cuda"``, ``"cuda:1"``, ``1``, ...).

    Returns
    -------
    tuple[int, int]
        E.g. ``(9, 0)`` for H100/H200.

    Raises
    ------
    ValueError
        If ``device`` is not a CUDA device.
    """
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"compute capability needs a CUDA device, got {dev}")
    return torch.cuda.get_device_capability(dev)


def _cuda_version_at_least(major: int, minor: int) -> bool:
    """Whether the CUDA toolkit torch was built with is >= ``major.minor``."""
    version = torch.version.cuda
    if not version:
        return False
    parts = version.split(".")
    return (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0) >= (major, minor)


def _is_arch_supported(device: Any, arch_major: int, cuda: tuple[int, int]) -> bool:
    try:
        major, _ = get_compute_capability(device)
    except (ValueError, RuntimeError, AssertionError):
        # Not a CUDA device, or CUDA unavailable (CPU build raises AssertionError).
        return False
    return major == arch_major and _cuda_version_at_least(*cuda)


def is_sm90a_supported(device: torch.device | str | int) -> bool:
    """Whether ``device`` can run ``sm_90a`` kernels (Hopper, CUDA >= 12.3).

    Returns ``False`` for non-CUDA devices or when CUDA is unavailable.
    """
    return _is_arch_supported(device, 9, (12, 3))


def is_sm100a_supported(device: torch.device | str | int) -> bool:
    """Whether ``device`` can run ``sm_100a`` kernels (Blackwell, CUDA >= 12.8).

    Returns ``False`` for non-CUDA devices or when CUDA is unavailable.
    """
    return _is_arch_supported(device, 10, (12, 8))


# ---------------------------------------------------------------------------
# @supported_compute_capability
# ---------------------------------------------------------------------------


def supported_compute_capability(ccs: Iterable[int]) -> Callable[[F], F]:
    """Tag a check function with the compute capabilities it supports.

    Parameters
    ----------
    ccs : iterable of int
        Supported capabilities as ``major * 10 + minor`` (80, 86, 89, 90, ...).

    Returns
    -------
    callable
        A decorator that sets ``fn._supported_ccs`` (a ``frozenset``) and
        ``fn.is_compute_capability_supported(cc)`` and returns ``fn``.

    Raises
    ------
    TypeError
        If an entry is not an ``int`` (``bool`` is rejected too).

    Examples
    --------
    >>> @supported_compute_capability([80, 90])
    ... def _check(x):
    ...     return True
    >>> _check.is_compute_capability_supported(90), _check.is_compute_capability_supported(75)
    (True, False)
    """
    ccs = list(ccs)
    for cc in ccs:
        if isinstance(cc, bool) or not isinstance(cc, int):
            raise TypeError(f"compute capabilities must be ints like 90, got {cc!r}")
    supported = frozenset(ccs)

    def decorator(fn: F) -> F:
        fn._supported_ccs = supported  # type: ignore[attr-defined]
        fn.is_compute_capability_supported = lambda cc: cc in supported  # type: ignore[attr-defined]
        return fn

    return decorator


def _supports_cc(check: Callable | None, cc: int | None) -> bool:
    """A check without ``_supported_ccs`` (or an unknown cc) means no restriction."""
    if cc is None or check is None:
        return True
    ccs = getattr(check, "_supported_ccs", None)
    return ccs is None or cc in ccs


def _allowed_ccs(checks: Iterable[Callable | None]) -> frozenset[int] | None:
    """Capabilities accepted by all ``checks`` (``None``: no restriction)."""
    allowed: frozenset[int] | None = None
    for check in checks:
        ccs = getattr(check, "_supported_ccs", None)
        if ccs is not None:
            allowed = ccs if allowed is None else allowed & ccs
    return allowed


def _cc_error(name: str, cc: int | None, allowed: Iterable[int]) -> RuntimeError:
    listed = ", ".join(f"SM{c}" for c in sorted(allowed)) or "none"
    return RuntimeError(f"{name} does not support this GPU (compute capability SM{cc}); supported: {listed}")


def _find_compute_capability(args: Iterable[Any]) -> int | None:
    """Compute capability (``major * 10 + minor``) of the first tensor in
    ``args``, or ``None`` if that tensor is not on CUDA or there is none."""
    for value in args:
        if isinstance(value, torch.Tensor):
            if value.device.type != "cuda":
                return None
            major, minor = get_compute_capability(value.device)
            return major * 10 + minor
    return None


def _run_check(check: Callable, name: str, args: tuple, kwargs: dict) -> None:
    """Run a check; a ``False`` return becomes a ``ValueError``."""
    if not check(*args, **kwargs):
        raise ValueError(f"{name}: inputs rejected by {check.__name__}")


# ---------------------------------------------------------------------------
# @backend_requirement
# ---------------------------------------------------------------------------


def backend_requirement(
    backend_checks: dict[str, Callable[..., bool]],
    common_check: Callable[..., bool] | None = None,
    heuristic_func: Callable[..., list[str]] | None = None,
) -> Callable[[F], F]:
    """Validate backend, compute capability and problem size before a call.

    Three patterns:

    1. Single implementation: ``backend_checks={}`` and a ``common_check``
       (tag it with :func:`supported_compute_capability`).
    2. Several backends: ``backend_checks={"name": check, ...}``; the decorated
       function must take a ``backend`` parameter.
    3. Automatic choice: as 2 plus ``heuristic_func``; calling with
       ``backend="auto"`` keeps the backends whose compute capability and
       check pass, orders them with
       ``heuristic_func(suitable_backends, *args, **kwargs)``, stores the result
       in ``fn.suitable_auto_backends`` and then calls the function (which
       typically runs ``fn.suitable_auto_backends[0]``).

    Checks take the same arguments as the decorated function (defaults
    applied, so ``backend`` is always passed to them), return ``True`` when
    the inputs are supported and raise ``ValueError`` (or return ``False``)
    otherwise. The compute capability is taken from the first
    ``torch.Tensor`` argument; if it is not on CUDA the capability check is
    skipped (the function's own checks reject such inputs). A check without
    ``@supported_compute_capability`` accepts every capability.

    Parameters
    ----------
    backend_checks : dict[str, callable]
        Backend name -> check. Empty for a single implementation.
    common_check : callable, optional
        Check run for every backend (before the backend's own check).
    heuristic_func : callable, optional
        Orders suitable backends for ``backend="auto"``.

    Returns
    -------
    callable
        A decorator. The wrapped function accepts an extra keyword
        ``skip_check=False`` (``True`` skips all validation; with
        ``backend="auto"`` the heuristic is still applied, to all backends)
        and has the methods ``is_backend_supported(backend, cc=None)``,
        ``is_compute_capability_supported(cc)``, ``has_backend(backend)``,
        ``has_backend_choices()``, and the attribute
        ``suitable_auto_backends``: a list, empty until an "auto" call and
        updated in place by each one (so it is only meaningful inside that
        call; not thread-safe).

    Raises
    ------
    TypeError
        At decoration: no check at all, or backend checks but no ``backend``
        parameter.
    ValueError
        At call: unknown backend (the message lists the valid ones), inputs
        rejected by a check, or no backend suitable for ``backend="auto"``.
    RuntimeError
        At call: the GPU's compute capability is not supported.
    """
    backend_checks = dict(backend_checks)

    def decorator(fn: F) -> F:
        name = fn.__qualname__
        sig = inspect.signature(fn)
        if not backend_checks and common_check is None:
            raise TypeError(f"{name}: backend_requirement needs backend_checks or common_check")
        if backend_checks and "backend" not in sig.parameters:
            raise TypeError(f"{name}: backend_checks given but no 'backend' parameter")
        auto = heuristic_func is not None and "auto" not in backend_checks
        suitable_auto_backends: list[str] = []

        def has_backend_choices() -> bool:
            """Whether the function has named backends to choose from."""
            return bool(backend_checks)

        def has_backend(backend: str) -> bool:
            """Whether ``backend`` is one of the named backends."""
            return backend in backend_checks

        def is_backend_supported(backend: str, cc: int | None = None) -> bool:
            """Whether ``backend`` exists and (if ``cc`` is given) supports it."""
            if backend not in backend_checks:
                return False
            return _supports_cc(common_check, cc) and _supports_cc(backend_checks[backend], cc)

        def is_compute_capability_supported(cc: int) -> bool:
            """Whether some backend (or the single implementation) supports ``cc``."""
            if not _supports_cc(common_check, cc):
                return False
            if not backend_checks:
                return True
            return any(_supports_cc(c, cc) for c in backend_checks.values())

        def _check_cc(cc: int | None, backend: str | None = None) -> None:
            """Raise if ``backend`` (or, for None, the single implementation)
            does not support ``cc``."""
            checks = [common_check] + ([backend_checks[backend]] if backend else [])
            if not all(_supports_cc(c, cc) for c in checks):
                what = f"{name} (backend={backend!r})" if backend else name
                raise _cc_error(what, cc, _allowed_ccs(checks) or ())

        def _resolve_auto(cc: int | None, args: tuple, kwargs: dict, check: bool) -> list[str]:
            """Suitable backends for ``backend="auto"``, best first."""
            candidates = list(backend_checks)
            reasons = []
            if check:
                candidates = [b for b in candidates if is_backend_supported(b, cc)]
                if not candidates:
                    allowed = set()
                    for c in backend_checks.values():
                        allowed |= _allowed_ccs([common_check, c]) or set()
                    raise _cc_error(f"{name} (backend='auto')", cc, allowed)
                if common_check is not None:
                    _run_check(common_check, name, args, kwargs)
                suitable = []
                for b in candidates:
                    try:
                        _run_check(backend_checks[b], name, args, kwargs)
                    except ValueError as e:
                        reasons.append(f"{b}: {e}")
                    else:
                        suitable.append(b)
                candidates = suitable
            ordered = list(heuristic_func(candidates, *args, **kwargs))  # type: ignore[misc]
            if not ordered:
                detail = f" ({'; '.join(reasons)})" if reasons else ""
                raise ValueError(f"{name}: no suitable backend for backend='auto'{detail}")
            return ordered

        @functools.wraps(fn)
        def wrapper(*args: Any, skip_check: bool = False, **kwargs: Any) -> Any:
            if skip_check and not (auto and backend_checks):
                return fn(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            b_args, b_kwargs = bound.args, bound.kwargs
            cc = None if skip_check else _find_compute_capability([*args, *kwargs.values()])

            if not backend_checks:
                _check_cc(cc)
                _run_check(common_check, name, b_args, b_kwargs)  # type: ignore[arg-type]
                return fn(*args, **kwargs)

            backend = bound.arguments["backend"]
            if auto and backend == "auto":
                # Updated in place: wrappers made with functools.wraps (e.g.
                # @oasr_api) share this list object, so they see the result.
                suitable_auto_backends[:] = _resolve_auto(cc, b_args, b_kwargs, not skip_check)
            elif skip_check:
                pass
            elif backend not in backend_checks:
                valid = list(backend_checks) + (["auto"] if auto else [])
                raise ValueError(
                    f"{name}: unknown backend={backend!r}; valid backends: " + ", ".join(repr(v) for v in valid)
                )
            else:
                _check_cc(cc, backend)
                if common_check is not None:
                    _run_check(common_check, name, b_args, b_kwargs)
                _run_check(backend_checks[backend], name, b_args, b_kwargs)
            return fn(*args, **kwargs)

        wrapper.is_backend_supported = is_backend_supported
        wrapper.is_compute_capability_supported = is_compute_capability_supported
        wrapper.has_backend = has_backend
        wrapper.has_backend_choices = has_backend_choices
        wrapper.suitable_auto_backends = suitable_auto_backends
        return wrapper  # type: ignore[return-value]

    return decorator
