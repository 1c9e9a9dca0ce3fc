"""The graded golden cell (``tests/golden/graded_cell.py``) recomputed and held against
``tests/golden/goldens-graded.json``; a learning rate changed by a fifth fails it."""

import pytest

from tests.golden.compare import version_problem
from tests.golden.graded_cell import GRADED_GOLDEN_FILE, NAME, compute_graded_golden, graded_problems, read_goldens


def pinned() -> dict:
    goldens = read_goldens(GRADED_GOLDEN_FILE)
    problem = version_problem(goldens, GRADED_GOLDEN_FILE)
    if problem:
        pytest.fail(problem.replace("`make goldens`", "`python -m tests.golden.graded_cell`"), pytrace=False)
    return goldens["cells"][NAME]


@pytest.mark.slow
def test_the_graded_golden_cell_holds_its_numbers(tmp_path):
    found = graded_problems(pinned(), compute_graded_golden(tmp_path))
    if found:
        pytest.fail("\n".join(found), pytrace=False)


@pytest.mark.slow
def test_the_graded_golden_catches_a_learning_rate_changed_by_a_fifth(tmp_path):
    """mrpc.yaml's head rate, 1e-3, times 1.2."""
    assert graded_problems(pinned(), compute_graded_golden(tmp_path, ("--model.learning_rate=0.0012",))) != []
