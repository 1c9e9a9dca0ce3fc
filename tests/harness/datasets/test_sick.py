"""SICK-E as a named data set: the SemEval-2014 release read strictly from its folder
(``--data.data_dir``, ``$SICK_DIR`` or ``$DATA_ROOT/sick``), the literature's split and class
balance, the release's own split overlap accepted and said, other content read and said."""

import os
from pathlib import Path

import numpy as np
import pytest

from benchmarks.tasks.baselines import fit_baseline
from harness.datasets import sick
from harness.datasets.registry import dataset_choices, dataset_params, load_pair_data, published_anchors, split_title
from harness.errors import UserError
from tests.pair_files import write_sick

REPO = Path(__file__).resolve().parents[3]
RELEASE_DIR = Path(os.environ.get("SICK_DIR") or REPO.parent / "shared" / "data" / "sick")
needs_release = pytest.mark.skipif(
    not (RELEASE_DIR / sick.FILES["test"]).is_file(), reason=f"the SICK release is not at {RELEASE_DIR}: set SICK_DIR"
)


@needs_release
def test_the_release_reads_as_the_literature_splits_it(capsys):
    data = load_pair_data(dataset="sick-e", data_dir=str(RELEASE_DIR))
    assert (len(data.train), len(data.dev), len(data.test)) == (4500, 500, 4927)
    assert data.labels == ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"] and data.f1_average == "macro"
    assert data.content_hash == sick.CONTENT_HASH
    assert data.label_counts("test") == {"CONTRADICTION": 720, "ENTAILMENT": 1414, "NEUTRAL": 2793}
    assert split_title(data, "dev") == "SICK trial"
    # the release's trial and test share pairs with train: kept (the published split), counted and said
    assert data.split_overlap == {"overlap_train_dev": 7, "overlap_train_test": 81, "overlap_dev_test": 11}
    assert "as the published release's splits share them" in capsys.readouterr().err


@needs_release
def test_the_majority_baseline_is_the_published_56_7_percent_of_test():
    data = load_pair_data(dataset="sick-e", data_dir=str(RELEASE_DIR))
    probabilities = fit_baseline("majority", data)["test"]
    gold = np.array([pair.label for pair in data.test])
    assert round(100 * float(np.mean(probabilities.argmax(axis=1) == gold)), 1) == 56.7


def test_the_folder_comes_from_sick_dir_or_the_data_root(tmp_path, monkeypatch):
    write_sick(tmp_path / "root" / "sick")
    monkeypatch.delenv("SICK_DIR", raising=False)
    monkeypatch.setenv("DATA_ROOT", str(tmp_path / "root"))
    assert len(load_pair_data(dataset="sick-e").train) == 6
    monkeypatch.setenv("SICK_DIR", str(write_sick(tmp_path / "own", rows_per_split=9)))
    assert len(load_pair_data(dataset="sick-e").train) == 9


def test_no_folder_is_one_line_naming_the_variable_and_the_release(monkeypatch):
    monkeypatch.delenv("SICK_DIR", raising=False)
    monkeypatch.delenv("DATA_ROOT", raising=False)
    with pytest.raises(UserError, match=r"set SICK_DIR .*SemEval-2014") as raised:
        load_pair_data(dataset="sick-e")
    assert "\n" not in str(raised.value)


def test_a_missing_file_is_named(tmp_path):
    folder = write_sick(tmp_path / "sick")
    (folder / sick.FILES["dev"]).unlink()
    with pytest.raises(UserError, match=r"SICK_trial\.txt: file not found; set SICK_DIR"):
        load_pair_data(dataset="sick-e", data_dir=str(folder))


def test_content_other_than_the_release_is_read_and_said_in_one_line(tmp_path, capsys):
    data = load_pair_data(dataset="sick-e", data_dir=str(write_sick(tmp_path / "sick")))
    assert data.content_hash != sick.CONTENT_HASH and data.labels == sick.LABELS
    said = [line for line in capsys.readouterr().err.splitlines() if "SemEval-2014 release" in line]
    assert len(said) == 1 and "SICK_train.txt, SICK_trial.txt, SICK_test_annotated.txt differ" in said[0]


def test_a_label_outside_the_three_classes_names_its_line(tmp_path):
    folder = write_sick(tmp_path / "sick")
    with (folder / sick.FILES["test"]).open("a") as handle:
        handle.write("999\tA b c\tD e f\t3.0\tMAYBE\n")
    with pytest.raises(UserError, match=r"SICK_test_annotated\.txt:7"):
        load_pair_data(dataset="sick-e", data_dir=str(folder))


def test_its_splits_are_fixed_and_it_is_a_listed_choice(tmp_path):
    assert "sick-e" in dataset_choices()
    with pytest.raises(UserError, match=r"--data\.train: pair files are read only with --data\.dataset=tsv"):
        load_pair_data(dataset="sick-e", data_dir=str(write_sick(tmp_path / "sick")), train="x.tsv")


@needs_release
def test_sick_r_is_the_relatedness_column_of_the_same_release(capsys):
    relatedness = load_pair_data(dataset="sick-r", data_dir=str(RELEASE_DIR))
    entailment = load_pair_data(dataset="sick-e", data_dir=str(RELEASE_DIR))
    assert (len(relatedness.train), len(relatedness.dev), len(relatedness.test)) == (4500, 500, 4927)
    assert relatedness.task.score_range == (1.0, 5.0) and relatedness.labels == []
    assert relatedness.content_hash == sick.CONTENT_HASHES["sick-r"] != entailment.content_hash
    assert dataset_params(relatedness)["data_release"] == "release"
    assert relatedness.split_overlap == entailment.split_overlap
    assert [pair.ids for pair in relatedness.test] == [pair.ids for pair in entailment.test]
    first = (RELEASE_DIR / sick.FILES["test"]).read_text().splitlines()[0].split("\t")
    assert relatedness.test[0].label == float(first[3]) == 3.3
    scores = [pair.label for pair in relatedness.train]
    assert (min(scores), max(scores)) == (1.0, 5.0)


def test_sick_r_reads_own_files_says_so_and_anchors_name_their_metrics(tmp_path, capsys):
    data = load_pair_data(dataset="sick-r", data_dir=str(write_sick(tmp_path / "sick")))
    assert [pair.label for pair in data.train] == [1.0, 2.0, 3.0, 4.0, 5.0, 1.0]
    assert dataset_params(data)["data_release"] == "own"
    assert "sick-r: " in capsys.readouterr().err
    anchors = published_anchors("sick-r")
    assert anchors.metrics == ("pearson", "spearman") and anchors.rows[0][1:3] == (88.4, None)
    assert published_anchors("sick-e").column_titles() == ["test acc", "test F1"]
    assert "sick-r" in dataset_choices()


def test_a_relatedness_outside_one_to_five_names_its_line(tmp_path):
    folder = write_sick(tmp_path / "sick")
    with (folder / sick.FILES["dev"]).open("a") as handle:
        handle.write("999\tA b c\tD e f\t0.5\tNEUTRAL\n")
    with pytest.raises(UserError, match=r"^\S*SICK_trial\.txt:7: score 0\.5 \(column 3\) is outside .*\[1, 5\]$"):
        load_pair_data(dataset="sick-r", data_dir=str(folder))
