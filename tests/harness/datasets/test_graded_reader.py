"""A graded score as pair files write it: a plain decimal within the task's range, read as a float;
text, ``nan``, ``inf``, an empty field or a number outside the range is one line naming file:line.
The file's digest does not depend on reading its last column as scores or as labels."""

import pytest

from harness.datasets.graded_reader import parse_score
from harness.datasets.reader import read_pair_tsv
from harness.errors import UserError
from tests.pair_files import write_tsv


@pytest.mark.parametrize(("text", "value"), [("4.5", 4.5), (" 3 ", 3.0), ("2.40", 2.4), ("1e0", 1.0), ("+.5", 0.5)])
def test_a_decimal_in_the_range_is_its_float(text, value):
    assert parse_score(text, (0.0, 5.0), "f.tsv:2", 2) == value


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("nan", "score 'nan' (column 2) is not a number"),
        ("inf", "score 'inf' (column 2) is not a number"),
        ("", "score an empty field (column 2) is not a number"),
        ("4,5", "score '4,5' (column 2) is not a number"),
        ("1_0", "score '1_0' (column 2) is not a number"),
        ("5.01", "score 5.01 (column 2) is outside the task's range [0, 5]"),
        ("-0.1", "score -0.1 (column 2) is outside the task's range [0, 5]"),
    ],
)
def test_anything_else_is_one_line_naming_the_line(text, fragment):
    with pytest.raises(UserError) as raised:
        parse_score(text, (0.0, 5.0), "f.tsv:2", 2)
    assert str(raised.value).startswith(f"f.tsv:2: {fragment}") and "\n" not in str(raised.value)


def test_scores_are_floats_without_a_label_set_and_the_digest_is_the_files(tmp_path):
    rows = [("a b", "c d", "0.5"), ("e f", "g h", "2"), ("i j", "k l", "1.25")]
    path = write_tsv(tmp_path / "graded.tsv", rows, header=("sentence1", "sentence2", "label"))
    graded = read_pair_tsv(path, score_range=(0.0, 2.0))
    assert [pair.label for pair in graded.pairs] == [0.5, 2.0, 1.25] and graded.labels == []
    assert graded.digest == read_pair_tsv(path).digest  # the same text, whatever the label column means
    with pytest.raises(UserError, match=r"graded\.tsv:3: score 2 \(column 2\) is outside"):
        read_pair_tsv(path, score_range=(0.0, 1.5))
