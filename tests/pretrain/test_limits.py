"""Length and memory limits of pretraining: sentences longer than ``--data.max_tokens`` are cut
into pieces, a step that cannot fit in memory is refused before the run starts, and a corpus line
of 50,000 words costs no more peak memory than the corpus without it."""

import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from harness.cli.tracked_cli import run_cli
from harness.datasets.mrpc import load_mrpc
from harness.errors import UserError
from pretrain.cli import PretrainCLI
from pretrain.corpus.datamodule import DEFAULT_MAX_TOKENS, CorpusDataModule, split_long
from pretrain.memory import step_bytes
from pretrain.models.bilm import BiLM, BiLMConfig
from pretrain.tokenization.words import BOS_ID, EOS_ID

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
LONG_LINE_WORDS = 50_000


def sequence(words: int) -> torch.Tensor:
    return torch.tensor([BOS_ID, *range(10, 10 + words), EOS_ID])


def test_split_long_cuts_into_near_equal_pieces_and_keeps_every_word():
    sequences = [sequence(5), sequence(11), sequence(4)]
    pieces, cut = split_long(sequences, max_tokens=4)
    assert cut == 2
    assert [len(piece) - 2 for piece in pieces] == [3, 2, 4, 4, 3, 4]  # 11 words: 4 + 4 + 3, not 4 + 4 + 2 + 1
    assert all(piece[0] == BOS_ID and piece[-1] == EOS_ID for piece in pieces)
    assert torch.equal(
        torch.cat([piece[1:-1] for piece in pieces]), torch.cat([sequence[1:-1] for sequence in sequences])
    )
    untouched, cut = split_long(sequences, max_tokens=11)
    assert cut == 0 and all(kept is original for kept, original in zip(untouched, sequences))


@pytest.fixture(scope="module")
def corpora(tmp_path_factory, real_mrpc_dir) -> dict:
    """399 MRPC train sentences, and the same with a 50,000-word line first."""
    folder = tmp_path_factory.mktemp("corpora")
    splits = load_mrpc(real_mrpc_dir)
    sentences = list(dict.fromkeys(s for pair in splits.train for s in (pair.sentence1, pair.sentence2)))[:399]
    words = [word for sentence in sentences for word in sentence.split()]
    long_line = " ".join(random.Random(0).choice(words) for _ in range(LONG_LINE_WORDS))
    (folder / "plain.txt").write_text("\n".join(sentences) + "\n")
    (folder / "long.txt").write_text(long_line + "\n" + "\n".join(sentences) + "\n")
    return {"folder": folder, "mrpc_dir": real_mrpc_dir, "plain": folder / "plain.txt", "long": folder / "long.txt"}


def test_a_long_line_is_cut_into_pieces_of_at_most_max_tokens(corpora):
    plain = CorpusDataModule(mrpc_dir=str(corpora["mrpc_dir"]), corpus=str(corpora["plain"]))
    long = CorpusDataModule(mrpc_dir=str(corpora["mrpc_dir"]), corpus=str(corpora["long"]))
    assert plain.summary["long_sentences_split"] == 0 and plain.summary["train_sequences"] == 399
    assert long.summary["long_sentences_split"] == 1
    pieces = -(-LONG_LINE_WORDS // DEFAULT_MAX_TOKENS)  # ceil
    assert long.summary["train_sequences"] == 399 + pieces
    assert max(len(ids) for ids in long.train_ids) == DEFAULT_MAX_TOKENS + 2
    assert long.train_tokens == plain.train_tokens + LONG_LINE_WORDS + 2 * pieces
    assert (
        long.content_hash
        != CorpusDataModule(mrpc_dir=str(corpora["mrpc_dir"]), corpus=str(corpora["long"]), max_tokens=100).content_hash
    )
    # held-out sentences are never cut: perplexity stays comparable across max_tokens
    short = CorpusDataModule(mrpc_dir=str(corpora["mrpc_dir"]), corpus=str(corpora["plain"]), max_tokens=5)
    assert [len(ids) for ids in short.validation_ids] == [len(ids) for ids in plain.validation_ids]
    assert max(len(ids) for ids in short.train_ids) == 5 + 2


@pytest.mark.parametrize("flag, value", [("batch_size", 0), ("batch_size", -1), ("max_tokens", 0)])
def test_bad_sizes_are_user_errors(corpora, flag, value):
    with pytest.raises(UserError, match=f"--data.{flag}={value}: must be at least 1"):
        CorpusDataModule(mrpc_dir=str(corpora["mrpc_dir"]), corpus=str(corpora["plain"]), **{flag: value})


def test_step_estimate_grows_with_the_batch_and_covers_the_logits():
    vocab_size = 3000
    model = BiLM(BiLMConfig(vocab_size, hidden_size=16, num_layers=2, dropout=0.1))
    small, wide, long = (step_bytes(model, vocab_size, b, t) for b, t in ((8, 20), (16, 20), (8, 80)))
    assert small < wide < long
    logits = 2 * 8 * 79 * vocab_size * 4  # both directions' (B·(T-1), V) float32 logits of the long batch
    assert logits < long < 10 * logits
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert small > 4 * parameter_bytes  # weights, gradients and AdamW's two moments come on top


@pytest.mark.slow
def test_a_step_that_cannot_fit_is_refused_before_the_run(corpora, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MRPC_DIR", str(corpora["mrpc_dir"]))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("pretrain.cli.available_bytes", lambda device: 2**30)  # a machine with 1 GiB free
    code = run_cli(
        PretrainCLI, ["fit", "--config", str(SMOKE), f"--data.corpus={corpora['long']}", "--data.max_tokens=100000"]
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines[-1].startswith("error: --data.batch_size=32, --data.max_tokens=100000: "), lines
    assert "sequences of 50002 tokens needs about" in lines[-1] and "1.0 GiB of cpu memory is free" in lines[-1]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    assert client.search_runs(experiments, run_view_type=ViewType.ALL) == []


PEAK = """
import atexit, resource, runpy, sys
atexit.register(lambda: print(f"PEAK_RSS_KIB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr))
sys.argv = ["pretrain", *sys.argv[1:]]
runpy.run_module("pretrain", run_name="__main__")
"""


def peak_rss(corpora: dict, corpus: Path, directory: Path) -> int:
    directory.mkdir()
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{directory / 'mlflow.db'}",
        "MRPC_DIR": str(corpora["mrpc_dir"]),
        "OMP_NUM_THREADS": "1",
    }
    process = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK,
            "fit",
            "--config",
            str(SMOKE),
            f"--data.corpus={corpus}",
            "--samples_every_n_steps=0",
            "--trainer.enable_progress_bar=false",
        ],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return int(process.stderr.rsplit("PEAK_RSS_KIB ", 1)[1].split()[0])


@pytest.mark.slow
def test_a_50000_word_line_costs_no_more_peak_memory(corpora):
    """The line is cut, so the longest batch is no longer than MRPC's own and the peak memory does
    not grow with the line."""
    with ThreadPoolExecutor(2) as both:  # two processes side by side: each measures its own peak
        without, with_line = both.map(
            peak_rss,
            [corpora] * 2,
            [corpora["plain"], corpora["long"]],
            [corpora["folder"] / "without", corpora["folder"] / "with"],
        )
    assert with_line <= 1.10 * without, (with_line, without)


def test_the_estimate_draws_nothing_from_the_training_generators():
    model = BiLM(BiLMConfig(500, hidden_size=8, num_layers=1, dropout=0.5))
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    step_bytes(model, 500, 4, 10)
    assert torch.equal(torch.rand(3), expected)
