"""Strings and bytes in a student's code that name what no answer needs (``scan`` reads every literal with
:func:`string_findings`): the kernel's process files, a Python file that code could write and then import, the
grading seed, a format string whose fields reach the interpreter (``"{0.environ[...]}".format(os)``), and a
pickle that calls something when loaded (code hidden in data).
"""

from __future__ import annotations

import pickletools
import re
import string

from . import vocabulary as V


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def string_findings(value: str | bytes) -> list[str]:
    """What a string or bytes literal names that no answer needs: the kernel's process files, a Python file,
    the grading seed, a format field that reaches the interpreter, a pickle that calls something."""
    found = []
    if isinstance(value, str):
        if V.SYSTEM_PATH.search(value):
            found.append(f"names {value[:60]!r}, the kernel's process and device files")
        if V.PYTHON_FILE.fullmatch(value):
            found.append(f"names a Python file ({value[:60]!r}), which code can write and then import")
        if V.SEED_VARIABLE in value:
            found.append(f"names the grading seed ({V.SEED_VARIABLE})")
        if "{" in value and ("." in value or "[" in value):
            found += _format_fields(value)
        data = value.encode("latin-1", errors="ignore") if value.endswith(".") else b""
    else:
        data = value
    called = _pickled_call(data) if data.endswith(b".") and len(data) >= 4 else None
    if called:
        found.append(f"a pickle written into the code, which calls {called} when loaded")
    return found


def _format_fields(value: str) -> list[str]:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(value) if f]
    except ValueError:
        return []
    found = []
    for field in fields:
        attrs, keys = re.findall(r"\.(\w+)", field), re.findall(r"\[([^\]]*)\]", field)
        bad = [a for a in attrs if (_dunder(a) and a not in V.SAFE_DUNDERS) or a in V.FRAME_ATTRIBUTES
               or a in ("environ", "modules") or a in V.REACHED_MODULES]
        if bad or V.SEED_VARIABLE in keys:
            found.append(f"a format string that reaches {(bad or keys)[0]!r}")
    return found


def _pickled_call(data: bytes) -> str | None:
    try:
        ops = list(pickletools.genops(data))
    except Exception:  # noqa: BLE001  not a pickle
        return None
    if not ops or ops[-1][0].name != "STOP":
        return None
    for op, arg, _ in ops:
        if op.name in ("GLOBAL", "INST"):
            return str(arg).replace(" ", ".")
    return "an object" if any(op.name in ("STACK_GLOBAL", "REDUCE", "OBJ", "NEWOBJ", "NEWOBJ_EX")
                              for op, _, _ in ops) else None
