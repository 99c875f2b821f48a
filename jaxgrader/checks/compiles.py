"""Count XLA compilations deterministically, instead of timing them.

JAX reports every backend compilation through ``jax.monitoring`` as a duration
event tagged with the compiled function's name. Counting those events for one
function name gives an exact number that does not depend on machine speed:
"three batch sizes, three compilations; a repeated call, none".

The listener is registered once per process (old JAX releases cannot
unregister listeners) and forwards events to whichever counters are open.
"""

from __future__ import annotations

import contextlib
import dataclasses

import jax

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"

_open_counters: list["CompileCounter"] = []
_listener_installed = False


@dataclasses.dataclass
class CompileCounter:
    """Compilations (and traces) seen while the counter was open, for one function name."""

    fun_name: str | None
    count: int = 0
    traces: int = 0

    def matches(self, reported: str | None) -> bool:
        # JAX reports traces as "loss" and backend compilations as "jit(loss)".
        return self.fun_name is None or reported in (self.fun_name, f"jit({self.fun_name})")


def _listener(event: str, duration: float, **kwargs) -> None:
    if event not in (BACKEND_COMPILE_EVENT, TRACE_EVENT):
        return
    for counter in _open_counters:
        if counter.matches(kwargs.get("fun_name")):
            if event == BACKEND_COMPILE_EVENT:
                counter.count += 1
            else:
                counter.traces += 1


def _install_listener() -> None:
    global _listener_installed
    if not _listener_installed:
        jax.monitoring.register_event_duration_secs_listener(_listener)
        _listener_installed = True


def function_name(fn) -> str:
    """The name JAX reports for ``fn`` (unwrapping jit and functools.partial)."""
    inner = getattr(fn, "__wrapped__", fn)
    while hasattr(inner, "func"):  # functools.partial
        inner = inner.func
    return getattr(inner, "__name__", str(inner))


@contextlib.contextmanager
def count_compilations(fn_or_name=None):
    """Count backend compilations of one function while the block runs.

    >>> with count_compilations(train_step) as c:
    ...     for _ in range(10):
    ...         state = train_step(state, batch)
    >>> c.count
    1

    Pass a function (or its name) to count only its compilations, or nothing to
    count every compilation. Only compilations *inside* the block count: a
    function compiled earlier for the same shapes reads 0 (call
    ``jax.clear_caches()`` or ``f.clear_cache()`` first when that matters). The
    persistent compilation cache must be off (the default): a hit is not a
    compilation. JAX reports the name of the function that was jitted, so a
    plain wrapper around a jitted function is counted under the inner name.
    """
    _install_listener()
    name = fn_or_name if isinstance(fn_or_name, str) or fn_or_name is None else function_name(fn_or_name)
    counter = CompileCounter(name)
    _open_counters.append(counter)
    try:
        yield counter
    finally:
        _open_counters.remove(counter)
