"""Facts read off a traced program (a jaxpr), including the sub-programs inside scan, jit, shard_map.

What a test part is named for ("uses scan", "splits the batch over devices") is
checked in the program JAX traced, not in the student's source text.
"""

from __future__ import annotations


def _subjaxprs(eqn):
    for value in eqn.params.values():
        for sub in (value if isinstance(value, (list, tuple)) else (value,)):
            inner = sub if hasattr(sub, "eqns") else getattr(sub, "jaxpr", None)
            if hasattr(inner, "eqns"):
                yield inner


def count_eqns(jaxpr) -> int:
    """Operations in ``jaxpr`` and every program nested in it: an unrolled Python loop grows with its length."""
    return sum(1 + sum(count_eqns(inner) for inner in _subjaxprs(eqn)) for eqn in jaxpr.eqns)


def shard_map_inputs(jaxpr) -> list[tuple[tuple, tuple]]:
    """(shape outside, shape each device sees) of every input of every ``shard_map`` in ``jaxpr``."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "shard_map":
            inner = eqn.params.get("jaxpr")
            inner = getattr(inner, "jaxpr", inner)
            found.extend((tuple(o.aval.shape), tuple(i.aval.shape)) for o, i in zip(eqn.invars, inner.invars))
        for inner in _subjaxprs(eqn):
            found.extend(shard_map_inputs(inner))
    return found


__all__ = ["count_eqns", "shard_map_inputs"]
