"""Holding for review: a submission whose code has tampering findings (``tampering``) keeps its value parts;
its cost and artifact parts count only once a teacher has read the code and released it.

:class:`FindTampering`, an nbgrader preprocessor placed between execution and the ``Verdict`` in
``c.Autograde.autograde_preprocessors``, reads the notebook that ran (its student cells, against the
instructor's notebook in ``source/``), writes what it found into the notebook's metadata
(``jaxgrader.tampering``: the findings, the code's hash, whether a teacher released it) and, unless the
code's hash is one a teacher released (``c.FindTampering.released``, which ``jaxgrader review`` fills
through the class run), hands the ``Verdict`` a hold: every passed part whose evidence is ``cost`` or
``artifact`` then fails with :data:`HOLD`, marked ``held``. A part that failed on its own keeps its reason.

Why only those: a value compared with the reference on this run's inputs is evidence whatever the kernel
did, but the grader's clock and the programs and parameters a kernel hands over are what a hooked kernel
stages (a cell jitted only while it is timed, a program exported in another's place).
"""

from __future__ import annotations

import dataclasses
import hashlib

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Dict, List, Unicode

from . import vocabulary as V
from .tampering import Vocabulary, findings, student_cells

HELD_EVIDENCE = ("cost", "artifact")
# the verdict's sentence for a held part (editions/sentences.py translates it); {finding}: the first finding
HOLD = ("held for review: this notebook has code that no answer needs, and your teacher reads it before this "
        "check counts ({finding})")
META = "tampering"  # nb.metadata.jaxgrader.tampering
MAX_FINDINGS = 50  # kept per notebook (the count says how many there were)


def code_hash(nb, source_nb) -> str:
    """sha256 of the code a student controls in ``nb`` (what the scan reads): a release holds for this code
    only, and a resubmission with other code is scanned and held again."""
    h = hashlib.sha256()
    for _, _, source in student_cells(nb, source_nb):
        data = source.encode()
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def hold_line(found: list[dict]) -> str:
    """:data:`HOLD` for a notebook's findings (dicts of ``tampering.Finding``): the first, and how many more."""
    first = found[0]
    more = f"; and {len(found) - 1} more" if len(found) > 1 else ""
    return HOLD.format(finding=f"{first['where']} (cell {first['cell']}), line {first['line']}: {first['what']}{more}")


class FindTampering(NbGraderPreprocessor):
    """Find what no answer needs in the code that ran, and hold the cost and artifact parts (module doc)."""

    enabled = Bool(True, help="Read each submission's own code for what no answer in the course needs (IPython "
                   "hooks, patched modules, the grading seed, ...) and hold its cost and artifact parts for "
                   "review until `jaxgrader review` releases it. False: no scan, no hold.").tag(config=True)
    released = List(Unicode(), [], help="Hashes of the code of submissions a teacher has read and released (their "
                    "findings are kept, their parts count). `jaxgrader review` records them in .grading/ and the "
                    "class run sets this; set it here only for a plain `nbgrader autograde`.").tag(config=True)
    allowed_modules = List(Unicode(), list(V.ALLOWED_MODULES), help="Modules an answer may import and use "
                           "freely; importing or using any other is a finding.").tag(config=True)
    allowed_paths = List(Unicode(), list(V.ALLOWED_PATHS), help="Parts of other modules an answer may use (dotted "
                         "paths: IPython.display, for clear_output).").tag(config=True)
    limited_modules = Dict(default_value={k: list(v) for k, v in V.LIMITED_MODULES.items()},
                           help="Modules an answer may use only some attributes of: module -> those attributes "
                           "(os: files and the course's environment variables; sys: versions; ...).").tag(config=True)
    denied_paths = List(Unicode(), list(V.DENIED_PATHS), help="Parts of allowed modules no answer needs (dotted "
                        "paths: JAX's compilation listeners, its profiler).").tag(config=True)
    environ_read = List(Unicode(), list(V.ENVIRON_READ), help="Environment variables an answer may read "
                        "(os.environ[...], os.environ.get, os.getenv with that literal name).").tag(config=True)
    environ_write = List(Unicode(), list(V.ENVIRON_WRITE), help="Environment variables an answer may set "
                         "(KERAS_BACKEND before `import keras`, JAX_ENABLE_X64, ...; not XLA_FLAGS).").tag(config=True)
    jax_flags = List(Unicode(), list(V.JAX_FLAGS), help="jax.config.update flags an answer may set.").tag(
        config=True)
    line_magics = List(Unicode(), list(V.LINE_MAGICS), help="IPython line magics an answer may use (%pip: "
                       "package names only; %config: InlineBackend only).").tag(config=True)
    cell_magics = List(Unicode(), list(V.CELL_MAGICS), help="IPython cell magics an answer may use; their "
                       "body is read as Python.").tag(config=True)

    def vocabulary(self) -> Vocabulary:
        return Vocabulary(frozenset(self.allowed_modules), tuple(self.allowed_paths),
                          {k: tuple(v) for k, v in self.limited_modules.items()}, tuple(self.denied_paths),
                          frozenset(self.environ_read), frozenset(self.environ_write), frozenset(self.jax_flags),
                          frozenset(self.line_magics), frozenset(self.cell_magics))

    def preprocess(self, nb, resources):
        if not self.enabled:
            return nb, resources
        from .verdict import _source_of

        source = _source_of(self.config, resources.get("nbgrader", {}))
        source_nb = _read(source) if source.is_file() else nb  # without source/: nbgrader's restored locks
        found = [dataclasses.asdict(f) for f in findings(nb, source_nb, self.vocabulary())]
        if not isinstance(nb.metadata.get("jaxgrader"), dict):
            nb.metadata["jaxgrader"] = {}
        meta = nb.metadata["jaxgrader"]  # (a NotebookNode copies what it is given)
        meta.pop(META, None)  # only the grader writes it
        if not found:
            return nb, resources
        digest = code_hash(nb, source_nb)
        released = digest in set(self.released)
        meta[META] = {"findings": found[:MAX_FINDINGS], "count": len(found), "hash": digest, "released": released}
        if not released:
            resources.setdefault("jaxgrader", {})["hold"] = {"message": hold_line(found),
                                                             "evidence": list(HELD_EVIDENCE)}
        return nb, resources


def _read(path):
    import nbformat

    return nbformat.read(str(path), as_version=4)


def tampering_of(nb) -> dict | None:
    """What :class:`FindTampering` wrote into an autograded notebook ({findings, hash, released}), or None."""
    meta = nb.get("metadata", {}).get("jaxgrader", {})
    found = meta.get(META) if isinstance(meta, dict) else None
    return found if isinstance(found, dict) and isinstance(found.get("findings"), list) else None
