"""The honest rewrites themselves (jaxgrader/grading/honest.py): each style computes what the answer
computes, and binds what it builds on when it is defined (a later swap of the global does not reach it).
Graded against the hidden tests in tests/test_assignments.py (`test_honest_rewrites_keep_full_marks`)."""

from __future__ import annotations

import pytest

from jaxgrader.grading.honest import STYLES, bindable, rewrite

CELLS = [
    ("setup", "import jax\nimport jax.numpy as jnp\nSCALE = 2.0", False),
    ("loss_fn", "def loss_fn(w, x):\n    return jnp.sum((w * x) ** 2)", True),
    ("step", "@jax.jit\ndef step(w, x, lr=0.1):\n    g = jax.grad(loss_fn)(w, x)\n    return w - lr * g * SCALE", True),
    ("test_step", "assert step(1.0, 2.0) is not None\n### BEGIN HIDDEN TESTS\nloss_fn = _standin\n"
     "_r = [k for k in range(3)]\n### END HIDDEN TESTS", False),
]


def test_bindable_names_are_other_answers_and_swapped_names_not_loop_variables():
    names = bindable(CELLS)
    assert names["step"] == {"loss_fn"} and names["loss_fn"] == set()  # a later answer cannot be bound early


@pytest.mark.parametrize("style", STYLES)
def test_each_style_computes_the_same_and_binds_at_definition(style):
    import jax.numpy as jnp

    source = rewrite(CELLS[2][1], {"loss_fn"}, style)
    assert source is not None and source != CELLS[2][1]
    namespace: dict = {}
    exec(CELLS[0][1], namespace)
    exec(CELLS[1][1], namespace)
    exec(source, namespace)
    want = 1.0 - 0.1 * 2 * 1.0 * 2.0 ** 2 * 2.0
    assert float(namespace["step"](jnp.float32(1.0), jnp.float32(2.0))) == pytest.approx(want)
    namespace["loss_fn"] = lambda w, x: 0.0 * w  # a stand-in swapped in by name, after definition
    if hasattr(namespace["step"], "clear_cache"):
        namespace["step"].clear_cache()
    assert float(namespace["step"](jnp.float32(1.0), jnp.float32(2.0))) == pytest.approx(want), (
        f"{style}: the rewrite still looks loss_fn up when called")
    assert hasattr(namespace["step"], "lower"), f"{style}: the rewrite lost jax.jit"


def test_a_cell_that_binds_nothing_is_not_rewritten():
    assert rewrite("def f(x):\n    return x + 1", {"loss_fn"}, "factory") is None
    assert rewrite("not python (", {"loss_fn"}, "factory") is None


def test_a_name_assigned_again_later_is_not_bound_early():
    cells = CELLS + [("", "loss_fn = lambda w, x: w", False)]
    assert bindable(cells)["step"] == set()


def test_packed_students_take_the_styles_in_turn():
    """Packed, two students hold every rewritten cell, each cell in two different styles, and together
    they hold every style (`jaxgrader trials --each` grades each style alone)."""
    from jaxgrader.grading.honest import MIXED, mixed_answers

    by_style = {style: {f"cell{n}": f"{style} {n}" for n in range(4)} for style in STYLES}
    mixed, turn = mixed_answers(by_style, start=1)
    assert sorted(mixed) == [f"mixed-{k + 1}" for k in range(MIXED)] and turn == 5
    for n in range(4):
        styles = {mixed[name][f"cell{n}"].split()[0] for name in mixed}
        assert len(styles) == MIXED, f"cell{n} is graded in {styles}"
    assert {answer.split()[0] for m in mixed.values() for answer in m.values()} == set(STYLES)


_CHAIN = [  # (grade_id, source, is_solution): a chain with a locked cell between two exercises
    ("setup", "import jax\nRATE = 0.1", False),
    ("loss_fn", "def loss_fn(w, x):\n    return (w * x) ** 2", True),
    ("make_opt", "def make_opt(rate):\n    return lambda g: -rate * g", True),
    ("setup_opt", "opt = make_opt(RATE)", False),
    ("step", "def step(w, x):\n    return w + opt(jax.grad(loss_fn)(w, x))", True),
    ("evaluate", "def evaluate(w, xs):\n    return sum(loss_fn(w, x) for x in xs)", True),
    ("test_step", "assert step(1.0, 2.0)\n### BEGIN HIDDEN TESTS\nwith _swapped(globals(), {\"opt\": _o}):\n"
     "    pass\n### END HIDDEN TESTS", False),
]


def test_downstream_cells_are_found_through_the_cells_between():
    from jaxgrader.grading.honest import downstream, swapped_names

    assert downstream(_CHAIN, {"make_opt"}) == {"step"}  # through setup_opt's `opt`
    assert downstream(_CHAIN, {"loss_fn"}) == {"step", "evaluate"}
    assert downstream(_CHAIN, {"step"}) == set()
    assert swapped_names(_CHAIN[-1][1].split("### BEGIN HIDDEN TESTS")[1]) == {"opt"}


def test_packs_hold_the_cells_downstream_of_their_mistakes_in_the_styles_in_turn():
    """Each pack holds, rewritten, the cells downstream of its wrong answers and no other; over the packs a
    cell is downstream in, it meets the four styles in turn."""
    from jaxgrader.grading.honest import STYLES, honest_answers, pack_styles

    solutions = {gid: src for gid, src, sol in _CHAIN if sol}
    by_style = honest_answers(_CHAIN, solutions)
    assert set(by_style[STYLES[0]]) == {"step", "evaluate"}  # step binds `opt` too: a hidden test swaps it
    packs = [{"loss_fn": "def loss_fn(w, x):\n    return w * x"}, {"make_opt": "def make_opt(rate):\n    return 0"},
             {"step": "def step(w, x):\n    return w"}] + [{"loss_fn": "def loss_fn(w, x):\n    return x"}] * 3
    held = pack_styles(_CHAIN, by_style, packs)
    assert [sorted(h) for h in held] == [["evaluate", "step"], ["step"], [], ["evaluate", "step"],
                                         ["evaluate", "step"], ["evaluate", "step"]]
    for cell in ("step", "evaluate"):
        styles = [next(s for s in STYLES if by_style[s][cell] == h[cell]) for h in held if cell in h]
        assert len(set(styles[:4])) == 4, f"{cell}: {styles}"
