"""One piece of a student's cell, walked for what no answer needs (``tampering`` drives it; the lists are
``vocabulary``'s).

Each rule answers one question about a node and says it in one line: which module, attribute, name,
magic or string it is, and why no answer needs it. Attribute chains are judged once, whole (``a.b.c``
at its outermost node), with what they are used for: called, indexed, compared, stored to, or handed on.
"""

from __future__ import annotations

import ast
import re

from . import vocabulary as V
from .payloads import _dunder, string_findings

TYPE = "type()"  # the path of what ``type(x)`` returns: a class other code shares
# builtins that only look at a module handed to them
_LOOKS_ONLY = {"hasattr", "isinstance", "print", "repr", "str", "type", "id", "dir", "help", "callable", "bool", "hash"}
_TIMEIT_OPTIONS = re.compile(r"^\s*((-[nrp]\s*\d+|-[tcqo])\s+)*")


def _chain(node):
    """(root, attribute names) of ``a.b.c``."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return node, attrs[::-1]


def _literal(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def resolve(node, aliases: dict) -> str | None:
    """The dotted path an expression names when it is an imported module's attribute (``jnp.sum``:
    ``jax.numpy.sum``), ``type(...)`` or an alias of either; None otherwise."""
    root, attrs = _chain(node)
    if isinstance(root, ast.NamedExpr):
        root = root.value
    base = None
    if isinstance(root, ast.Name):
        base = aliases.get(root.id)
    elif isinstance(root, ast.Call) and isinstance(root.func, ast.Name):
        if root.func.id == "type" and len(root.args) == 1:
            base = TYPE
        elif root.func.id == "getattr" and len(root.args) >= 2 and _literal(root.args[1]):
            inner = resolve(root.args[0], aliases)
            base = f"{inner}.{_literal(root.args[1])}" if inner else None
    elif isinstance(root, (ast.IfExp, ast.BoolOp)):
        options = [root.body, root.orelse] if isinstance(root, ast.IfExp) else root.values
        base = next((p for p in (resolve(o, aliases) for o in options) if p), None)
    return ".".join([base] + attrs) if base else None


class CellScan(ast.NodeVisitor):
    """Walks one piece (``tampering.units``) and calls ``add(line, what)`` for each finding."""

    def __init__(self, names, vocabulary, offset: int, original: list[str], add, fixed_line: int | None = None):
        self.n, self.v, self.offset, self.original, self.add = names, vocabulary, offset, original, add
        self.fixed_line = fixed_line  # the line of a %time magic whose argument this scan reads
        self.parents: dict[int, ast.AST] = {}
        self.handled: set[int] = set()  # nodes a rule has judged already (a getattr call's name, a magic call)
        self.depth = 0  # inside functions, classes, lambdas, comprehensions
        self.declared_global: list[set[str]] = [set()]

    def run(self, tree) -> None:
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        self.visit(tree)

    def line(self, node) -> int:
        return self.fixed_line or self.offset + getattr(node, "lineno", 1)

    def flag(self, node, what: str) -> None:
        self.add(self.line(node), what)

    def parent(self, node):
        return self.parents.get(id(node))

    # ------------------------------------------------------------------ scopes and imports

    def generic_scope(self, node) -> None:
        self.depth += 1
        self.declared_global.append(set())
        self.generic_visit(node)
        self.declared_global.pop()
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = generic_scope
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = generic_scope

    def visit_Global(self, node) -> None:
        self.declared_global[-1].update(node.names)

    def visit_Import(self, node) -> None:
        for a in node.names:
            self.module(node, a.name, a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])

    def visit_ImportFrom(self, node) -> None:
        if node.level:
            self.flag(node, "a relative import, which no answer needs")
            return
        for a in node.names:
            path = f"{node.module}.{a.name}" if a.name != "*" else node.module
            self.module(node, path, a.asname or a.name, path)

    def module(self, node, path: str, name: str, bound: str) -> None:
        top = path.split(".")[0]
        if top not in self.v.modules and top not in self.v.limited and not self.allowed_path(path):
            self.flag(node, f"imports {top}, which no answer in this course needs")
        else:
            self.path(node, path, "import", None)
        if name != "*" and self.module_level(name) and self.n.course_imports.get(name, bound) != bound:
            self.flag(node, f"rebinds {name}, which the course's cells import as {self.n.course_imports[name]}")

    def allowed_path(self, path: str) -> bool:
        """Part of a module no answer needs whole, which answers may use (IPython.display)."""
        return any(path == p or path.startswith(p + ".") for p in self.v.paths)

    def module_level(self, name: str) -> bool:
        return self.depth == 0 or name in self.declared_global[-1]

    # ------------------------------------------------------------------ names

    def visit_Name(self, node) -> None:
        name, n = node.id, self.n
        if isinstance(node.ctx, ast.Store) and self.module_level(name):
            parent = self.parent(node)
            if name in n.course_imports and not (isinstance(parent, ast.Assign) and  # ``jnp = jax.numpy``: the same
                                                 resolve(parent.value, n.aliases) == n.course_imports[name]):
                self.flag(node, f"rebinds {name}, which the course's cells import as {n.course_imports[name]}")
            elif name in n.test_builtins:
                self.flag(node, f"rebinds the builtin {name}, which the course's cells and tests use")
        if not isinstance(node.ctx, ast.Load) or id(node) in self.handled:
            return
        parent = self.parent(node)
        if name in n.aliases and not (isinstance(parent, ast.Attribute) and parent.value is node):
            self.path(node, n.aliases[name], *self.context(node))
        if name in n.student:
            return
        if name in V.RUNS_CODE:
            self.flag(node, f"{name} {V.RUNS_CODE[name]}, which the grader cannot read")
        elif name in V.ATTRIBUTE_BUILTINS:
            self.flag(node, f"hands {name} to other code, to reach attributes by computed names")
        elif name in V.KERNEL_NAMES and name not in n.course:
            self.flag(node, f"{name} {V.KERNEL_NAMES[name]}")
        elif name in n.hidden:
            self.flag(node, f"looks up {name}, which only the hidden tests define: code that can tell which "
                            "test is running")
        elif name.startswith("_") and name not in n.course and name not in V.SAFE_UNDERSCORE_NAMES:
            self.flag(node, f"reads {name}, which no cell of the notebook defines (the kernel's history or "
                            "a hidden test's name)")

    # ------------------------------------------------------------------ attributes

    def visit_Attribute(self, node) -> None:
        parent = self.parent(node)
        if not (isinstance(parent, ast.Attribute) and parent.value is node):  # the whole chain, once
            _, attrs = _chain(node)
            store = isinstance(node.ctx, (ast.Store, ast.Del))
            for k, attr in enumerate(attrs):
                last = k == len(attrs) - 1
                if _dunder(attr) and (store and last or attr not in V.SAFE_DUNDERS) and id(node) not in self.handled:
                    self.flag(node, f"{'sets' if store and last else 'uses'} {attr}, which reaches the "
                                    "interpreter's internals")
                elif attr in V.FRAME_ATTRIBUTES:
                    self.flag(node, f"inspects frames or code ({attr}): code that can tell which cell runs it "
                                    "or who calls it")
            path = resolve(node, self.n.aliases)
            if path:
                self.path(node, path, *self.context(node))
            elif store and "__class__" in attrs:
                self.flag(node, "changes a class that other code shares (through __class__)")
        self.generic_visit(node)

    def context(self, node) -> tuple[str, ast.AST | None]:
        """What an expression naming a module's attribute is used for."""
        parent = self.parent(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return "call", parent
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return "subscript", parent
        if isinstance(parent, ast.Compare) and node in parent.comparators and all(
                isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
            return "in", parent
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            return "store", None
        value = node
        while isinstance(parent, (ast.IfExp, ast.BoolOp)) and value is not getattr(parent, "test", None):
            value, parent = parent, self.parent(parent)  # ``xp = jnp if gpu else np``: either is the alias
        if isinstance(parent, ast.Assign) and parent.value is value and all(isinstance(t, ast.Name)
                                                                            for t in parent.targets):
            return "alias", parent
        return "value", self.parent(node)

    def path(self, node, path: str, use: str, holder) -> None:
        """The rules on a module's attribute (``jax.numpy.sum``), by what it is used for."""
        segs = path.split(".")
        reached = next((i for i in range(1, len(segs)) if segs[i] in V.REACHED_MODULES), None)
        if reached is not None:  # ``numpy.os`` is os
            segs = segs[reached:]
        path, top = ".".join(segs), segs[0]
        if top == TYPE:
            if use == "store" or (use == "subscript" and not isinstance(holder.ctx, ast.Load)):
                self.flag(node, "changes a class that other code shares (through type(...))")
            return
        if top not in self.v.modules and top not in self.v.limited and not self.allowed_path(path):
            if use != "import":
                self.flag(node, f"uses {path}, which no answer in this course needs")
            return
        private = [s for s in segs[1:] if s.startswith("_") and not _dunder(s)]
        if private:
            self.flag(node, f"reaches into {path}, a library's private internals")
            return
        denied = next((d for d in self.v.denied if path == d or path.startswith(d + ".")), None)
        if denied:
            self.flag(node, f"uses {denied}, which hooks into JAX itself and no answer needs")
            return
        if top in self.v.limited and len(segs) > 1:
            if segs[1] not in self.v.limited[top]:
                self.flag(node, f"uses {top}.{segs[1]}, which no answer in this course needs")
                return
            if segs[:2] == ["os", "environ"] or path == "os.getenv":
                self.environ(node, segs, use, holder)
                return
        if use == "call":
            self.call_rules(node, path, holder)
        elif use == "store" and len(segs) > 1:
            self.flag(node, f"rebinds {path}, an attribute of an imported module")
        elif use == "subscript" and not isinstance(holder.ctx, ast.Load):
            self.flag(node, f"changes an entry of {path}, which belongs to an imported module")
        elif use == "value" and path in self.n.modules and not isinstance(node, ast.Attribute) and self.handed(holder):
            self.flag(node, f"hands the module {path} to other code, which could change it")

    def handed(self, holder) -> bool:
        """Whether a module used as a value goes where other code can change it: an argument (but to ``hasattr``,
        ``isinstance``, ``print``, ...), a container, a default, a return value, an attribute or entry."""
        if isinstance(holder, ast.Call):
            return not (isinstance(holder.func, ast.Name) and holder.func.id in _LOOKS_ONLY)
        return isinstance(holder, (ast.keyword, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Return, ast.Yield,
                                   ast.arguments, ast.Starred, ast.Assign, ast.AnnAssign, ast.Lambda, ast.NamedExpr))

    def call_rules(self, node, path: str, call) -> None:
        if path == "jax.config.update":
            flag = _literal(call.args[0]) if call.args else None
            if flag not in self.v.jax_flags:
                self.flag(node, f"changes JAX's setting {flag or '(computed)'}, which no answer needs")
        elif path == "warnings.catch_warnings" and any(
                k.arg == "record" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                for k in call.keywords):
            self.flag(node, "records warnings with where they were raised: code that can tell who calls it")
        elif path in ("operator.attrgetter", "operator.methodcaller"):
            names = [_literal(a) for a in call.args[:1 if path.endswith("methodcaller") else None]]
            if not names or None in names:
                self.flag(node, f"{path} with a computed name reaches attributes the grader cannot read")
            else:
                for name in names:
                    self.attribute_name(node, name)

    def environ(self, node, segs: list[str], use: str, holder) -> None:
        """os.environ and os.getenv: reading the course's own variables is an answer's; the rest is not."""
        method = segs[2] if len(segs) > 2 else ("getenv" if segs[1] == "getenv" else "")
        if use in ("alias", "import"):
            return
        if use == "subscript" and not method:
            key = _literal(holder.slice)
            self.env_key(node, key, write=not isinstance(holder.ctx, ast.Load))
        elif use == "in" and not method:
            self.env_key(node, _literal(holder.left), write=False)
        elif use == "call" and method in ("get", "getenv", "setdefault"):
            key = _literal(holder.args[0]) if holder.args else None
            self.env_key(node, key, write=method == "setdefault")
        else:
            self.flag(node, "uses the whole environment (os.environ), which holds the grading seed")

    def env_key(self, node, key: str | None, write: bool) -> None:
        if key == V.SEED_VARIABLE:
            self.flag(node, f"reads the grading seed ({V.SEED_VARIABLE})")
        elif key is None:
            self.flag(node, "reads or changes an environment variable named by a computed string")
        elif write and key not in self.v.environ_write:
            self.flag(node, f"changes the environment variable {key}")
        elif not write and key not in self.v.environ_read:
            self.flag(node, f"reads the environment variable {key}, which no answer needs")

    def attribute_name(self, node, name: str, store: bool = False) -> None:
        for attr in name.split("."):
            if _dunder(attr) and (store or attr not in V.SAFE_DUNDERS):
                self.flag(node, f"{'sets' if store else 'uses'} {attr}, which reaches the interpreter's internals")
            elif attr in V.FRAME_ATTRIBUTES:
                self.flag(node, f"inspects frames or code ({attr}): code that can tell which cell runs it")

    # ------------------------------------------------------------------ calls

    def visit_Call(self, node) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in V.ATTRIBUTE_BUILTINS and func.id not in self.n.student:
            self.handled.add(id(func))
            self.attribute_call(node, func.id, node.args)
        elif (isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__", "__getattribute__")
              and (isinstance(func.value, ast.Name) and func.value.id == "object"
                   or isinstance(func.value, ast.Call) and getattr(func.value.func, "id", "") == "super")):
            self.handled.add(id(func))  # object.__setattr__(self, "x", v) in a frozen dataclass: a setattr
            kind = {"__setattr__": "setattr", "__delattr__": "delattr", "__getattribute__": "getattr"}[func.attr]
            self.attribute_call(node, kind, node.args)
        elif self.is_magic(func):
            self.magic(node, func.attr)
            return
        self.generic_visit(node)

    def attribute_call(self, node, kind: str, args) -> None:
        name = _literal(args[1]) if len(args) > 1 else None
        if name is None:
            self.flag(node, f"{kind} with a computed name reaches attributes the grader cannot read")
            return
        self.attribute_name(node, name, store=kind != "getattr")
        owner = resolve(args[0], self.n.aliases) if args else None
        if owner:
            self.handled.add(id(args[0]))  # judged here, as the owner of an attribute
        if owner and kind != "getattr":
            self.flag(node, f"{kind} on {owner}, which changes what other code imports")
        elif owner:
            self.path(node, f"{owner}.{name}", "value", None)

    def is_magic(self, func) -> bool:
        """A call IPython wrote for a magic or a shell escape (the line as typed has no get_ipython)."""
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
                and getattr(func.value.func, "id", "") == "get_ipython"):
            return False
        index = func.lineno - 1
        typed = self.original[index] if 0 <= index < len(self.original) else ""
        return func.attr in ("run_line_magic", "run_cell_magic", "system", "getoutput") and "get_ipython" not in typed

    def magic(self, node, kind: str) -> None:
        args = [_literal(a) or "" for a in node.args]
        name, arg = (args + ["", ""])[:2]
        if kind in ("system", "getoutput"):
            if not self.plain_pip(name):
                self.flag(node, "runs a shell command (!...), which no answer needs")
        elif kind == "run_cell_magic" or name not in self.v.line_magics:
            self.flag(node, f"the magic %{name}, which no answer needs")
        elif name == "pip" and not self.plain_pip("pip " + arg):
            self.flag(node, "%pip with more than package names")
        elif name == "config" and not arg.strip().startswith("InlineBackend."):
            self.flag(node, "%config of the kernel, which no answer needs")
        elif name in ("time", "timeit"):
            code = _TIMEIT_OPTIONS.sub("", arg) if name == "timeit" else arg
            try:
                tree = ast.parse(code)
            except SyntaxError:
                return
            CellScan(self.n, self.v, 0, [], self.add, fixed_line=self.line(node)).run(tree)

    def plain_pip(self, command: str) -> bool:
        """``pip install`` of packages by name (in the sandbox there is no network: it installs nothing), or pip
        saying what is installed."""
        if V.PIP_LOOKS.fullmatch(command.strip()):
            return True
        match = V.PIP_COMMAND.match(command.strip())
        if not match:
            return False
        words = [w[1:-1] if len(w) > 2 and w[0] == w[-1] and w[0] in "'\"" else w
                 for w in command.strip()[match.end():].split()]  # 'jax[cpu]': quoted for the shell
        return bool(words) and all(w in V.PIP_FLAGS or V.PIP_REQUIREMENT.fullmatch(w) for w in words)

    # ------------------------------------------------------------------ strings

    def visit_Constant(self, node) -> None:
        if isinstance(node.value, (str, bytes)):
            for what in string_findings(node.value):
                self.flag(node, what)
