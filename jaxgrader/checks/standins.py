"""Stand-ins swapped in for earlier exercises, with the later answers rebuilt on them: one mistake, one loss.

A test of an exercise that uses earlier ones reports twice (docs/authoring.md, "Isolation"): the student's own
chain, judged where the earlier exercises passed, and the same computation with *stand-ins* for them, judged
where one failed. A stand-in is bound by name, which reaches an answer that looks the earlier function up when
it runs (``grads = jax.grad(loss_fn)(...)`` inside ``train_step``), but not one that bound it when it was
defined (``grad_fn = jax.value_and_grad(loss_fn)`` at module level, a default argument, a factory's closure, a
jitted function's compiled program). So :func:`swapped` also runs the answer cells that build on the swapped
names *again*, with the stand-ins bound: every binding style then sees them, as the reference's late lookups do.

Which cells to run again is written in the test as ``rebuild="{jaxgrader-cells:train_step,train_epoch}"``: the
grader writes the submitted sources of those solution cells there as it runs the test cell
(``jaxgrader.grading.sandbox.marks``); outside grading the mark stays as written and nothing is rebuilt. On exit
every name the stand-ins or the rebuilt cells bound is restored, so later cells see the student's own answers.

Nothing here judges (the grader compares what the test reports), and nothing here answers an exercise.
"""

from __future__ import annotations

import contextlib
import json

_MISSING = object()


def _sources(rebuild) -> list[str]:
    """The cell sources the grader wrote in place of a ``{jaxgrader-cells:...}`` mark (none for the mark itself)."""
    if not rebuild or not isinstance(rebuild, str) or rebuild.startswith("{jaxgrader-cells:"):
        return []
    try:
        found = json.loads(rebuild)
    except ValueError:
        return []
    return [s for s in found if isinstance(s, str)] if isinstance(found, list) else []


def _python(source: str) -> str:
    """A cell's source as IPython runs it (magics and shell lines turned into calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001  no IPython here: plain Python
        return source


@contextlib.contextmanager
def swapped(namespace: dict, standins: dict, rebuild: str | None = None):
    """Bind each ``standins`` name in ``namespace`` (the notebook's ``globals()``), run the ``rebuild`` cells
    again, and restore every name they bound on exit (see the module doc).

    A rebuilt cell that raises stops the rebuilding there (what it did not define keeps the student's own
    binding); the exception is raised inside the ``with`` block, where the test lets the parts it would have
    reported fail.
    """
    saved: dict = {}  # name -> its binding before the block (the first seen wins)
    try:
        for name, value in standins.items():
            saved.setdefault(name, namespace.get(name, _MISSING))
            namespace[name] = value
        for source in _sources(rebuild):
            before = dict(namespace)
            try:
                exec(compile(_python(source), "<rebuilt answer>", "exec"), namespace)  # noqa: S102
            finally:
                for name in set(before) | set(namespace):
                    if before.get(name, _MISSING) is not namespace.get(name, _MISSING):
                        saved.setdefault(name, before.get(name, _MISSING))
        yield namespace
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value


__all__ = ["swapped"]
