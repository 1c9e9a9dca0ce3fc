"""Pair files that look fine to the eye: labels of one class written two ways, NUL and line
separators inside a sentence, and a path to a file that is not a pair file (never quoted)."""

import os

import pytest

from harness.datasets.reader import read_pair_tsv
from tests.helpers import assert_one_line_error
from tests.pair_files import write_tsv

ROWS = [
    ("t1", "A dog runs.", "An animal moves.", "yes"),
    ("t2", "A cat sleeps.", "Nobody rests.", "no"),
    ("t3", "Kids play.", "Children are out.", "yes"),
]


@pytest.mark.parametrize("label, other", [("Yes", "yes"), ("YES", "yes"), ("No", "no"), ("not  para", "Not para")])
def test_a_label_differing_only_by_case_or_spacing_names_both_lines(tmp_path, label, other):
    rows = [("t1", "A dog runs.", "An animal moves.", other), *ROWS[1:]]
    path = write_tsv(tmp_path / "train.tsv", rows + [("t4", "A bird sings.", "A bird is silent.", label)])
    assert_one_line_error(
        lambda: read_pair_tsv(path), f"{path}:5: ", repr(label), repr(other), f"{path}:2", "case or spacing"
    )


def test_distinct_labels_still_read(tmp_path):
    path = write_tsv(tmp_path / "train.tsv", ROWS + [("t4", "A bird sings.", "A bird is silent.", "maybe")])
    assert read_pair_tsv(path).labels == ["maybe", "no", "yes"]


@pytest.mark.parametrize("character", ["\x00", "\u2028", "\u0085", "\u2029", "\x0b", "\x1e"])
def test_nul_and_line_separators_inside_a_sentence_name_file_and_line(tmp_path, character):
    rows = ROWS[:1] + [("t2", f"A cat{character} sleeps.", "Nobody rests.", "no")] + ROWS[2:]
    path = write_tsv(tmp_path / "train.tsv", rows)
    assert_one_line_error(lambda: read_pair_tsv(path), f"{path}:3: ", f"U+{ord(character):04X}", "column 1")


def test_a_file_that_is_not_a_pair_file_is_not_quoted(tmp_path):
    path = tmp_path / "secrets"
    path.write_text("token=s3cret-value\nsecond line\n")
    message = assert_one_line_error(lambda: read_pair_tsv(path), f"{path}:1", "not a pair file's header")
    assert "s3cret" not in message


def test_another_users_header_is_not_quoted(tmp_path):
    path = tmp_path / "theirs.tsv"
    path.write_text("s3cret-a\ts3cret-b\ts3cret-c\nx\ty\tz\n")
    if os.getuid() != 0:
        pytest.skip("needs root to give the file to another user")
    os.chown(path, 65534, 65534)
    message = assert_one_line_error(lambda: read_pair_tsv(path), f"{path}:1", "another user")
    assert "s3cret" not in message


def test_a_header_of_ones_own_pair_file_is_still_shown(tmp_path):
    path = tmp_path / "mine.tsv"
    path.write_text("first\tsecond\tlabel\nx\ty\tz\n")
    assert_one_line_error(lambda: read_pair_tsv(path), "no column 'sentence1'", "first, second, label")
