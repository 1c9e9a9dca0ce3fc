"""STS-B as a named data set: the release read strictly from its folder (``--data.data_dir``,
``$STSB_DIR`` or ``$DATA_ROOT/stsb``) with quoting off and the notes past the seventh column
ignored, its pair key (genre, file, year, id), scores 0–5 as floats, the release's own split overlap
accepted and said, other content read, said and tagged, a bad score named by file and line."""

import os
from pathlib import Path

import pytest

from harness.datasets import stsb
from harness.datasets.registry import (
    dataset_choices,
    dataset_params,
    load_pair_data,
    published_anchors,
    split_title,
    task_of,
)
from harness.errors import UserError
from tests.pair_files import write_stsb

REPO = Path(__file__).resolve().parents[3]
RELEASE_DIR = Path(os.environ.get("STSB_DIR") or REPO.parent / "shared" / "data" / "stsb")
needs_release = pytest.mark.skipif(
    not (RELEASE_DIR / stsb.FILES["test"]).is_file(), reason=f"the STS-B release is not at {RELEASE_DIR}: set STSB_DIR"
)


@pytest.fixture(scope="module")
def release():
    return load_pair_data(dataset="stsb", data_dir=str(RELEASE_DIR))


@needs_release
def test_the_release_reads_as_the_benchmark_splits_it(release, capsys):
    assert (len(release.train), len(release.dev), len(release.test)) == (5749, 1500, 1379)
    assert release.content_hash == stsb.CONTENT_HASH and release.task == task_of("stsb")
    assert release.labels == [] and release.id_columns == ("genre", "file", "year", "id")
    assert dataset_params(release)["data_release"] == "release"
    scores = [pair.label for split in ("train", "dev", "test") for pair in release.split(split)]
    assert all(isinstance(score, float) for score in scores) and (min(scores), max(scores)) == (0.0, 5.0)
    assert split_title(release, "test") == "STS-B test"
    assert release.split_overlap == {"overlap_train_dev": 7, "overlap_train_test": 12, "overlap_dev_test": 4}


@needs_release
def test_each_file_is_the_release_byte_for_byte():
    import hashlib

    for split, name in stsb.FILES.items():
        assert hashlib.sha256((RELEASE_DIR / name).read_bytes()).hexdigest() == stsb.RELEASE[split][1]


@needs_release
def test_a_pair_is_keyed_by_genre_file_year_and_id_not_by_the_id(release):
    for split in ("train", "dev", "test"):
        keys = [pair.ids for pair in release.split(split)]
        assert len(set(keys)) == len(keys)
    assert len({pair.ids[-1] for pair in release.test}) == 828 < len(release.test)  # the id alone repeats


@needs_release
def test_rows_with_notes_keep_their_sentences_and_quotes_are_text(release):
    lines = (RELEASE_DIR / stsb.FILES["test"]).read_text().splitlines()
    noted = [line.split("\t") for line in lines if line.count("\t") > 6]
    assert len(noted) == 284  # the README's count of test rows with two notes
    by_key = {pair.ids: pair for pair in release.test}
    for fields in noted:
        pair = by_key[tuple(fields[:4])]
        assert (pair.sentence1, pair.sentence2, pair.label) == (fields[5].strip(), fields[6].strip(), float(fields[4]))
    assert any('"' in pair.sentence1 + pair.sentence2 for pair in release.train)


def test_the_folder_comes_from_stsb_dir_or_the_data_root(tmp_path, monkeypatch):
    write_stsb(tmp_path / "root" / "stsb")
    monkeypatch.delenv("STSB_DIR", raising=False)
    monkeypatch.setenv("DATA_ROOT", str(tmp_path / "root"))
    data = load_pair_data(dataset="stsb")
    assert len(data.train) == 6 and stsb.findable()
    monkeypatch.setenv("STSB_DIR", str(write_stsb(tmp_path / "own", rows_per_split=9)))
    assert len(load_pair_data(dataset="stsb").train) == 9


def test_no_folder_is_one_line_naming_the_variable_and_the_release(monkeypatch):
    monkeypatch.delenv("STSB_DIR", raising=False)
    monkeypatch.delenv("DATA_ROOT", raising=False)
    assert not stsb.findable()
    with pytest.raises(
        UserError, match=r"^--data\.dataset=stsb: no STS-B folder given; set STSB_DIR .*stswiki"
    ) as raised:
        load_pair_data(dataset="stsb")
    assert "\n" not in str(raised.value)


def test_own_files_are_read_said_in_one_line_and_tagged_own(tmp_path, capsys):
    data = load_pair_data(dataset="stsb", data_dir=str(write_stsb(tmp_path / "stsb")))
    assert data.content_hash != stsb.CONTENT_HASH
    assert dataset_params(data)["data_release"] == "own"
    said = [line for line in capsys.readouterr().err.splitlines() if "STS Benchmark release" in line]
    assert len(said) == 1 and "sts-train.csv, sts-dev.csv, sts-test.csv differ" in said[0]
    captions, news = data.train[0], data.train[1]  # the same id under two genres: two pairs
    assert captions.ids[-1] == news.ids[-1] and captions.ids != news.ids
    assert data.train[0].sentence1.startswith('A "man') and data.train[0].sentence2 == "Someone plays thing 0-0"


@pytest.mark.parametrize(
    ("score", "fragment"),
    [("high", r"score 'high' \(column 4\) is not a number"), ("5.5", r"score 5\.5 \(column 4\) is outside .*\[0, 5\]")],
)
def test_a_bad_score_is_one_line_naming_file_and_line(tmp_path, score, fragment):
    folder = write_stsb(tmp_path / "stsb")
    path = folder / stsb.FILES["dev"]
    lines = path.read_text().splitlines(keepends=True)
    fields = lines[2].split("\t")
    lines[2] = "\t".join([*fields[:4], score, *fields[5:]])
    path.write_text("".join(lines))
    with pytest.raises(UserError, match=rf"^{path}:3: {fragment}") as raised:
        load_pair_data(dataset="stsb", data_dir=str(folder))
    assert "\n" not in str(raised.value)


def test_a_row_short_of_seven_columns_names_its_line(tmp_path):
    folder = write_stsb(tmp_path / "stsb")
    with (folder / stsb.FILES["test"]).open("a") as handle:
        handle.write("main-news\tMSRpar\t2012test\t0099\t3.0\tOnly one sentence\n")
    with pytest.raises(UserError, match=r"sts-test\.csv:7: expected at least 7 tab-separated fields, found 6"):
        load_pair_data(dataset="stsb", data_dir=str(folder))


def test_a_key_twice_in_a_file_names_both_lines(tmp_path):
    folder = write_stsb(tmp_path / "stsb")
    path = folder / stsb.FILES["train"]
    path.write_text(path.read_text() + path.read_text().splitlines(keepends=True)[1])
    with pytest.raises(
        UserError, match=r"sts-train\.csv:7: id 'main-news/MSRpar/2012test/0000' already used at line 2"
    ):
        load_pair_data(dataset="stsb", data_dir=str(folder))


def test_it_is_a_listed_graded_choice_with_fixed_splits_and_anchors(tmp_path):
    assert "stsb" in dataset_choices() and task_of("stsb").score_range == (0.0, 5.0)
    anchors = published_anchors("stsb")
    assert anchors.metrics == ("pearson", "spearman") and anchors.column_titles() == ["test Pearson", "test Spearman"]
    assert ("InferSent (frozen) + regressor", 75.8, None, "Conneau et al. 2017, SentEval") in anchors.rows
    with pytest.raises(UserError, match=r"--data\.train: pair files are read only with --data\.dataset=tsv"):
        load_pair_data(dataset="stsb", data_dir=str(write_stsb(tmp_path / "stsb")), train="x.tsv")
