"""``jaxgrader publish``: point every "Open in Colab" badge and cross-notebook link at the course's
published repository and branch (``course_style.REPOSITORY`` / ``BRANCH``, the one setting).

Why: Colab opens a notebook from ``colab.research.google.com/github/OWNER/REPO/blob/BRANCH/PATH``
and cannot follow a relative link from one notebook to another; JupyterLab follows relative
links and needs no network. So every relative link to a notebook keeps its relative target
and gets a Colab link to the same file beside it, ``[Lesson 2](../notebooks/x.ipynb)
([Colab](https://colab.research.google.com/github/...))``, and every Colab address already
in a notebook is rewritten to the setting. Idempotent: running it again changes nothing.

Rewrites markdown cells of ``notebooks/``, ``source/`` and ``release/`` (``source/`` too, so
that ``jaxgrader release`` regenerates the same links), keeping each file's JSON layout.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from .. import course_style

FOLDERS = ("notebooks/*.ipynb", "source/*/*.ipynb", "release/*/*.ipynb")
COLAB = re.compile(r"https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/[^/\s)]+/([^\s)#]+)")
# A relative markdown link to a notebook (not an image), and the Colab link that may already follow
# it; one followed by an "Open in Colab" badge (the course map's table) has its Colab link already.
RELATIVE = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>(?![a-z]+:|#|/)[^)\s]+?\.ipynb)(?P<anchor>#[^)\s]*)?\)"
                      r"(?P<colab> \(\[Colab\]\([^)\s]*\)\))?(?! \[!\[Open In Colab\])")


def publish_text(text: str, path: str) -> str:
    """``text`` (markdown of the notebook at course-relative ``path``) with its links published."""
    text = COLAB.sub(lambda m: course_style.colab_url(m.group(1)), text)

    def beside(m: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), m["target"]))
        return (f"[{m['text']}]({m['target']}{m['anchor'] or ''}) "
                f"([Colab]({course_style.colab_url(target)}{m['anchor'] or ''}))")

    return RELATIVE.sub(beside, text)


def notebooks(root: Path) -> list[Path]:
    """The notebooks students open: lectures, assignments' instructor and student versions."""
    return sorted(p for pattern in FOLDERS for p in Path(root).glob(pattern))


def publish(root: Path) -> list[Path]:
    """Rewrite every notebook's links (see the module docstring); the notebooks changed."""
    root, changed = Path(root), []
    for path in notebooks(root):
        raw = path.read_text(encoding="utf-8")
        nb = json.loads(raw)
        where = path.relative_to(root).as_posix()
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "markdown":
                continue
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            new = publish_text(source, where)
            if new != source:
                cell["source"] = new if isinstance(cell["source"], str) else new.splitlines(keepends=True)
        # the layout these files are written in (nbformat's, one-space indent, keys as they were)
        out = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        if out != raw and json.loads(out) != json.loads(raw):
            path.write_text(out, encoding="utf-8")
            changed.append(path)
    return changed
