"""An edition's assignments placed in the course as assignments of their own (a gradebook column each).

``jaxgrader translate side-by-side ko`` (docs/grading.md, "Editions"): ``lesson1`` of the Korean
edition becomes the course's ``lesson1-ko``; feedback for it is in Korean whatever was submitted.
"""

from __future__ import annotations

from pathlib import Path

from ..course.config import CourseError
from .catalogs import languages

SIDE_BY_SIDE = "{assignment}-{language}"  # an edition's assignment placed in the course as one of its own


def side_by_side(root: Path, language: str, assignments: list[str] | None = None) -> list[str]:
    """Place an edition's assignments in the course as assignments of their own (``lesson1-ko``: a column
    of their own in the gradebook; docs/grading.md, "Editions"): ``<lang>/source/<a>`` is copied to the
    course's ``source/<a>-<lang>`` (an earlier copy replaced), then nbgrader's generate_assignment writes
    ``release/<a>-<lang>`` and the gradebook's entry. Returns the placed assignments' names."""
    import shutil

    from ..course.config import load_config, make_api
    from ..course.coursedir import coursedir_of, edition_coursedir, folder
    from ..classrun.references import generate

    config = load_config(root)
    coursedir = coursedir_of(config)
    # what `build` wrote, not edition.toml: a teacher's grading copy of the course may lack the lectures it declares
    built = folder(edition_coursedir(coursedir, language), "source")
    have = sorted(p.name for p in built.iterdir() if p.is_dir()) if built.is_dir() else []
    if language not in languages(root) or not have:
        raise CourseError(f"{built}: no assignment of a '{language}' edition here (`jaxgrader translate build`)")
    missing = [a for a in assignments or [] if a not in have]
    if missing:
        raise CourseError(f"{built}: the edition has no {', '.join(missing)} (it has: {', '.join(have)})")
    placed = []
    for assignment in assignments or have:
        source = folder(edition_coursedir(coursedir, language), "source", ".", assignment)
        name = SIDE_BY_SIDE.format(assignment=assignment, language=language)
        target = folder(coursedir, "source", ".", name)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target)
        placed.append(name)
    generate(make_api(config), placed)
    return placed


def edition_assignment(coursedir, assignment: str) -> tuple[str, str | None]:
    """(the assignment an edition's copy was placed from, its language) for an assignment ``side_by_side``
    placed (``lesson1-ko`` -> ``("lesson1", "ko")``); ``(assignment, None)`` for any other."""
    from ..course.coursedir import edition_coursedir, folder

    for language in languages(Path(coursedir.root)):
        base = assignment.removesuffix("-" + language)
        if base != assignment and SIDE_BY_SIDE.format(assignment=base, language=language) == assignment \
                and folder(edition_coursedir(coursedir, language), "source", ".", base).is_dir():
            return base, language
    return assignment, None
