"""Honest rewrites: the instructor's own answers in other binding styles, which must keep full marks.

A correct answer can bind what it builds on in many ways, and every one of them computes what the
instructor's answer computes. Hidden tests that isolate one exercise from another must still give
such an answer full marks (docs/authoring.md, "Isolation without stand-ins in the student's
chain"). So the trials grade, beside the solution, one student per style, whose solution cells are
the instructor's rewritten mechanically (``rewrite``), every function that uses another exercise's
function (or a name a hidden test swaps, such as ``loss_fn`` or ``optimizer``) rewritten so that it
binds it when it is defined:

``module-level``  transforms of it built once at module level (``grad_fn = jax.value_and_grad(loss_fn,
                  has_aux=True)``), methods bound once (``call = model.stateless_call``), every other
                  use through an alias taken at definition;
``default-argument``  ``def train_step(state, batch, *, loss_fn=loss_fn)``;
``factory``       ``train_step = _make_train_step(loss_fn)``, the function a closure over it;
``partial``       ``train_step = jax.jit(functools.partial(_train_step, loss_fn=loss_fn))``.

A name the notebook assigns again in a later cell outside the hidden tests is left alone (binding it
early would compute something else).

Packed (CI, and ``jaxgrader trials`` without ``--each``), the styles take turns instead: ``MIXED``
students (``honest-mixed-<k>``), the n-th rewritten cell of student k in style ``n + 2k`` (of four),
so every cell is graded in two styles (and every style, where four cells or more are rewritten), for
half the grading; ``--each`` grades every cell in every style.

The wrong-answer students hold rewrites too (``pack_styles``): where a wrong answer's cell is upstream of a
rewritten one, the pack holds that cell rewritten, so that it binds the *wrong* function at definition, and
must still lose no more than the wrong answer's own tests (docs/authoring.md, "Isolation"). Such a cell takes
the styles in turn over the packs it is downstream in.
"""

from __future__ import annotations

import ast

STYLES = ("module-level", "default-argument", "factory", "partial")
MIXED = 2  # packed: students whose rewritten cells take the styles in turn
TRANSFORMS = {"grad", "value_and_grad", "vmap", "jit", "jacfwd", "jacrev", "hessian", "checkpoint", "remat"}
HIDDEN = "### BEGIN HIDDEN TESTS"


def assigned(source: str) -> set[str]:
    """Global names a cell assigns (functions, classes, assignments, loop targets, imports; not names
    bound inside a function, lambda or comprehension); empty if it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def swapped_names(source: str) -> set[str]:
    """The names a hidden test swaps with ``jaxgrader.checks.standins.swapped(globals(), {"name": stand_in, ...})``
    (the keys of the dict written in the call); empty if it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if called.endswith("swapped") and len(node.args) > 1 and isinstance(node.args[1], ast.Dict):
            names |= {k.value for k in node.args[1].keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return names


def bindable(cells: list[tuple[str, str, bool]]) -> dict[str, set[str]]:
    """grade_id of each solution cell -> the names its functions may bind at definition.

    ``cells``: (grade_id or "", source, is_solution) in notebook order. A name qualifies if another
    solution cell defines it or a hidden test swaps a stand-in in under it (assigns it, or names it in
    ``swapped(globals(), {...})``), and no cell after this one assigns it again outside the hidden tests.
    """
    solution_names = {gid: assigned(src) for gid, src, sol in cells if sol}
    swapped = set()
    for _, src, _ in cells:
        if HIDDEN in src:
            hidden = src.split(HIDDEN, 1)[1].split("### END HIDDEN TESTS")[0]
            swapped |= {n for n in assigned(hidden) | swapped_names(hidden) if not n.startswith("_")}
    out = {}
    for i, (gid, src, sol) in enumerate(cells):
        if not sol:
            continue
        others = set().union(*(names for g, names in solution_names.items() if g != gid))
        later = set().union(*(assigned(s.split(HIDDEN, 1)[0]) for _, s, _ in cells[i + 1:]))
        out[gid] = ((others | swapped) - solution_names[gid]) - later
    return out


def _loads(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _local(func) -> set[str]:
    """Names bound inside a function (parameters, assignments, inner definitions): not globals there."""
    names = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    for node in ast.walk(func):
        if node is func:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _uses(func, names: set[str]) -> list[str]:
    """The names of ``names`` that ``func``'s body (not its decorators) reads as globals, in order."""
    body = ast.Module(body=func.body, type_ignores=[])
    local = _local(func)
    seen = []
    for n in ast.walk(body):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names and n.id not in local \
                and n.id not in seen:
            seen.append(n.id)
    return seen


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.mapping:
            return ast.copy_location(ast.Name(self.mapping[node.id], ast.Load()), node)
        return node


class _Hoist(ast.NodeTransformer):
    """Replace transforms of bound names (``jax.value_and_grad(loss_fn, ...)``) and methods of bound objects
    (``model.stateless_call``) by names defined at module level."""

    def __init__(self, names: set[str], local: set[str], prefix: str):
        self.names, self.local, self.prefix = names, local, prefix
        self.hoisted: list[tuple[str, ast.expr]] = []

    def _global_only(self, node) -> bool:
        return not (_loads(node) & self.local)

    def _hoist(self, node):
        for name, expr in self.hoisted:
            if ast.dump(expr) == ast.dump(node):
                return ast.copy_location(ast.Name(name, ast.Load()), node)
        name = f"_{self.prefix}_bound_{len(self.hoisted)}"
        self.hoisted.append((name, node))
        return ast.copy_location(ast.Name(name, ast.Load()), node)

    def visit_Call(self, node):
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr in TRANSFORMS and isinstance(func.value, ast.Name)
                and func.value.id == "jax" and _loads(node) & self.names and self._global_only(node)):
            return self._hoist(node)
        return self.generic_visit(node)

    def visit_Attribute(self, node):
        if (isinstance(node.value, ast.Name) and node.value.id in self.names and node.value.id not in self.local
                and isinstance(node.ctx, ast.Load)):
            return self._hoist(node)
        return self.generic_visit(node)


def _style(func, uses: list[str], style: str) -> list[ast.stmt]:
    """The statements that replace top-level function ``func``, which reads ``uses`` as globals."""
    name = func.name
    if style == "module-level":
        hoist = _Hoist(set(uses), _local(func), name)
        func = hoist.visit(func)
        left = _uses(func, set(uses))
        aliases = {u: f"_{name}_{u}" for u in left}
        func = _Rename(aliases).visit(func)
        before = [ast.Assign([ast.Name(n, ast.Store())], e) for n, e in hoist.hoisted]
        before += [ast.Assign([ast.Name(a, ast.Store())], ast.Name(u, ast.Load())) for u, a in aliases.items()]
        return before + [func]
    if style == "default-argument":
        func.args.kwonlyargs += [ast.arg(u) for u in uses]
        func.args.kw_defaults += [ast.Name(u, ast.Load()) for u in uses]
        return [func]
    if style == "factory":
        extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}  # Python 3.12+
        maker = ast.FunctionDef(name=f"_make_{name}", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(u) for u in uses], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=[func, ast.Return(ast.Name(name, ast.Load()))], decorator_list=[], returns=None, **extra)
        call = ast.Call(ast.Name(f"_make_{name}", ast.Load()), [ast.Name(u, ast.Load()) for u in uses], [])
        return [maker, ast.Assign([ast.Name(name, ast.Store())], call)]
    if style == "partial":
        decorators, func.decorator_list = func.decorator_list, []
        impl = f"_{name}_impl"
        func.name = impl
        func.args.kwonlyargs += [ast.arg(u) for u in uses]
        func.args.kw_defaults += [None for _ in uses]
        value: ast.expr = ast.Call(ast.Attribute(ast.Name("_functools", ast.Load()), "partial", ast.Load()),
                                   [ast.Name(impl, ast.Load())],
                                   [ast.keyword(u, ast.Name(u, ast.Load())) for u in uses])
        for decorator in reversed(decorators):
            value = ast.Call(decorator, [value], [])
        return [func, ast.Assign([ast.Name(name, ast.Store())], value)]
    raise ValueError(f"unknown style {style!r}; one of {STYLES}")


def rewrite(source: str, names: set[str], style: str) -> str | None:
    """``source`` (a solution cell) with every top-level function that reads one of ``names`` rewritten
    in ``style``; None if nothing in it reads one (or it does not parse). Markers (``### BEGIN
    SOLUTION``) are not kept: the result is a student's answer."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    body, changed = [], False
    for node in tree.body:
        uses = _uses(node, names) if isinstance(node, ast.FunctionDef) else []
        if uses:
            body += _style(node, uses, style)
            changed = True
        else:
            body.append(node)
    if not changed:
        return None
    if style == "partial":
        body.insert(0, ast.Import([ast.alias("functools", "_functools")]))
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])))


def honest_answers(cells: list[tuple[str, str, bool]], solutions: dict[str, str]) -> dict[str, dict[str, str]]:
    """style -> {grade_id: rewritten answer} for the solution cells a style changes (``solutions``: the
    instructor's answers by grade_id, as ``notebooks.solutions_of`` gives them)."""
    names = bindable(cells)
    out: dict[str, dict[str, str]] = {}
    for style in STYLES:
        for gid, answer in solutions.items():
            new = rewrite(answer, names.get(gid, set()), style)
            if new is not None:
                out.setdefault(style, {})[gid] = new
    return out


def downstream(cells: list[tuple[str, str, bool]], changed: set[str]) -> set[str]:
    """grade_ids of the solution cells that build on the ``changed`` cells, directly or through other cells.

    ``cells``: (grade_id or "", source, is_solution) in notebook order, the sources as the student holds them;
    test cells (those with a hidden part) are not read. A cell builds on ``changed`` if it reads a name that a
    changed cell assigns, or that a cell assigns which builds on them (``optimizer = make_optimizer(...)``
    between ``decay_mask`` and ``train_step``)."""
    tainted: set[str] = set()
    out: set[str] = set()
    for gid, source, is_solution in cells:
        if HIDDEN in source:
            continue
        if gid in changed:
            tainted |= assigned(source)
            continue
        try:
            reads = _loads(ast.parse(source))
        except SyntaxError:
            continue
        if reads & tainted:
            tainted |= assigned(source)
            if is_solution and gid:
                out.add(gid)
    return out


def pack_styles(cells: list[tuple[str, str, bool]], by_style: dict[str, dict[str, str]],
                packs: list[dict[str, str]]) -> list[dict[str, str]]:
    """For each pack (``{grade_id: the wrong answer it holds}``), ``{grade_id: honest rewrite}`` for the rewritten
    cells downstream of its wrong answers (``downstream``, on the pack's own cells): those bind a wrong function
    at definition, where a stand-in twin must reach them too. Over the packs a cell is downstream in, it takes the
    styles in turn (starting at its own place among the rewritten cells), so that it meets every style where it is
    downstream in four packs or more. ``by_style``: ``honest_answers``'s result."""
    rewritten = list(next(iter(by_style.values()), {}))
    turns = {gid: n for n, gid in enumerate(rewritten)}
    out = []
    for wrong in packs:
        later = downstream([(gid, wrong.get(gid, source), sol) for gid, source, sol in cells], set(wrong))
        answers = {}
        for gid in rewritten:
            if gid not in wrong and gid in later:
                answers[gid] = by_style[STYLES[turns[gid] % len(STYLES)]][gid]
                turns[gid] += 1
        out.append(answers)
    return out


def mixed_answers(by_style: dict[str, dict[str, str]], start: int = 0) -> tuple[dict[str, dict[str, str]], int]:
    """({"mixed-<k>": {grade_id: answer}}, the next turn) from ``honest_answers``'s result: the cells every
    style rewrites (the same cells), in order, the n-th of student k in ``STYLES[(start + n + k * 4 // MIXED) % 4]``.
    ``start``: where this notebook's turns begin (the count of an assignment's earlier notebooks' cells)."""
    cells = list(next(iter(by_style.values()), {}))
    out: dict[str, dict[str, str]] = {}
    for n, gid in enumerate(cells):
        for k in range(MIXED):
            style = STYLES[(start + n + k * len(STYLES) // MIXED) % len(STYLES)]
            out.setdefault(f"mixed-{k + 1}", {})[gid] = by_style[style][gid]
    return out, start + len(cells)
