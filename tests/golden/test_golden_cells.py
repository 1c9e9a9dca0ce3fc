"""The golden cells (``tests/golden/cells.py``: per family a tiny pretraining run, a frozen and a
fine-tuned cell, and a tiny ``hf:`` BERT's two cells) recomputed and held against the numbers
pinned in ``tests/golden/goldens.json`` (float32) and ``tests/golden/goldens-bf16.json``
(bf16-mixed, on a CPU with native bf16 only): a change that moves any of them fails here with a
one-line hint — bump its concern in ``harness/protocol.py`` and regenerate (``make goldens``), or
find the bug. The bf16 tolerance is wider than the float32 one; a cell whose learning rate is
changed by a fifth still fails it. ``pytest -k golden`` runs them alone."""

import pytest

from harness.cli.precision import cpu_bf16_supported
from tests.golden.cells import compute_goldens, golden_names
from tests.golden.compare import BF16, GOLDENS, problems, read_goldens, version_problem

FAMILIES = list(dict.fromkeys(name.split("-")[0] for name in golden_names()))
NEEDS_BF16 = pytest.mark.skipif(
    not cpu_bf16_supported(),
    reason="the bf16 goldens need a CPU with native bf16 (AVX512-BF16 or AMX): elsewhere bf16 is emulated",
)


def family_of_cell(name: str) -> str:
    return name.split("-")[0]


def pinned_cells(precision: str) -> dict:
    path, _ = GOLDENS[precision]
    goldens = read_goldens(path)
    problem = version_problem(goldens, path)
    if problem:
        pytest.fail(problem, pytrace=False)
    if sorted(goldens["cells"]) != sorted(golden_names()):
        pytest.fail(
            f"{path.name} pins {sorted(goldens['cells'])}, the golden cells are {sorted(golden_names())}: "
            f"regenerate them (`make goldens`)",
            pytrace=False,
        )
    return goldens["cells"]


def hold_family(family: str, precision: str, workdir) -> None:
    pinned = pinned_cells(precision)
    computed = compute_goldens(workdir, only=lambda name: family_of_cell(name) == family, precision=precision)
    assert sorted(computed) == sorted(name for name in golden_names() if family_of_cell(name) == family)
    _, tolerance = GOLDENS[precision]
    found = [line for name, numbers in computed.items() for line in problems(name, pinned[name], numbers, tolerance)]
    if found:
        pytest.fail("\n".join(found), pytrace=False)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_golden_cells_of_each_family_hold_their_numbers(family, tmp_path):
    hold_family(family, "32-true", tmp_path)


@pytest.mark.slow
@NEEDS_BF16
@pytest.mark.parametrize("family", FAMILIES)
def test_golden_bf16_cells_of_each_family_hold_their_numbers(family, tmp_path):
    hold_family(family, "bf16-mixed", tmp_path)


@pytest.mark.slow
@NEEDS_BF16
@pytest.mark.parametrize("cell, rate", [("elmo-frozen", 0.0012), ("gpt-full", 0.0003)])
def test_golden_bf16_tolerance_catches_a_learning_rate_changed_by_a_fifth(cell, rate, tmp_path):
    """The configs' rates (1e-3 for the frozen head, 2.5e-4 for GPT's fine-tuning) times 1.2."""
    pinned = pinned_cells("bf16-mixed")[cell]
    computed = compute_goldens(
        tmp_path, only=lambda name: name == cell, precision="bf16-mixed", cell_flags=(f"--model.learning_rate={rate}",)
    )[cell]
    assert problems(cell, pinned, computed, BF16) != []
