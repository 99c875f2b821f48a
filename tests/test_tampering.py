"""The tampering scan (jaxgrader/grading/verdict/tampering.py): what no answer in this course needs, read in the
submission itself. Fast: no kernel runs.

Each class of tampering, typed into a solution cell or pasted as a cell of its own, is found on its line; and no
honest answer is: every answer the trials grade (the solutions of every lesson in source/, whatever lessons exist,
every catalogued wrong answer, the independent answers, the honest rewrites in every binding style, in every
edition's release), the demo class, and a few honest habits (timing magics, pip, Keras's backend, a pickled
checkpoint). The informed forger is found.
"""

from __future__ import annotations

import pytest
from nbformat.v4 import new_code_cell

from jaxgrader.grading import trials
from jaxgrader.grading.course.config import load_config
from jaxgrader.grading.course.coursedir import coursedir_of, folder, source_notebooks
from jaxgrader.grading.course.notebooks import fill_answers, read_notebook
from jaxgrader.grading.forger import FORGER
from jaxgrader.grading.verdict.holds import code_hash, hold_line
from jaxgrader.grading.verdict.tampering import ADDED, findings

from .conftest import ASSIGNMENTS, ROOT

SOURCE = read_notebook(ROOT / "source" / "lesson1" / "pure_functions.ipynb")
RELEASE = read_notebook(ROOT / "release" / "lesson1" / "pure_functions.ipynb")
FIRST = next(c.metadata.nbgrader.grade_id for c in RELEASE.cells if c.metadata.get("nbgrader", {}).get("solution"))

# (name, code typed into the first solution cell, the line found, words of what was found there)
ATTACKS = [
    ("event hook", "def look(info):\n    pass\nget_ipython().events.register('pre_run_cell', look)", 3, "get_ipython"),
    ("input transformer", "shell = get_ipython()\nshell.input_transformers_post.append(str)", 1, "get_ipython"),
    ("ast transformer", "import IPython\nIPython.get_ipython().ast_transformers.append(None)", 1, "imports IPython"),
    ("the shell from IPython.display's module", "import IPython.display\nIPython.core.getipython.get_ipython()", 2,
     "IPython.core"),
    ("module attribute", "x = 1\njax.jit = lambda f: f", 2, "rebinds jax.jit"),
    ("submodule attribute", "import numpy as np\nnp.random.seed = print", 2, "rebinds numpy.random.seed"),
    ("alias of a module", "import jax as j\nj.numpy.sum = None", 2, "rebinds jax.numpy.sum"),
    ("module assigned to a name", "m = jnp\n\nm.linalg.norm = abs", 3, "rebinds jax.numpy.linalg.norm"),
    ("augmented store", "jax.config.x += 1", 1, "rebinds jax.config.x"),
    ("deleted attribute", "del jax.vmap", 1, "rebinds jax.vmap"),
    ("module handed on", "def patch(m):\n    m.jit = None\npatch(jax)", 3, "hands the module jax"),
    ("a class of jax's", "type(jnp.zeros(1)).sum = None", 1, "changes a class"),
    ("sys.modules", "import sys\nsys.modules['jaxgrader.checks.report'].report = print", 2, "sys.modules"),
    ("sys.modules of the course's import", "x = sys.modules", 1, "sys.modules"),
    ("builtins", "import builtins\nbuiltins.range = lambda n: [0]", 1, "imports builtins"),
    ("__builtins__", "__builtins__.range = None", 1, "__builtins__"),
    ("a shadowed builtin", "range = lambda n: [0]", 1, "rebinds the builtin range"),
    ("importlib", "m = importlib.import_module('jax')", 1, "importlib.import_module"),
    ("exec of a built string", "code = 'import ' + 'sys'\nexec(code)", 2, "exec runs code from a string"),
    ("eval", "f = eval('lambda x: x')", 1, "eval"),
    ("compile", "c = compile('1', 'f', 'eval')", 1, "compile"),
    ("__import__", "s = __import__('s' + 'ys')", 1, "__import__"),
    ("globals", "globals()['step'] = None", 1, "globals"),
    ("os.environ written", "import os\nos.environ['XLA_FLAGS'] = '--xla_backend_optimization_level=3'", 2,
     "changes the environment variable XLA_FLAGS"),
    ("os.environ updated", "import os\nos.environ.update(A='1')", 2, "the whole environment"),
    ("the seed read", "import os\nseed = int(os.environ['JAXGRADER_SEED'])", 2, "reads the grading seed"),
    ("the seed by getenv", "import os\nseed = os.getenv('JAXGRADER_SEED')", 2, "reads the grading seed"),
    ("the seed by a computed key", "from os import environ\nk = 'JAXGRADER' + '_SEED'\ns = environ[k]", 3,
     "computed string"),
    ("the whole environment", "import os\nenv = dict(os.environ)", 2, "the whole environment"),
    ("the environment of a module", "np.os.environ['A'] = '1'", 1, "changes the environment variable A"),
    ("the seed through a format string", "import os\ns = '{0.environ[JAXGRADER_SEED]}'.format(os)", 2,
     "format string"),
    ("/proc", "text = open('/proc/self/environ').read()", 1, "process and device files"),
    ("frames", "import sys\ndef caller():\n    return sys._getframe(1).f_globals", 3, "f_globals"),
    ("a traceback's frames", "def who():\n    try:\n        raise ValueError\n    except ValueError as e:\n"
                             "        return e.__traceback__.tb_frame.f_back", 5, "__traceback__"),
    ("inspect", "import inspect\ncallers = inspect.stack()", 1, "imports inspect"),
    ("the running cell's text", "def step(x):\n    if 'cell_time' in In[-1]:\n        return x\n    return x", 2,
     "input history"),
    ("IPython's history", "def step(x):\n    return len(_ih)", 2, "reads _ih"),
    ("a hidden test's name", "def step(x):\n    timed = '_nonce' in globals() or _workloads\n    return x", 2,
     "looks up _workloads"),
    ("setattr with a computed name", "name = 'ji' + 't'\nsetattr(jax, name, None)", 2, "setattr with a computed name"),
    ("setattr on a module", "setattr(jax, 'jit', None)", 1, "setattr on jax"),
    ("getattr with a computed name", "f = getattr(jax, 'ji' + 't')", 1, "getattr with a computed name"),
    ("getattr handed on", "import functools\nget = functools.partial(getattr, jax)", 2, "hands getattr"),
    ("a dunder reached by getattr", "g = getattr(step, '__globals__')", 1, "__globals__"),
    ("jax.monitoring", "jax.monitoring.register_event_listener(print)", 1, "jax.monitoring"),
    ("jax's private internals", "from jax._src import core", 1, "private internals"),
    ("a JAX setting", "jax.config.update('jax_compilation_cache_dir', '/tmp/x')", 1, "jax_compilation_cache_dir"),
    ("warnings with their callers", "import warnings\nwith warnings.catch_warnings(record=True) as w:\n    pass", 2,
     "records warnings"),
    ("%load_ext", "x = 1\n%load_ext autoreload\n%autoreload 2", 2, "the magic %load_ext"),
    ("%%writefile", "%%writefile helper.py\nimport jax\njax.jit = None\n", 1, "the cell magic %%writefile"),
    ("a written module imported", "import helper", 1, "imports helper"),
    ("a Python file written", "open('tqdm_fast.py', 'w').write('')", 1, "names a Python file"),
    ("a shell command", "x = 1\n!cat /proc/self/environ", 2, "runs a shell command"),
    ("a harmless shell command", "!echo hello", 1, "runs a shell command"),
    ("%env", "%env JAX_ENABLE_X64=1", 1, "the magic %env"),
    ("a hook inside %time", "%time get_ipython().events.register('pre_run_cell', print)", 1, "get_ipython"),
    ("a hook inside %%time", "%%time\nx = 1\nIn[-1]", 3, "input history"),
    ("a pickle that runs code", "import pickle\nx = pickle.load(open('a', 'rb'))\n"
                                "y = b\"cbuiltins\\nexec\\n(S'import sys'\\ntR.\"", 3, "calls builtins.exec"),
    ("pickle.loads", "import pickle\nx = pickle.loads(data)", 2, "pickle.loads"),
    ("a relative import", "from . import helper", 1, "relative import"),
]

HONEST = [
    "from __future__ import annotations\nimport math",
    "%time y = jnp.ones(3).sum()\n%timeit -n 3 -r 2 jnp.ones(3)",
    "%%time\ny = jnp.ones(3)\n%time z = y + 1",
    "!pip install -q optax\n%pip install -U 'jax[cpu]'\n!pip install flax==0.11.2",
    "%matplotlib inline\n%config InlineBackend.figure_format = 'retina'\nimport matplotlib.pyplot as plt\nplt.plot([1])",
    "jax.jit?",
    "!pip --version\n!pip list\n!pip show optax",
    "import os\nos.environ['KERAS_BACKEND'] = 'jax'\nFAST = bool(os.environ.get('CI') or os.getenv('NBGRADER_EXECUTION'))",
    "import os\nos.environ['XLA_PYTHON_CLIENT_PREALLOCATE'] = 'false'\nos.environ.setdefault('JAX_ENABLE_X64', '1')",
    "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass S:\n    a: int\n    def __post_init__(self):\n"
    "        object.__setattr__(self, 'a', int(self.a))",
    "f = getattr(jax.nn, 'relu')\nprint(type(f).__name__, jax.__version__, f.__name__)",
    "jax.config.update('jax_enable_x64', True)\njax.config.update('jax_debug_nans', False)",
    "import pickle\nwith open('ckpt.pkl', 'wb') as fh:\n    pickle.dump({'a': 1}, fh)\n"
    "with open('ckpt.pkl', 'rb') as fh:\n    state = pickle.load(fh)",
    "for _ in range(3):\n    pass\n_, b = 1, 2\nprint(_)",
    "import warnings\nwith warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n"
    "import functools, itertools, collections, math, time\nfrom pathlib import Path\nimport tempfile",
    "class Model:\n    def __init__(self):\n        self.calls = 0\n    def __call__(self, x):\n"
    "        self.calls += 1\n        return super().__repr__()",
    "xp = jnp if True else np\nnorm = xp.linalg.norm\nvalues = jax.tree.map(jnp.sum, {'a': jnp.ones(2)})",
    "def loss(params, x):\n    '''The loss. See the lecture, section 2.'''\n    return jnp.mean(x @ params)",
    "from IPython.display import clear_output\nimport IPython.display as ipd\nclear_output(wait=True)\n"
    "ipd.display(jnp.ones(2))",
    "jnp = jax.numpy\nimport numpy as np\nprint(dir(jnp)[:3], np)\nstate = TrainState(1, 2)._replace(step=2)",
]


def _with(code: str, added: str | None = None):
    nb = fill_answers(RELEASE, {FIRST: code})
    if added is not None:
        nb.cells.insert(3, new_code_cell(added))
    return nb


@pytest.mark.parametrize("name, code, line, words", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_each_class_of_tampering_is_found_on_its_line(name, code, line, words):
    found = findings(_with(code), SOURCE)
    assert any(f.line == line and words in f.what for f in found), (name, [(f.line, f.what) for f in found])
    first = next(f for f in found if f.line == line and words in f.what)
    assert first.where == FIRST and first.text == code.splitlines()[line - 1].strip()


def test_a_pasted_cell_is_found_as_an_added_cell():
    nb = _with("", added="\n\nimport sys  # the course's own setup imports it: what it is used for counts\n"
                        "sys.settrace(print)\nprint(sys.version)\nlast = Out")
    found = findings(nb, SOURCE)
    assert [(f.cell, f.where, f.line) for f in found] == [(3, ADDED, 4), (3, ADDED, 6)], found
    assert "sys.settrace" in found[0].what and "output history" in found[1].what
    assert hold_line([f.__dict__ for f in found]).endswith(f"({ADDED} (cell 3), line 4: {found[0].what}; and 1 more)")


@pytest.mark.parametrize("code", HONEST)
def test_honest_habits_are_not_found(code):
    assert findings(_with(code), SOURCE) == []


def test_the_course_cells_are_not_read_and_a_cell_that_does_not_parse_is_no_finding():
    """Locked cells are restored by nbgrader (their code is the course's: it imports sys and subprocess, and the
    hidden tests import jaxgrader); a cell that does not parse fails on its own."""
    assert findings(SOURCE, SOURCE) == []
    assert findings(_with("def f(:\n    import sys; sys.modules"), SOURCE) == []
    assert findings(_with("x = jax" + ".b" * 3000), SOURCE) == []  # too deep for Python to compile, too
    unlocked = _with("")
    test = next(c for c in unlocked.cells if c.metadata.get("nbgrader", {}).get("grade")
                and not c.metadata.nbgrader.get("solution"))
    test.source += "\nimport jaxgrader"
    assert findings(unlocked, SOURCE) == []
    test.metadata.nbgrader["locked"] = False  # a course cell nbgrader would not restore is the student's
    assert [f.what for f in findings(unlocked, SOURCE)] == ["imports jaxgrader, which no answer in this course needs"]


def test_the_informed_forger_is_found():
    found = findings(_with(FORGER), SOURCE)
    whats = " | ".join(f.what for f in found)
    assert "imports jaxgrader" in whats and "get_ipython" in whats and "imports inspect" in whats, whats


def test_the_code_hash_changes_with_the_students_code_only():
    a, b = _with("x = 1"), _with("x = 2")
    assert code_hash(a, SOURCE) != code_hash(b, SOURCE)
    c = _with("x = 1")
    c.cells[0].source += "\n# a locked cell's text is the course's"
    c.cells[0].metadata.setdefault("nbgrader", {}).update(locked=True, grade_id="install")
    assert code_hash(a, SOURCE) == code_hash(c, SOURCE)


def _typed_into(assignment: str, student: str, notebook: str):
    """The notebook a trial student types into (an edition's release for ``-ko`` students); the source where a
    lesson being written has no release yet."""
    coursedir = coursedir_of(load_config(ROOT))
    found = trials.edition_release(ROOT, assignment, student) or folder(coursedir, "release", ".", assignment)
    found = found / f"{notebook}.ipynb"
    return read_notebook(found if found.is_file() else folder(coursedir, "source", ".", assignment) / found.name)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_honest_answer_is_found(assignment):
    """Every trial student but the forged ones (solution, release, catalogued wrong answers one by one, independent
    answers, every binding style, each edition), and the demo class: no finding. The forged ones: found."""
    from jaxgrader.grading.demo import answers_for

    students, _ = trials.trial_students(ROOT, assignment, packed=False)
    source = folder(coursedir_of(load_config(ROOT)), "source", ".", assignment)
    sources = {nb: read_notebook(source / f"{nb}.ipynb") for nb in source_notebooks(ROOT, assignment)}
    for demo in ("ada", "bo", "cy"):
        students[f"demo-{demo}"] = {nb: answers_for(ROOT, assignment, nb, demo) for nb in sources}
        students[f"demo-{demo}-ko"] = students[f"demo-{demo}"]  # hana types cy's answers into the Korean release
    found, forged = [], {}
    for student, notebooks in students.items():
        for nb, answers in notebooks.items():
            typed = _typed_into(assignment, student, nb)
            submitted = fill_answers(typed, answers) if answers else typed
            here = findings(submitted, sources[nb])
            if student.startswith("forged-"):
                forged[student] = forged.get(student, 0) + len(here)
            else:
                found += [f"{student} {nb}: {f.describe()}: {f.text}" for f in here]
    assert not found, "\n".join(found[:20])
    assert forged and all(forged.values()), forged
