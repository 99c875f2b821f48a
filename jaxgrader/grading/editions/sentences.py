"""The grader's own sentences, which every edition translates (``i18n/<lang>/LC_MESSAGES/grader.po``):
the verdict's lines in feedback (``localize``) and nbgrader's stubs in an edition's release
(``translate``). Kept apart from both so that each can use them without importing the other.
"""

from __future__ import annotations

from babel.messages.catalog import Catalog

GRADER = "grader"  # the grader's own sentences: i18n/<lang>/LC_MESSAGES/grader.po

# The verdict's sentences (jaxgrader/grading/verdict/verdict.py), as templates. Most specific first: the
# first template that matches a whole line translates it. tests/test_translation.py feeds the real
# verdict's lines through them, so a changed sentence there fails the test until it is added here.
MESSAGES = [
    "passed: {n} check by the grader",
    "passed: {n} checks by the grader",
    "failed: {failed} of {total} checks ({passed} passed)",
    "a visible test failed: {assertion}",
    "a visible test failed",
    "the test stopped with an error",
    "the test stopped with {error}",
    "... and {n} more",
    "not reported (the test stopped before this check)",
    "reported more than once",
    "the reference run reported nothing for this test; ask your teacher",
    # the rules judged from evidence (judging.py), and how a program is described (programs.describe)
    "not numbers",
    "not every number is finite",
    "not a list of values to compare",
    "the values differ",
    "values {i} and {j} are identical",
    "not a list of finite losses",
    "the first loss is {value}",
    "the last losses are {ratio} of the first, above {bound}",
    "no predictions to compare",
    "predictions of shape {shape} ({dtype}), expected {expected} integers",
    "{fraction} agree, below {bound}",
    "not a positive number: {value}",
    "{got} is {factor} times off the reference's {want}",
    "not two finite numbers, the second positive",
    "the ratio {ratio} is below {bound}",
    "call {i}: the program takes {got}; expected {want}",
    "the program takes {got}; expected {want}",
    "no lowered program (is the function wrapped in jax.jit?)",
    "{n} traced arguments ({shown})",
    "not {n} programs",
    "no traced programs to compare",
    "the program grows: {counts} operations",
    "no traced program",
    "a program traced on other inputs ({n} arguments) than this run's",
    "argument {i} is seen as {got} inside shard_map; expected {want}",
    "the program holds a value of {got} entries; the largest needed has {want}",
    "the grader did not time this cell",
    "not a list of durations",
    "{claimed} s claimed in a cell that ran {seconds} s",
    # what the grader measured and evaluated itself (rules.py's cell_time, artifacts.py, sandbox/evaluator.py)
    "the cell took {seconds} s on the grader's clock; the reference's {reference} s (at most {allowed} s accepted)",
    "no result of this cell's work is checked in this submission (it builds on an exercise that failed), so the "
    "time it took is no evidence",
    "this test reports no result of the work it times, so its time is no evidence; ask your teacher",
    "this test's timed work does not draw its inputs from the cell's nonce, so it could have been done before the "
    "cell ran and its time is no evidence; ask your teacher",
    "no result of the training that made these parameters is checked in this submission (it builds on an exercise "
    "that failed), so their scores are no evidence of it",
    "this test reports no result of the training that made these parameters, so their scores are no evidence of it; "
    "ask your teacher",
    "the grader did not evaluate this part",
    "held for review: this notebook has code that no answer needs, and your teacher reads it before this check "
    "counts ({finding})",
    "the reference's program did not run: ask your teacher",
    "the reference reported no program",
    "no exported program",
    "on inputs the grader chose, the program's outputs differ from the reference program's",
    "the program holds a value of {got} entries; the reference's largest has {want}",
    "the program has {got} operations; the reference's program has {want} (a loop unrolled?)",
    "the program's inputs are laid out over devices as {got}; expected {want}",
    "the program's outputs are laid out over devices as {got}; expected {want}",
    "the program runs on {got} device(s); the reference's on {want} (its inputs laid out over the mesh)",
    "the program needs {got} KiB of temporary memory (XLA's analysis); the reference's {want} KiB (at most {factor} "
    "times that)",
    "the exported program does not compute what the function returned on the test's inputs: it is not the program "
    "the function runs",
    "no outputs of the function itself to tie its program to",
    "the program donates {got} of its inputs; the reference's donates {want} (donate_argnums)",
    "the program does not take the inputs the test called the function with",
    "the program has no {collectives} across devices; the reference's program has",
    "inside shard_map no input is split over {axes}: every device gets its inputs whole (in_specs); the reference's "
    "program splits them",
    "the reference reported no model and data to score with",
    "the reference's parameters are not a list of arrays",
    "no parameters (a list of arrays: jax.tree.leaves(params))",
    "the reference's parameters could not be scored: ask your teacher",
    "no parameters",
    "the parameters do not fit the model: {error}",
    "the model's output on these parameters is not a prediction per example",
    "the trained parameters classify {got} of held-out examples right; the reference's {want} (at most {bound} "
    "less is accepted)",
    "the programs ran past {seconds} s",
    "the programs used more than {megabytes} MiB",
    "the program runner failed after {seconds} s: {error}",
    "the program runner stopped before this program",
    "not a program jax.export can read ({error})",
    "the program calls out of XLA ({target}); only plain computations are run",
    "the program uses {operation} (host transfer); only plain computations are run",
    "the program needs {n} devices",
    "a program for other inputs than this test's: it takes {inputs}",
    "the program failed on the grader's inputs ({error})",
    "not true",
    "not a number: {value}",
    "{value} is above {bound}",
    "{value} is below {bound}",
    "different structure (keys, lengths or nesting) than expected",
    "not a numeric value{where}: {value}",
    "shape {got} instead of {expected}{where}",
    "dtype kind {got} instead of {expected}{where}",
    "values differ from the expected ones{where}",
    "booleans where numbers were expected{where}",
    "differs from the expected value{where} (largest difference {difference} at index {index})",
    "differs from the expected value{where} (got {got}, expected {expected})",
    "{got} instead of {expected}{where}",
    " at {path}",
    "(no trusted check)",
    "(report)",
]

# What nbgrader writes where a solution was (nbgrader_config.py's ClearSolutions stubs): an edition's
# release gets them in its words.
STUBS = ["# YOUR CODE HERE", "YOUR ANSWER HERE"]


# The words of the feedback page around the verdict (templates/feedback/named_parts.html.j2) and the
# suffixes that name a graded cell under its exercise heading (exercises.names).
FEEDBACK = [
    "Score", "Comment", "Comments", "Late submission penalty", "Student's answer", "Student's task",
    "Grade cell", "Task", "Top", "Test cell", "Coding free-response", "Written response",
    "{heading} (written answer)", "{heading} (answer)", "{heading} (test {k} of {n})",
]


def grader_template(project: str) -> Catalog:
    """The grader's own sentences: the verdict's (context ``verdict``), the feedback page's words
    (``feedback``) and nbgrader's stubs (``stub``)."""
    catalog = Catalog(project=project, fuzzy=False)
    for message in MESSAGES:
        catalog.add(message, context="verdict", auto_comments=[
            "the grader's verdict, shown in feedback; keep every {field} as it is"])
    for word in FEEDBACK:
        catalog.add(word, context="feedback", auto_comments=[
            "a word of the feedback page a student reads" + ("; keep every {field} as it is" if "{" in word else "")])
    for stub in STUBS:
        catalog.add(stub, context="stub", auto_comments=[
            "what students find where a solution was" + (" (keep the '#')" if stub.startswith("#") else "")])
    return catalog
