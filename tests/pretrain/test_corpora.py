"""Pretraining corpora: named sets and files, the dev/test exclusion of the pair data set in use,
per-corpus counts, and the corpora logged as MLflow dataset inputs. A 3-label TSV data set made
here; the shared corpora folder only where it exists."""

import hashlib
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from pretrain.corpus.corpora import DIGEST_LENGTH, default_corpora_dir, entries, log_corpora, read_corpora
from pretrain.corpus.datamodule import CorpusDataModule
from pretrain.tokenization.words import SPECIALS, Tokenizer
from tests.pair_files import write_three_label_set

NEW_SENTENCES = ["The zyzzyva quokka danced at midnight.", "A wombat read the quarterly report."]


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory) -> dict[str, Path]:
    return write_three_label_set(tmp_path_factory.mktemp("data") / "nli3", sizes=(90, 30, 30))


def tsv_flags(paths: dict[str, Path]) -> dict:
    return {"dataset": "tsv", "train": str(paths["train"]), "dev": str(paths["dev"]), "test": str(paths["test"])}


@pytest.fixture(scope="module")
def split_sentences(pair_files) -> dict[str, list[str]]:
    from harness.datasets.registry import load_pair_data

    data = load_pair_data(**tsv_flags(pair_files))
    train = data.sentences("train")
    seen = set(train)
    return {
        "train": train,
        "dev_only": [s for s in data.sentences("dev") if s not in seen],
        "test_only": [s for s in data.sentences("test") if s not in seen and s not in set(data.sentences("dev"))],
    }


@pytest.fixture(scope="module")
def corpora_dir(tmp_path_factory, split_sentences) -> Path:
    """A corpora folder with a ``brown`` set: two new sentences, a dev-only and a test-only sentence
    of the pair data set, one of its train sentences, and a repeat."""
    folder = tmp_path_factory.mktemp("corpora")
    (folder / "brown").mkdir()
    lines = [
        NEW_SENTENCES[0],
        split_sentences["dev_only"][0],
        split_sentences["test_only"][0],
        split_sentences["train"][0],
        NEW_SENTENCES[1],
        NEW_SENTENCES[0],
    ]
    (folder / "brown" / "sentences.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_entries_expand_names_joined_by_plus_and_keep_files():
    assert entries("mrpc") == ["mrpc"]
    assert entries("pairs") == ["mrpc"]
    assert entries("mrpc+reuters") == ["mrpc", "reuters"]
    assert entries("all-shared") == ["mrpc", "reuters", "brown", "sotu"]
    assert entries(["brown", "mine.txt", "mrpc+brown"]) == ["brown", "mine.txt", "mrpc"]
    assert entries(["reuters+mine.txt"]) == ["reuters+mine.txt"]  # not names only: a file path
    with pytest.raises(UserError, match="--data.corpus"):
        entries([])


def test_a_named_set_missing_from_the_corpora_folder_is_one_line(tmp_path):
    with pytest.raises(UserError) as raised:
        read_corpora("sotu", None, ["a"], "train.tsv", corpora_dir=str(tmp_path))
    message = str(raised.value)
    assert "\n" not in message and "--data.corpus=sotu" in message and str(tmp_path / "sotu") in message


def test_corpora_folder_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CORPORA_DIR", str(tmp_path))
    assert default_corpora_dir() == tmp_path
    monkeypatch.delenv("CORPORA_DIR")
    assert default_corpora_dir().parts[-2:] == ("shared", "data")


@pytest.fixture(scope="module")
def mixed(pair_files, corpora_dir) -> CorpusDataModule:
    return CorpusDataModule(**tsv_flags(pair_files), corpus="mrpc+brown", corpora_dir=str(corpora_dir))


def test_pretraining_text_is_the_data_sets_train_plus_the_set_minus_its_dev_and_test(mixed, split_sentences):
    probe = Tokenizer(list(SPECIALS))
    expected = split_sentences["train"] + NEW_SENTENCES  # dev/test-only lines dropped, repeats once
    assert [tuple(ids.tolist()) for ids in mixed.train_ids] == [tuple(mixed.tokenizer.encode(s)) for s in expected]
    assert mixed.removed_evaluation_sentences == 2
    vocabulary = set(mixed.tokenizer.vocab) - set(SPECIALS)
    assert vocabulary == {word for sentence in expected for word in probe.tokenize(sentence)} - set(SPECIALS)
    assert {"zyzzyva", "wombat"} <= vocabulary
    assert mixed.validation_sentences == split_sentences["dev_only"]


def test_per_corpus_counts_add_up_and_name_the_data_set(mixed, split_sentences):
    summary = mixed.summary
    assert summary["dataset"] == "nli3"
    assert summary["corpus_sentences"] == {"nli3": len(split_sentences["train"]), "brown": 2}
    tokens = {
        name: sum(len(mixed.tokenizer.encode(s)) for s in sentences)
        for name, sentences in (("nli3", split_sentences["train"]), ("brown", NEW_SENTENCES))
    }
    assert summary["corpus_tokens"] == tokens
    assert sum(summary["corpus_tokens"].values()) == summary["train_tokens"]
    assert sum(summary["corpus_sentences"].values()) == summary["train_sentences"]


def test_a_corpus_without_the_pair_sentences_still_keeps_dev_and_test_out(pair_files, corpora_dir, split_sentences):
    module = CorpusDataModule(**tsv_flags(pair_files), corpus=["brown"], corpora_dir=str(corpora_dir))
    kept = [split_sentences["train"][0], *NEW_SENTENCES]  # the train sentence stays: it is pair train text
    assert module.summary["corpus_sentences"] == {"brown": 3}
    assert {tuple(ids.tolist()) for ids in module.train_ids} == {tuple(module.tokenizer.encode(s)) for s in kept}
    assert module.removed_evaluation_sentences == 2


def test_transductive_counts_the_evaluation_sentences_apart(pair_files, corpora_dir):
    module = CorpusDataModule(
        **tsv_flags(pair_files), corpus="mrpc+brown", corpora_dir=str(corpora_dir), transductive=True
    )
    counts = module.summary["corpus_sentences"]
    assert counts["evaluation"] > 0 and sum(counts.values()) == module.summary["train_sentences"]


def test_corpora_are_logged_as_dataset_inputs(tmp_path, pair_files, corpora_dir, mixed):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.create_run(client.create_experiment("corpora", artifact_location=(tmp_path / "a").as_uri()))
    log_corpora(client, run.info.run_id, mixed.corpora)
    inputs = client.get_run(run.info.run_id).inputs.dataset_inputs
    assert [item.dataset.name for item in inputs] == ["nli3", "brown"]
    brown_text = (corpora_dir / "brown" / "sentences.txt").read_text(encoding="utf-8")
    lines = [line for line in brown_text.splitlines() if line]
    assert inputs[1].dataset.digest == hashlib.sha256(("\n".join(lines) + "\n").encode()).hexdigest()[:DIGEST_LENGTH]
    assert str(corpora_dir / "brown" / "sentences.txt") in inputs[1].dataset.source
    assert str(pair_files["train"]) in inputs[0].dataset.source
    assert all(item.tags[0].key == "mlflow.data.context" and item.tags[0].value == "pretrain" for item in inputs)


SHARED = default_corpora_dir()


HAS_SHARED = all((SHARED / folder / "sentences.txt").is_file() for folder in ("reuters21578", "brown", "sotu"))


@pytest.mark.skipif(
    not HAS_SHARED,
    reason=f"set CORPORA_DIR to the folder holding reuters21578/, brown/ and sotu/ (not found in {SHARED})",
)
def test_all_shared_reads_every_shared_corpus(pair_files):
    module = CorpusDataModule(**tsv_flags(pair_files), corpus="all-shared", max_sentences=3000)
    assert [corpus.name for corpus in module.corpora] == ["nli3", "reuters", "brown", "sotu"]
    assert all(len(corpus.sentences) > 50_000 for corpus in module.corpora[1:])
    counts = module.summary["corpus_sentences"]
    assert sum(counts.values()) == 3000 and counts["reuters"] > 0
    # the shared Brown README gives the sha256 of its sentences.txt: the digest is of the same text
    readme = (SHARED / "brown" / "README.md").read_text(encoding="utf-8")
    assert module.corpora[2].digest in readme
