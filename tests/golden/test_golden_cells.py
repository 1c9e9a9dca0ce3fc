"""The golden cells (``tests/golden/cells.py``: per family a tiny pretraining run, a frozen and a
fine-tuned cell, and a tiny ``hf:`` BERT's two cells) recomputed and held against the numbers
pinned in ``tests/golden/goldens.json``: a change that moves any of them fails here with a one-line
hint — bump its concern in ``harness/protocol.py`` and regenerate (``make goldens``), or find the
bug. ``pytest -k golden`` runs them alone."""

import pytest

from tests.golden.cells import compute_goldens, golden_names
from tests.golden.compare import problems, read_goldens, version_problem

FAMILIES = list(dict.fromkeys(name.split("-")[0] for name in golden_names()))


def family_of_cell(name: str) -> str:
    return name.split("-")[0]


@pytest.fixture(scope="module")
def pinned() -> dict:
    goldens = read_goldens()
    problem = version_problem(goldens)
    if problem:
        pytest.fail(problem, pytrace=False)
    if sorted(goldens["cells"]) != sorted(golden_names()):
        pytest.fail(f"the goldens pin {sorted(goldens['cells'])}, the golden cells are {sorted(golden_names())}: "
                    f"regenerate them (`make goldens`)", pytrace=False)
    return goldens["cells"]


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_golden_cells_of_each_family_hold_their_numbers(family, pinned, tmp_path):
    computed = compute_goldens(tmp_path, only=lambda name: family_of_cell(name) == family)
    assert sorted(computed) == sorted(name for name in golden_names() if family_of_cell(name) == family)
    found = [line for name, numbers in computed.items() for line in problems(name, pinned[name], numbers)]
    if found:
        pytest.fail("\n".join(found), pytrace=False)
