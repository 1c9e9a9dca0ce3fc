"""Vocabulary sizes per tokenizer kind: a vocabulary of only the special tokens (every word
``<UNK>``, a flattering perplexity) is refused before any run exists, ``0`` never means "the
default", and every message names a flag that exists (``--data.max_vocab_size``)."""

from pathlib import Path

import pytest
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from harness.cli.tracked_cli import run_cli
from harness.errors import UserError
from pretrain.cli import PretrainCLI
from pretrain.corpus.datamodule import CorpusDataModule
from pretrain.tokenization.bpe import MIN_VOCAB_SIZE
from pretrain.tokenization.words import SPECIALS

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    path.write_text("\n".join(f"the market rose {i} points on day {i % 7} of the year ." for i in range(200)) + "\n")
    return path


def data(mrpc_dir, corpus, **flags) -> CorpusDataModule:
    return CorpusDataModule(mrpc_dir=str(mrpc_dir), corpus=str(corpus), **flags)


def refusal(mrpc_dir, corpus, **flags) -> str:
    with pytest.raises(UserError) as raised:
        data(mrpc_dir, corpus, **flags)
    message = str(raised.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("size", [0, 3, len(SPECIALS), -1])
def test_a_word_vocabulary_of_only_specials_is_refused(mrpc_dir, corpus, size):
    message = refusal(mrpc_dir, corpus, max_vocab_size=size)
    assert message.startswith(f"--data.max_vocab_size={size}: a word vocabulary needs at least {len(SPECIALS) + 1}")


def test_a_vocabulary_that_knows_half_the_text_and_no_cap_are_accepted(mrpc_dir, corpus):
    # a corpus line: the market rose <NUM> points on day <NUM> of the year . (12 words); "the" and
    # <NUM> are 4 of them, and two more words make half
    assert len(data(mrpc_dir, corpus, max_vocab_size=len(SPECIALS) + 3).tokenizer) == len(SPECIALS) + 3
    assert len(data(mrpc_dir, corpus).tokenizer) > 12  # unset: every word of the text


@pytest.mark.parametrize("flags", [{"max_vocab_size": len(SPECIALS) + 1}, {"max_vocab_size": len(SPECIALS) + 2}])
def test_a_vocabulary_that_leaves_most_of_the_text_unknown_is_refused(mrpc_dir, corpus, flags):
    """A vocabulary that reads most text as unknown would pretrain to a flattering perplexity and be
    registered @newest: it is refused instead."""
    message = refusal(mrpc_dir, corpus, **flags)
    assert message.startswith(
        f"--data.max_vocab_size={flags['max_vocab_size']} --data.min_frequency=1: the "
        f"vocabulary of {flags['max_vocab_size']} entries knows "
    ), message
    assert "at least 50% needed" in message


def test_a_min_frequency_that_leaves_most_words_unknown_is_refused(mrpc_dir, tmp_path):
    text = tmp_path / "rare.txt"  # "the" 3 times a line, every other word once
    text.write_text("\n".join(f"the w{i}a the w{i}b w{i}c the w{i}d w{i}e" for i in range(100)) + "\n")
    assert "knows 38% of" in refusal(mrpc_dir, text, min_frequency=2)
    assert len(data(mrpc_dir, text, min_frequency=1).tokenizer) > 400


def test_a_min_frequency_no_word_reaches_is_refused(mrpc_dir, corpus):
    message = refusal(mrpc_dir, corpus, min_frequency=10**6)
    assert message.startswith("--data.min_frequency=1000000: no word of the pretraining text occurs that often")


@pytest.mark.parametrize("size", [0, 100, -5, MIN_VOCAB_SIZE - 1])
def test_a_bpe_vocabulary_below_its_bytes_is_refused_naming_the_real_flag(mrpc_dir, corpus, size):
    message = refusal(mrpc_dir, corpus, tokenizer="subword", max_vocab_size=size)
    assert message.startswith(f"--data.max_vocab_size={size}: a subword vocabulary needs at least {MIN_VOCAB_SIZE}")
    assert "--data.vocab_size" not in message


def test_unset_bpe_size_is_the_default(mrpc_dir, corpus):
    default = data(mrpc_dir, corpus, tokenizer="subword", min_frequency=1)
    assert MIN_VOCAB_SIZE < len(default.tokenizer) <= 8000


@pytest.mark.slow
def test_the_cli_refuses_before_any_run_exists(tmp_path, monkeypatch, capsys, mrpc_dir, config=SMOKE, size=3):
    """Refused before a run exists: otherwise it would finish with a flattering val_ppl and become
    elmo-encoder@newest."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.chdir(tmp_path)
    code = run_cli(
        PretrainCLI,
        ["fit", "--config", str(config), f"--data.max_vocab_size={size}", "--trainer.enable_progress_bar=false"],
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines[-1].startswith(f"error: --data.max_vocab_size={size}: "), lines[-3:]
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    assert not client.search_runs(experiments, run_view_type=ViewType.ALL)
