"""A toy never takes a real name, and says what it did: a smoke run's encoder is a version of
``<family>-encoder-smoke``, never of ``<family>-encoder`` (whose ``newest`` stays on the real one);
a ``max_sentences`` that cuts the pretraining text says what it kept of each corpus; the command a
pretraining suggests repeats the ``--data.*`` flags of its pair data set. The summaries of a real
smoke run are checked in tests/test_own_data_doc.py."""

import time

from mlflow.tracking import MlflowClient

from harness.datasets.spec import given_flags
from pretrain.corpus.corpora import cut_note
from pretrain.corpus.datamodule import CorpusDataModule
from pretrain.encoders.registry import model_name, register_encoder
from tests.pair_files import write_three_label_set


def test_a_smoke_run_registers_under_a_name_of_its_own(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("pretrain")
    real, toy = (client.create_run(experiment).info.run_id for _ in range(2))
    assert register_encoder(client, real, "elmo") == "models:/elmo-encoder/1"
    time.sleep(0.01)
    assert register_encoder(client, toy, "elmo", smoke=True) == "models:/elmo-encoder-smoke/1"
    assert client.get_model_version_by_alias("elmo-encoder", "newest").run_id == real  # not moved by the toy
    assert client.get_model_version_by_alias("elmo-encoder-smoke", "newest").run_id == toy
    assert model_name("ulmfit", "task", smoke=True) == "ulmfit-task-encoder-smoke"
    assert "smoke" in client.get_registered_model("elmo-encoder-smoke").description


def test_the_cut_names_what_it_kept_of_each_corpus():
    sentences = [f"pair {k}" for k in range(232)] + [f"text {k}" for k in range(400)]
    origin = {sentence: sentence.split()[0] for sentence in sentences}
    assert cut_note(400, sentences, origin) == (
        "--data.max_sentences=400 kept the first 400 of 632 pretraining sentences: pair 232 of 232, text 168 of 400"
    )


def test_a_cut_pretraining_text_says_so_on_stderr_and_an_uncut_one_does_not(tmp_path, capsys):
    files = write_three_label_set(tmp_path / "own")
    text = tmp_path / "notes.txt"
    text.write_text("".join(f"Line {k} of the notes.\n" for k in range(400)))
    flags = {"dataset": "tsv", **{split: str(path) for split, path in files.items()}}
    data = CorpusDataModule(corpus=["pairs", str(text)], max_sentences=400, **flags)
    train = data.summary["corpus_sentences"]["own"]
    assert data.cut_note == (
        f"--data.max_sentences=400 kept the first 400 of {train + 400} pretraining sentences: "
        f"own {train} of {train}, notes {400 - train} of 400"
    )
    assert f"corpus: {data.cut_note}" in capsys.readouterr().err
    assert CorpusDataModule(corpus=["pairs", str(text)], max_sentences=10_000, **flags).cut_note is None
    assert "max_sentences" not in capsys.readouterr().err


def test_the_suggested_finetuning_repeats_the_data_flags_that_differ_from_the_defaults():
    settings = {
        "dataset": "tsv",
        "train": "data/own/train.tsv",
        "dev": "data/my files/dev.tsv",
        "test": "data/own/test.tsv",
        "label_column": "label",  # the default: left out
        "has_header": False,
        "max_split_overlap": 0.01,  # the default
        "batch_size": 32,  # not a pair-data flag
    }
    assert given_flags(settings) == [
        "--data.dataset=tsv",
        "--data.train=data/own/train.tsv",
        "--data.dev='data/my files/dev.tsv'",
        "--data.test=data/own/test.tsv",
        "--data.has_header=false",
    ]
    assert given_flags({"dataset": "mrpc"}) == []  # MRPC's defaults: nothing to repeat
