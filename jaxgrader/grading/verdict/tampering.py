"""Tampering seen in the submission itself: the code a student controls, read outside the kernel.

Everything in the kernel is the student's, so what a kernel reports can be staged: a hook that sees
which cell runs, a patched module, a lookup of the hidden test's own names. The submitted notebook's
source is not: the grader reads it as it was run, as trusted evidence. :func:`findings` reads every
code cell the student controls (solution cells and cells the student added: every code cell that is
not a locked cell of the instructor's notebook, which nbgrader restores by grade id) as IPython runs
it (magics transformed, a cell magic's Python body read too), walks its syntax tree and names each
line that uses what no answer in this course needs (``vocabulary``): a module outside the course's
libraries, the kernel's machinery (IPython's shell, history and hooks), code run from strings, names
looked up by computed strings, frames and code objects, attributes of imported modules rebound,
modules handed around, the environment beyond the course's own variables (the grading seed above
all), names only the hidden tests define, the kernel's process files, Python files written to import.
A cell that does not parse is no finding: it fails on its own.

A submission with findings keeps its value parts; its cost and artifact parts are held for review
(``holds``). Pure: no kernel, no files.
"""

from __future__ import annotations

import ast
import dataclasses
import functools

from . import vocabulary as V
from .scan import CellScan, resolve

HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
ADDED = "added cell"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One line of a student's cell that uses what no answer needs."""

    cell: int  # the cell's index in the notebook
    where: str  # the solution cell's grade id, or "added cell"
    line: int  # the line within the cell, from 1
    text: str  # the line as written
    what: str  # what was found

    def describe(self) -> str:
        return f"{self.where} (cell {self.cell}), line {self.line}: {self.what}"

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        return cls(int(data.get("cell", 0)), str(data.get("where", "")), int(data.get("line", 0)),
                   str(data.get("text", "")), str(data.get("what", "")))


@dataclasses.dataclass
class Vocabulary:
    """What answers may use (``vocabulary``'s defaults; ``c.FindTampering.*`` changes them)."""

    modules: frozenset = frozenset(V.ALLOWED_MODULES)
    paths: tuple = V.ALLOWED_PATHS
    limited: dict = dataclasses.field(default_factory=lambda: dict(V.LIMITED_MODULES))
    denied: tuple = V.DENIED_PATHS
    environ_read: frozenset = frozenset(V.ENVIRON_READ)
    environ_write: frozenset = frozenset(V.ENVIRON_WRITE)
    jax_flags: frozenset = frozenset(V.JAX_FLAGS)
    line_magics: frozenset = frozenset(V.LINE_MAGICS)
    cell_magics: frozenset = frozenset(V.CELL_MAGICS)


def _meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


def student_cells(nb, source_nb) -> list[tuple[int, str, str]]:
    """(index, grade id or "added cell", source) of every code cell the student controls: all but the
    cells nbgrader restores from the instructor's notebook (locked, by grade id)."""
    course = {_meta(c).get("grade_id") for c in source_nb.cells if c.cell_type == "code" and _meta(c).get("locked")}
    return [(i, _meta(c).get("grade_id") or ADDED, c.source) for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and not (_meta(c).get("locked") and _meta(c).get("grade_id") in course)]


# --------------------------------------------------------------------------- parsing as IPython does


def units(source: str, first: int = 1, magics: frozenset = frozenset(V.CELL_MAGICS)):
    """(pieces, findings) of a cell: each piece (syntax tree, line offset, original lines) as IPython runs it;
    a cell magic outside ``magics`` is a finding (line, what), one inside has its body read as Python."""
    lines = source.splitlines()
    skip = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    body, offset = "\n".join(lines[skip:]), first - 1 + skip
    if body.startswith("%%"):
        head, _, rest = body.partition("\n")
        name = (head[2:].split() or [""])[0]
        if name in magics:
            return units(rest, offset + 2, magics)
        return [], [(offset + 1, f"the cell magic %%{name}, which no answer needs")]
    try:  # plain Python is what IPython runs as it is (its transforms rewrite only what is not Python)
        tree = ast.parse(body)
    except Exception:  # noqa: BLE001  (SyntaxError, ValueError; RecursionError: too deep for Python to run too)
        from IPython.core.inputtransformer2 import TransformerManager

        try:
            tree = ast.parse(TransformerManager().transform_cell(body))
        except Exception:  # noqa: BLE001  (SyntaxError and IPython's own): it fails on its own when run
            return [], []
    return [(tree, offset, lines[skip:])], []


def _bound(tree) -> set[str]:
    """Every name a piece binds, in any scope (parameters, targets, imports, definitions, handlers)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    return names


def _module_level(tree) -> set[str]:
    """The names a piece binds in the notebook's namespace (not inside functions, classes, comprehensions)."""
    names: set[str] = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, _SCOPES):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _imports(tree, paths: dict, modules: set) -> None:
    """name -> dotted path of what each import binds; ``modules``: paths a plain ``import`` binds (modules)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                name, path = (a.asname, a.name) if a.asname else (a.name.split(".")[0],) * 2
                paths[name] = path
                modules.add(path)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            paths.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names if a.name != "*"})


# --------------------------------------------------------------------------- the notebook


@dataclasses.dataclass
class Names:
    """What the scan knows of the whole notebook's names."""

    aliases: dict  # name -> dotted path (imports anywhere, and names assigned a module or its attribute)
    modules: set  # paths bound by a plain import: modules for sure
    student: set  # every name a student's cell binds
    course: set  # names the course's cells bind in their visible parts (setup, visible tests)
    course_imports: dict  # name -> path the course's cells import
    hidden: set  # names only the hidden tests bind in the notebook's namespace
    test_builtins: set  # builtins the course's tests call


@functools.lru_cache(maxsize=32)
def _course_names(locked: tuple[str, ...]) -> tuple:
    """(names the visible parts bind, name -> path they import, paths plainly imported, names only the hidden
    parts bind, builtins the cells use) of a notebook's locked cells (cached: every submission has them)."""
    import builtins

    course, imports, modules, hidden, loads = set(), {}, set(), set(), set()
    for source in locked:
        visible, _, rest = source.partition(HIDDEN)
        for tree, _, _ in units(visible)[0]:
            course |= _module_level(tree)
            _imports(tree, imports, modules)
            loads |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        for tree, _, _ in units(rest.split(END_HIDDEN)[0])[0]:
            hidden |= _module_level(tree)
            loads |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return (frozenset(course), imports, frozenset(modules), frozenset(hidden - course),
            frozenset(n for n in loads if n in set(dir(builtins))) - course)


def _names(pieces, source_nb) -> Names:
    course, course_imports, modules, hidden, test_builtins = _course_names(tuple(
        c.source for c in source_nb.cells if c.cell_type == "code" and _meta(c).get("locked")))
    aliases, modules, student = dict(course_imports), set(modules), set()
    for tree, _, _ in pieces:
        student |= _bound(tree)
        _imports(tree, aliases, modules)
    assigns = [node for tree, _, _ in pieces for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) for t in node.targets)]
    for _ in range(3):  # aliases of aliases: ``xp = jnp``, ``m = xp.linalg``, ``cls = type(x)``
        for node in assigns:
            path = resolve(node.value, aliases)
            for target in node.targets if path else ():
                if isinstance(target, ast.Name):
                    aliases.setdefault(target.id, path)
    return Names(aliases, modules, student, set(course), dict(course_imports), set(hidden), set(test_builtins))


def findings(nb, source_nb, vocabulary: Vocabulary | None = None) -> list[Finding]:
    """Every line of ``nb``'s student cells that uses what no answer needs (``nb``: the notebook as it was
    run, or as submitted; ``source_nb``: the instructor's notebook it is a submission of)."""
    vocabulary = vocabulary or Vocabulary()
    cells = [(index, where, units(source, magics=vocabulary.cell_magics)) for index, where, source in
             student_cells(nb, source_nb)]
    try:
        names = _names([piece for _, _, (pieces, _) in cells for piece in pieces], source_nb)
    except RecursionError:  # an alias chain no answer writes
        return [Finding(cells[0][0], cells[0][1], 1, "", "code nested too deep for the grader to read")]
    found: dict[tuple, Finding] = {}
    for index, where, (pieces, magic) in cells:
        lines = nb.cells[index].source.splitlines()

        def add(line: int, what: str, index=index, where=where, lines=lines):
            text = lines[line - 1].strip()[:200] if 0 < line <= len(lines) else ""
            found.setdefault((index, line, what), Finding(index, where, line, text, what))

        for line, what in magic:
            add(line, what)
        for tree, offset, original in pieces:
            try:
                CellScan(names, vocabulary, offset, original, add).run(tree)
            except RecursionError:  # Python compiled it, so it runs: code no answer writes
                add(offset + 1, "code nested too deep for the grader to read")
    return sorted(found.values(), key=lambda f: (f.cell, f.line))
