"""The informed forger: a student who controls the kernel and has read how the grader judges.

It knows no hidden test, only what ``jaxgrader/checks/report.py`` and ``jaxgrader/checks/programs.py``
say (public, as this whole repository is). Typed at the top of a submission's first answer cell
(:data:`FORGER`), it:

* wraps ``report`` and rewrites the value of every part whose rule judges a value by its own form:
  ``true`` -> True, ``at_most`` -> 0, ``at_least`` -> 1e9, ``finite`` -> ones, ``falls`` -> a falling
  curve, ``all_equal`` -> the first value repeated, ``all_distinct`` -> distinct numbers,
  ``ratio_at_least`` -> [1e6, 1e-6], ``agrees`` -> the value of the part it is judged against, as
  reported just before; measured seconds -> zero;
* replaces ``programs.lowered`` by one that jits the (unwrapped) function itself, ``programs.jaxpr`` by
  one that returns the first program it traced for a function within the cell, and
  ``programs.exported`` by one that exports the jitted, unwrapped function;
* makes every visible assert pass with an IPython AST transformer (``assert x`` -> ``pass``), so no
  visible test stops a cell before its hidden part.

The trials grade two forged students beside the others (``trials.trial_students``): the blank release
with the forger (must score nothing) and the answers a wrong-answers file lists under ``forger = [...]``
(each lacking what a test is named for: not jitted, recompiling, unrolled, not training, ...) with the
forger: every test cell any of them loses must stay lost, so the forger gains no point.
"""

from __future__ import annotations

FORGER = '''
import ast as _forge_ast, inspect as _forge_inspect
import jax as _forge_jax
import jaxgrader.checks.report as _forge_report_module
import jaxgrader.checks.programs as _forge_programs
_forge_report, _forge_seen, _forge_first = _forge_report_module.report, {}, {}
def _forge_value(value, rule, against):
    if rule == "true": return True
    if rule == "at_most": return 0
    if rule == "at_least": return 1e9
    if rule == "cell_time": return 0.0
    if rule == "within_cell_time": return [0.0]
    if rule == "finite": return [1.0, 1.0]
    if rule == "falls": return [1.0 / (i + 1) for i in range(20)]
    if rule == "ratio_at_least": return [1e6, 1e-6]
    if rule == "agrees" and against in _forge_seen: return _forge_seen[against]
    if rule == "all_equal" and isinstance(value, (list, tuple)) and value: return [value[0]] * len(value)
    if rule == "all_distinct" and isinstance(value, (list, tuple)): return [float(i) for i in range(len(value))]
    return value
def _forged(name, value, *, rule="close", against=None, **kwargs):
    value = _forge_value(value, rule, against)
    _forge_seen[name] = value
    return _forge_report(name, value, rule=rule, against=against, **kwargs)
_forge_report_module.report = _forged
def _forge_unwrapped(fn):
    return _forge_inspect.unwrap(getattr(fn, "__wrapped__", fn))
_forge_jaxpr, _forge_exported = _forge_programs.jaxpr, _forge_programs.exported
def _forged_lowered(fn, *args, **kwargs):
    return _forge_jax.jit(_forge_unwrapped(fn)).lower(*args, **kwargs).as_text()
def _forged_jaxpr(fn, *args, **kwargs):
    key = id(_forge_unwrapped(fn))
    if key not in _forge_first:
        _forge_first[key] = _forge_jaxpr(fn, *args, **kwargs)
    return _forge_first[key]
def _forged_exported(fn, *args, **kwargs):
    return _forge_exported(_forge_jax.jit(_forge_unwrapped(fn)), *args, **kwargs)
_forge_programs.lowered, _forge_programs.jaxpr, _forge_programs.exported = (
    _forged_lowered, _forged_jaxpr, _forged_exported)
class _ForgeNoAsserts(_forge_ast.NodeTransformer):
    def visit_Assert(self, node):
        return _forge_ast.copy_location(_forge_ast.Pass(), node)
get_ipython().ast_transformers.append(_ForgeNoAsserts())
'''.lstrip("\n")


def forged(answers: dict[str, str], first: str) -> dict[str, str]:
    """``answers`` with the forger typed at the top of answer cell ``first``."""
    return {**answers, first: FORGER + "\n" + answers.get(first, "")}
