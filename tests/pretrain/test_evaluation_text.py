"""Evaluation sentences in the pretraining text: counted for the run's own pair data set, each
``--data.keep_out`` data set and every data set whose files are at hand, compared as a model sees
text, and removed on request — from the pair data set's own train sentences too; the same counts per
(corpus, task, split) for a table. Uses the real MSR release (``MRPC_DIR``)."""

import os
from pathlib import Path

import pytest

from harness.datasets.overlap import seen_text
from harness.errors import UserError
from pretrain.corpus.datamodule import CorpusDataModule
from pretrain.corpus.evaluation_text import (
    EvaluationText,
    contamination_line,
    contamination_table,
    findable_evaluation_texts,
)
from tests.pair_files import STSB_FILES, write_sick, write_stsb

STSB_RELEASE = Path(os.environ.get("STSB_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data" / "stsb")


@pytest.fixture(scope="module", autouse=True)
def no_other_data_at_hand():
    """Only the data sets a test puts at hand are counted: no SICK, STS-B or data root from outside."""
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("SICK_DIR", "STSB_DIR", "DATA_ROOT"):
            patch.delenv(variable, raising=False)
        yield


@pytest.fixture(scope="module")
def mrpc_text(real_mrpc_dir):
    from harness.datasets.mrpc import load_mrpc

    data = load_mrpc(real_mrpc_dir)
    return {split: set(map(seen_text, data.sentences(split))) for split in ("train", "dev", "test")}


@pytest.fixture(scope="module")
def plain(real_mrpc_dir):
    return CorpusDataModule(mrpc_dir=str(real_mrpc_dir))


@pytest.fixture(scope="module")
def kept_out(real_mrpc_dir):
    return CorpusDataModule(mrpc_dir=str(real_mrpc_dir), keep_out=["mrpc"])


def test_every_run_counts_the_evaluation_sentences_its_pair_text_holds(plain, mrpc_text):
    # MRPC's own train pairs hold 43 GLUE dev and 244 MSR test sentences (docs/data.md): legitimately
    # seen without keep_out, and counted
    assert plain.summary["contamination_mrpc_dev"] == len(mrpc_text["dev"] & mrpc_text["train"]) == 43
    assert plain.summary["contamination_mrpc_test"] == len(mrpc_text["test"] & mrpc_text["train"]) == 244
    assert "kept_out_sentences" not in plain.summary
    line = contamination_line(plain.summary)
    assert line == "mrpc dev 43, test 244 distinct sentences in the pretraining text"


def test_keep_out_removes_them_from_the_pair_text_too(plain, kept_out, mrpc_text):
    evaluation = mrpc_text["dev"] | mrpc_text["test"]
    removed = {seen_text(sentence) for sentence in plain.train_sentences} & evaluation
    assert kept_out.summary["kept_out_sentences"] == len(removed) > 0
    assert kept_out.summary["train_sentences"] == plain.summary["train_sentences"] - len(removed)
    assert not {seen_text(sentence) for sentence in kept_out.train_sentences} & evaluation
    assert (kept_out.summary["contamination_mrpc_dev"], kept_out.summary["contamination_mrpc_test"]) == (0, 0)
    assert kept_out.content_hash != plain.content_hash
    assert contamination_line(kept_out.summary).endswith(f"(after keeping out {len(removed)} sentences)")


def test_another_data_set_is_kept_out_as_a_model_sees_its_sentences(real_mrpc_dir, tmp_path, monkeypatch):
    sick = write_sick(tmp_path / "sick")
    monkeypatch.setenv("SICK_DIR", str(sick))
    test_sentence = (sick / "SICK_test_annotated.txt").read_text().splitlines()[0].split("\t")[1]
    corpus = tmp_path / "corpus.txt"
    shouted = "  ".join(test_sentence.upper().split())  # another case and spacing: the same sentence to a model
    corpus.write_text(f"{shouted}\nA sentence of no data set.\n")
    data = CorpusDataModule(mrpc_dir=str(real_mrpc_dir), corpus=["mrpc", str(corpus)], keep_out=["sick-e"])
    assert data.summary["kept_out_sentences"] == 1
    assert shouted not in data.train_sentences and "A sentence of no data set." in data.train_sentences
    assert data.summary["contamination_sick_e_test"] == 0
    assert data.summary["contamination_mrpc_test"] == 244  # not named: MRPC's own text is kept, and counted


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            {"keep_out": ["sst2"]},
            r"^--data\.keep_out=sst2: not a named data set; expected mrpc, sick-e, sick-r, stsb or tsv$",
        ),
        ({"keep_out": ["mrpc"], "transductive": True}, r"^--data\.keep_out: not with --data\.transductive=true"),
    ],
)
def test_a_bad_keep_out_is_one_line_naming_the_flag(real_mrpc_dir, flags, message):
    with pytest.raises(UserError, match=message):
        CorpusDataModule(mrpc_dir=str(real_mrpc_dir), **flags)


def test_a_named_data_set_that_cannot_be_read_says_which_flag_named_it(real_mrpc_dir, monkeypatch):
    monkeypatch.delenv("SICK_DIR", raising=False)
    monkeypatch.delenv("DATA_ROOT", raising=False)
    with pytest.raises(UserError, match=r"^--data\.keep_out=sick-e: --data\.dataset=sick-e: no SICK folder given"):
        CorpusDataModule(mrpc_dir=str(real_mrpc_dir), keep_out=["sick-e"])


def test_every_data_set_at_hand_is_counted_without_being_named(real_mrpc_dir, tmp_path, monkeypatch):
    stsb = write_stsb(tmp_path / "stsb")
    monkeypatch.setenv("STSB_DIR", str(stsb))
    test_sentence = (stsb / STSB_FILES["test"]).read_text().splitlines()[1].split("\t")[5]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"{test_sentence.upper()}\nA sentence of no data set.\n")
    data = CorpusDataModule(mrpc_dir=str(real_mrpc_dir), corpus=["mrpc", str(corpus)])
    assert (data.summary["contamination_stsb_dev"], data.summary["contamination_stsb_test"]) == (0, 1)
    assert "kept_out_sentences" not in data.summary and "contamination_sick_e_test" not in data.summary
    assert contamination_line(data.summary) == (
        "mrpc dev 43, test 244; stsb dev 0, test 1 distinct sentences in the pretraining text"
    )


def test_a_data_set_at_hand_that_cannot_be_read_is_said_and_not_counted(tmp_path, monkeypatch, capsys):
    folder = write_sick(tmp_path / "sick")
    (folder / "SICK_trial.txt").write_text("1\tA b\t\t3.0\tNEUTRAL\n")  # no second sentence
    monkeypatch.setenv("SICK_DIR", str(folder))
    assert [text.task for text in findable_evaluation_texts(skip={"mrpc"})] == []
    said = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[1] for line in said] == ["sick-e not counted", "sick-r not counted"]
    assert all("SICK_trial.txt:1: empty sentence2" in line for line in said)


def test_the_table_counts_each_corpus_task_and_split_as_a_model_sees_text():
    texts = [
        EvaluationText("toy", {"dev": frozenset({"a b", "c d"}), "test": frozenset({"e f"})}),
        EvaluationText("other", {"dev": frozenset({"x"}), "test": frozenset({"y", "z"})}),
    ]
    table = contamination_table({"news": ["A  B", "e f", "q"], "empty": []}, texts)
    assert table == {
        ("news", "toy", "dev"): (1, 2),
        ("news", "toy", "test"): (1, 1),
        ("news", "other", "dev"): (0, 1),
        ("news", "other", "test"): (0, 2),
        ("empty", "toy", "dev"): (0, 2),
        ("empty", "toy", "test"): (0, 1),
        ("empty", "other", "dev"): (0, 1),
        ("empty", "other", "test"): (0, 2),
    }


@pytest.mark.skipif(not (STSB_RELEASE / STSB_FILES["test"]).is_file(), reason=f"no STS-B release at {STSB_RELEASE}")
def test_mrpc_train_holds_the_published_share_of_stsbs_sentences(real_mrpc_dir, monkeypatch):
    from harness.datasets.mrpc import load_mrpc

    monkeypatch.setenv("STSB_DIR", str(STSB_RELEASE))
    texts = findable_evaluation_texts(skip={"mrpc"})
    table = contamination_table({"mrpc": load_mrpc(real_mrpc_dir).sentences("train")}, texts)
    assert table["mrpc", "stsb", "dev"] == (240, 2909) and table["mrpc", "stsb", "test"] == (259, 2551)
