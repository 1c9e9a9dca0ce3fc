"""The golden comparison itself (``tests/golden/compare.py``): what it lets pass (a summation
order's noise, a flip at the threshold), what it catches (a moved probability, perplexity or
metric, a count of items), its one-line hint, and the goldens' protocol version."""

import pytest

from harness.protocol import PROTOCOL_VERSIONS, protocol_version
from tests.golden.compare import (
    BF16,
    BF16_GOLDEN_FILE,
    HINT,
    PROBABILITY_TOLERANCE,
    problems,
    read_goldens,
    version_problem,
    write_goldens,
)

CELL = {
    "dev_acc": 0.75,
    "dev_f1": 0.8,
    "test_acc": 0.5,
    "test_f1": 0.6,
    "dev_prob": [0.9, 0.2, 0.7, 0.1],
    "test_prob": [0.8, 0.3, 0.6, 0.4],
}


def changed(cell: dict, **values) -> dict:
    return {**cell, **values}


def test_golden_noise_within_the_tolerance_passes():
    noisy = changed(CELL, dev_prob=[p + PROBABILITY_TOLERANCE / 2 for p in CELL["dev_prob"]])
    assert problems("elmo-frozen", CELL, noisy) == []
    assert problems("elmo-pretrain", {"best_val_ppl": 60.0}, {"best_val_ppl": 60.0 * (1 + 1e-6)}) == []


def test_golden_moved_probability_fails_in_one_line_with_the_hint():
    moved = changed(CELL, test_prob=[0.8, 0.3, 0.631, 0.4])
    (line,) = problems("gpt-full", CELL, moved)
    assert line.startswith("golden gpt-full moved (max |Δp| 0.031 > 0.0001 at test item 2)") and line.endswith(HINT)
    assert "\n" not in line and "harness/protocol.py" in line and "make goldens" in line


def test_golden_moved_perplexity_metric_or_item_count_fails():
    assert "best_val_ppl 60 → 60.1" in problems("elmo-pretrain", {"best_val_ppl": 60.0}, {"best_val_ppl": 60.1})[0]
    assert "dev_acc 0.7500 → 0.5000" in problems("hf-frozen", CELL, changed(CELL, dev_acc=0.5))[0]
    assert "3 dev predictions, pinned 4" in problems("hf-frozen", CELL, changed(CELL, dev_prob=[0.9, 0.2, 0.7]))[0]
    assert "it records" in problems("hf-frozen", CELL, {"best_val_ppl": 1.0})[0]


def test_golden_metric_may_flip_only_with_an_item_at_the_threshold():
    at_threshold = changed(CELL, dev_prob=[0.9, 0.2, 0.7, 0.5 + PROBABILITY_TOLERANCE / 2])
    flipped = changed(at_threshold, dev_acc=1.0, dev_prob=[0.9, 0.2, 0.7, 0.5])
    assert problems("elmo-frozen", at_threshold, flipped) == []
    assert problems("elmo-frozen", CELL, changed(CELL, dev_acc=1.0)) != []


def test_golden_file_of_another_protocol_version_asks_to_regenerate(tmp_path):
    write_goldens({"elmo-pretrain": {"best_val_ppl": 59.6}}, tmp_path / "goldens.json")
    goldens = read_goldens(tmp_path / "goldens.json")
    assert goldens["cells"] == {"elmo-pretrain": {"best_val_ppl": 59.6}} and version_problem(goldens) is None
    older = protocol_version({**PROTOCOL_VERSIONS, "heads": PROTOCOL_VERSIONS["heads"] - 1})
    message = version_problem({**goldens, "protocol_version": older})
    assert message and "regenerate" in message and "make goldens" in message and "\n" not in message


def test_golden_bf16_tolerance_passes_kernel_noise_and_catches_a_changed_rate():
    """bf16 kernel noise (6.5e-5 measured; 5e-4 here, beyond the float32 tolerance) passes the bf16
    tolerance; a probability moved as a 1.2× learning rate moves it (7.5e-3 at least) fails it."""
    kernel = changed(CELL, dev_prob=[p + 5e-4 for p in CELL["dev_prob"]])
    assert problems("gpt-full", CELL, kernel, BF16) == [] and problems("gpt-full", CELL, kernel) != []
    rate = changed(CELL, dev_prob=[0.9, 0.2, 0.7 + 7.5e-3, 0.1])
    (line,) = problems("gpt-full", CELL, rate, BF16)
    assert "max |Δp| 0.0075 > 0.001 at dev item 2" in line
    assert problems("elmo-pretrain", {"best_val_ppl": 60.0}, {"best_val_ppl": 60.0 * (1 + 1e-6)}, BF16) == []


@pytest.mark.parametrize("path", [None, BF16_GOLDEN_FILE])
def test_golden_pinned_file_is_of_this_protocol_version(path):
    goldens = read_goldens(path) if path else read_goldens()
    problem = version_problem(goldens, path) if path else version_problem(goldens)
    if problem:
        pytest.fail(problem, pytrace=False)
