"""The grader's folders by job: which sub-package may import which, and the code map kept true.

`jaxgrader/grading/` is cut into sub-packages, each with one job and a place in one order
(LAYERS, bottom first): a sub-package imports only those below it, the commands on top import
anything, and nothing under `jaxgrader/checks/` (what runs in the student's kernel) imports the
grader. Imports inside functions count: they are how cycles and shortcuts hide.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

GRADING = ROOT / "jaxgrader" / "grading"
# Bottom first. A sub-package may import itself and the ones before it; "(top)" is the commands.
LAYERS = ["sandbox", "verdict", "course", "classrun", "editions", "teacher", "classroom", "(top)"]
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    """Dotted names under jaxgrader.grading ('' for the package itself) -> their files."""
    found = {}
    for path in GRADING.rglob("*.py"):
        parts = list(path.relative_to(GRADING).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The grader modules `name` imports, anywhere in its file."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package[: len(package) - node.level + 1]
        elif (node.module or "").split(".")[:2] == ["jaxgrader", "grading"]:
            base = []
        else:
            continue
        module = [p for p in (node.module or "").split(".") if p]
        target = base + (module if node.level else module[2:])
        for alias in node.names:  # `from .sub import module` names a module; `from .module import name`, a name
            submodule = ".".join(target + [alias.name])
            found.add(submodule if submodule in modules else ".".join(target))
    return found - {name}


def _layer(name: str) -> str:
    return name.split(".")[0] if "." in name else "(top)"


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {m for m in _imports(name, path, modules) if m in modules and m and m not in LAYERS}
            for name, path in modules.items()}


def test_every_module_belongs_to_a_layer():
    for name in _modules():
        assert _layer(name) in LAYERS, f"jaxgrader.grading.{name}: in no sub-package of LAYERS"


def test_sub_packages_import_only_the_ones_below():
    for name, deps in sorted(_graph().items()):
        for dep in sorted(deps):
            assert LAYERS.index(_layer(dep)) <= LAYERS.index(_layer(name)), (
                f"jaxgrader.grading.{name} imports {dep}: {_layer(name)}/ may import only "
                f"{', '.join(LAYERS[:LAYERS.index(_layer(name)) + 1])}")


def test_grading_modules_import_each_other_without_a_cycle():
    """Each module has one job; none needs a module that needs it back."""
    graph = _graph()

    def cycle_from(start, path=()):
        for nxt in sorted(graph.get(start, ())):
            if nxt in path:
                return path[path.index(nxt):] + (start, nxt)
            found = cycle_from(nxt, path + (start,))
            if found:
                return found
        return None

    for module in sorted(graph):
        assert cycle_from(module) is None, " -> ".join(cycle_from(module))


def test_the_kernel_side_never_imports_the_grader():
    """jaxgrader/checks/ runs in the student's kernel: trusted by nobody, it must not need the grader."""
    for path in sorted((ROOT / "jaxgrader" / "checks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for module in names:
                assert not module.startswith("jaxgrader.grading"), f"{path.relative_to(ROOT)} imports {module}"
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                raise AssertionError(f"{path.relative_to(ROOT)}: a relative import out of jaxgrader.checks")


def test_every_sub_package_says_its_job_and_what_it_may_import():
    for package in sorted(p.parent for p in GRADING.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        assert package.name in LAYERS, f"{package.relative_to(ROOT)}: add it to LAYERS"
        assert "May import" in doc, f"{package.relative_to(ROOT)}/__init__.py: say what it does and what it may import"


def test_no_grader_module_is_over_the_limit():
    for name, path in sorted(_modules().items()):
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_LINES, f"{path.relative_to(ROOT)}: {lines} lines (split it by job; at most {MAX_LINES})"


def test_the_code_map_names_modules_that_exist_and_every_module():
    """docs/code-map.md is how a teacher finds a module: every path it names exists, every module is in it."""
    text = (ROOT / "docs" / "code-map.md").read_text()
    named = set(re.findall(r"`(jaxgrader/[\w/]+\.py|jaxgrader/[\w/]+/)`", text))
    for short in re.findall(r"`((?!jaxgrader/)(?:[a-z_]+/)?[a-z_]+\.py)`", text):  # `cli.py`, `classrun/run.py`
        in_grading = f"jaxgrader/grading/{short}"
        assert (ROOT / in_grading).exists() or (ROOT / short).exists(), f"docs/code-map.md names {short}: no such file"
        named.add(in_grading if (ROOT / in_grading).exists() else short)
    for path in sorted(named):
        assert (ROOT / path).exists(), f"docs/code-map.md names {path}, which does not exist"
    for name, path in sorted(_modules().items()):
        rel = path.relative_to(ROOT).as_posix()
        if path.name != "__init__.py":
            assert rel in named, f"docs/code-map.md does not name {rel}"
    for path in sorted((ROOT / "jaxgrader" / "checks").glob("[!_]*.py")):
        assert path.relative_to(ROOT).as_posix() in named, f"docs/code-map.md does not name {path.relative_to(ROOT)}"
