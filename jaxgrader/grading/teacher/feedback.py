"""Feedback whose summary names each graded part by its exercise, not "Test cell".

nbgrader's feedback page opens with a summary of every graded cell and its points, and
labels each "Test cell", "Written response", ...: the label is a literal in its template
(``feedback/index.html.j2``), so nothing a preprocessor sets can change it. Two pieces do:

* :class:`NamePartsInFeedback` (in ``c.GenerateFeedback.preprocessors``) puts the name of
  every graded cell into the page's resources: its exercise heading in the instructor's
  notebook (:mod:`jaxgrader.grading.teacher.exercises`), never anything from the submission;
* ``templates/feedback/named_parts.html.j2`` extends nbgrader's own feedback template and
  replaces only that summary (selected with ``c.GenerateFeedback.HTMLExporter.template_file``,
  set for feedback only, so formgrader's pages keep their template; found
  through :func:`template_dirs`). The cells themselves are rendered by nbgrader's blocks,
  after ``HideHiddenTests`` has removed hidden tests and kernel output.
"""

from __future__ import annotations

from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

TEMPLATE_FILE = "named_parts.html.j2"


def template_dirs() -> list[str]:
    """For ``c.GenerateFeedback.HTMLExporter.extra_template_basedirs``: this package's templates, then nbgrader's
    (where ``feedback/index.html.j2`` lives, which ours extends)."""
    import nbgrader

    ours = Path(__file__).resolve().parent / "templates"
    theirs = Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"
    return [str(ours), str(theirs)]


def feedback_words(root, language: str | None) -> dict[str, str]:
    """The feedback page's words in an edition's language (English -> translation; {} for English)."""
    from ..editions import catalogs as tc
    from ..editions.sentences import GRADER

    if not language:
        return {}
    path = tc.Edition(Path(root), language, ()).catalogs / f"{GRADER}.po"
    if not path.is_file():
        return {}
    try:
        table = tc.translations(tc.read_catalog(path))
    except tc.CourseError:
        return {}
    return {english: text for (context, english), text in table.items() if context == "feedback"}


class NamePartsInFeedback(NbGraderPreprocessor):
    """Give the feedback template a name for each graded cell (its exercise heading) and the page's
    words, both in the language ``LocalizeFeedback`` found the submission in (``nb.metadata.language``)."""

    def preprocess(self, nb, resources):
        from ..course.coursedir import coursedir_of
        from .exercises import source_names

        info = resources.get("nbgrader", {})
        coursedir = coursedir_of(self.config)
        language = nb.metadata.get("language")
        words = feedback_words(coursedir.root, language)
        names = {}
        if info.get("assignment") and info.get("notebook"):
            from ..editions.side_by_side import edition_assignment

            assignment, _ = edition_assignment(coursedir, info["assignment"])  # lesson1-ko: lesson1's headings
            names = source_names(coursedir, assignment, info["notebook"], language, words)
        resources["jaxgrader_feedback"] = {"names": names, "words": words}
        return nb, resources
