"""What an answer in this course may use, and how the tampering scan names what it may not.

The scan (``tampering``) defines the class of tampering by what answers need, not by a list of attacks:
an answer to these lessons computes with JAX, NumPy and a few libraries, and needs nothing of the
kernel's machinery. So imports outside :data:`ALLOWED_MODULES`, attributes of the modules in
:data:`LIMITED_MODULES` outside their lists, IPython magics outside :data:`LINE_MAGICS` /
:data:`CELL_MAGICS`, JAX settings outside :data:`JAX_FLAGS`, and the interpreter's introspection (dunder
attributes outside :data:`SAFE_DUNDERS`, frames, code objects, builtins that run or reach code by name)
are findings. Each list was set by reading every solution, lecture and catalogued answer of the course
(``tests/test_tampering.py`` scans them all and requires no finding); a teacher extends them with
``c.FindTampering.*`` (``tampering.FindTampering``).
"""

from __future__ import annotations

import re

# Modules an answer may import and use freely: the course's libraries, and the standard library's pure
# helpers (data structures, maths, text, files a checkpoint writes).
ALLOWED_MODULES = (
    "jax", "numpy", "optax", "keras", "flax", "orbax", "chex", "einops", "sklearn", "scipy", "matplotlib", "tqdm",
    "pandas", "functools", "itertools", "operator", "math", "cmath", "statistics", "random", "collections",
    "dataclasses", "typing", "typing_extensions", "enum", "abc", "numbers", "copy", "time", "datetime", "pathlib",
    "json", "csv", "re", "string", "textwrap", "pprint", "heapq", "bisect", "fractions", "decimal", "contextlib",
    "io", "tempfile", "__future__",
)
# Parts of modules outside that list which answers may use: IPython's display functions (clear_output in a
# training loop's progress), not its shell.
ALLOWED_PATHS = ("IPython.display",)
# Modules an answer may import for a few attributes only: files and the variables the course's own FAST
# line reads (os), the versions a setup prints (sys), silencing a warning (warnings), a checkpoint written
# and read back from a file (pickle: ``loads`` of bytes in memory would run whatever a literal holds).
LIMITED_MODULES = {
    "os": ("path", "environ", "getenv", "makedirs", "mkdir", "listdir", "scandir", "getcwd", "cpu_count", "sep",
           "remove", "unlink", "rmdir", "rename", "replace", "walk", "stat", "fspath", "PathLike", "linesep",
           "curdir", "pardir", "devnull"),
    "sys": ("version", "version_info", "platform", "maxsize", "float_info", "stdout", "stderr", "getsizeof"),
    "warnings": ("filterwarnings", "simplefilter", "catch_warnings", "warn", "resetwarnings"),
    "pickle": ("dump", "dumps", "load", "HIGHEST_PROTOCOL", "DEFAULT_PROTOCOL", "PicklingError", "UnpicklingError"),
}
# Parts of allowed modules that hook into JAX itself: listeners on every compilation, the profiler.
DENIED_PATHS = ("jax.monitoring", "jax.profiler", "jax.experimental.compilation_cache")
# Environment variables an answer may write: Keras's backend (set before ``import keras``, as the Keras guide
# does), what JAX computes with (as the allowed jax_flags choose it) and quiet or memory settings copied from GPU
# notebooks. Not XLA_FLAGS: how XLA compiles is the grader's setting (its optimisation level). And read: those,
# the course's FAST line's, and lesson 6's devices. JAXGRADER_SEED is the grading seed.
ENVIRON_WRITE = ("KERAS_BACKEND", "JAX_ENABLE_X64", "JAX_PLATFORMS", "TF_CPP_MIN_LOG_LEVEL",
                 "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION")
ENVIRON_READ = ENVIRON_WRITE + ("CI", "NBGRADER_EXECUTION", "XLA_FLAGS")
SEED_VARIABLE = "JAXGRADER_SEED"
# ``jax.config.update`` flags that change what an answer computes or how it reports, not how the grader
# times or compiles it (the persistent cache, the matmul precision and the rest are findings).
JAX_FLAGS = (
    "jax_enable_x64", "jax_debug_nans", "jax_debug_infs", "jax_disable_jit", "jax_log_compiles",
    "jax_explain_cache_misses", "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion", "jax_num_cpu_devices",
    "jax_platforms", "jax_platform_name", "jax_default_prng_impl", "jax_threefry_partitionable",
    "jax_check_tracer_leaks", "jax_traceback_filtering", "jax_enable_checks",
)
# IPython magics an answer may use: timing, plots, help, installing a package by name, the inline backend's
# settings (%config InlineBackend.*). Cell magics whose body is Python are scanned as Python.
LINE_MAGICS = ("time", "timeit", "matplotlib", "pinfo", "pinfo2", "pip", "config")
CELL_MAGICS = ("time", "timeit", "capture")
PIP_FLAGS = {"-q", "-qq", "-qqq", "--quiet", "-U", "--upgrade", "--no-deps", "--pre"}
PIP_REQUIREMENT = re.compile(r"[A-Za-z][\w.\-]*(\[[\w,\-]+\])?([=<>!~]=?[\w.*]+(,[=<>!~]=?[\w.*]+)*)?")
PIP_COMMAND = re.compile(r"(pip3?|python3? -m pip) install\b")
PIP_LOOKS = re.compile(r"(pip3?|python3? -m pip) (--version|-V|list|freeze|show( [\w.\-]+)+)\s*")  # reads only

# Dunder attributes an answer reads: a class's own protocol, names and versions, a wrapped function.
SAFE_DUNDERS = frozenset({
    "__init__", "__call__", "__name__", "__qualname__", "__doc__", "__class__", "__version__", "__module__",
    "__len__", "__getitem__", "__setitem__", "__iter__", "__next__", "__repr__", "__str__", "__eq__", "__ne__",
    "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__", "__contains__", "__enter__", "__exit__",
    "__post_init__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__matmul__",
    "__rmatmul__", "__truediv__", "__rtruediv__", "__floordiv__", "__pow__", "__neg__", "__abs__", "__wrapped__",
    "__array__", "__jax_array__", "__annotations__", "__dataclass_fields__", "__new__", "__format__",
})
# Names an answer reads that start with "_" without binding them (any name a student's cell binds is fine).
SAFE_UNDERSCORE_NAMES = frozenset({"__name__"})
# Frames, tracebacks and code objects: how code learns which cell runs it, or who calls it.
FRAME_ATTRIBUTES = frozenset({
    "f_back", "f_globals", "f_locals", "f_code", "f_builtins", "f_lineno", "f_lasti", "f_trace", "f_trace_lines",
    "f_trace_opcodes", "tb_frame", "tb_next", "tb_lineno", "tb_lasti", "gi_frame", "gi_code", "gi_yieldfrom",
    "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "co_code", "co_consts", "co_names", "co_varnames",
    "co_filename", "co_name", "co_firstlineno", "co_lines", "co_positions", "co_qualname", "source_info",
})
# Builtins that run code given as text, import by name, or reach a namespace's variables by name.
RUNS_CODE = {"exec": "runs code from a string", "eval": "runs code from a string",
             "compile": "compiles code from a string", "__import__": "imports a module by name",
             "globals": "reaches the notebook's variables by name", "locals": "reaches variables by name",
             "vars": "reaches an object's or the notebook's variables by name", "breakpoint": "starts a debugger",
             "__build_class__": "builds classes by hand"}
ATTRIBUTE_BUILTINS = ("getattr", "setattr", "delattr")
# The notebook kernel's own names (IPython): the shell, and the history that holds the running cell's text.
KERNEL_NAMES = {"get_ipython": "reaches into the notebook kernel (IPython)",
                "In": "reads the notebook's input history (IPython), which holds the running cell's text",
                "Out": "reads the notebook's output history (IPython)"}
# Module names that, reached as an attribute of another module (``numpy.os``), are that module.
REACHED_MODULES = ("os", "sys", "builtins", "importlib", "inspect", "IPython", "ipykernel", "jaxgrader",
                   "subprocess", "ctypes", "gc", "traceback", "logging", "threading", "signal", "code", "runpy",
                   "marshal", "site")
# Strings that name the kernel's process files, or a Python file that code could write and then import.
SYSTEM_PATH = re.compile(r"^/?(proc|sys)(/|$)|^/dev(/|$)")
PYTHON_FILE = re.compile(r"^[\w./\\-]*\.(py|pyc|pth|so)$")
