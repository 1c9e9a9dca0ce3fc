"""Pair inputs longer than ``--data.max_tokens`` (or the encoder's positions) are refused before
a finetune run exists, naming the file and the pair; with the cap raised, frozen features that
cannot fit in memory are refused too. Under a small memory budget a 100,000-token sentence used
to end in a traceback from a multi-gigabyte allocation."""

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from downstream.data.pair_datamodule import PairDataModule
from harness.errors import UserError
from pretrain.encoders.checkpoints import slim_checkpoint
from pretrain.encoders.loading import load_encoder
from pretrain.lit_bilm import LitBiLM
from pretrain.tokenization.words import Tokenizer
from tests.pair_files import write_three_label_set

REPO = Path(__file__).resolve().parents[2]
FINETUNE_SMOKE = REPO / "configs" / "downstream" / "smoke.yaml"
LONG = 100_000
MEMORY_BUDGET = 4 * 2**30  # address space of the CLI process in the budget test


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """A 3-label TSV set whose dev file ends in a pair with a 100,000-token first sentence."""
    folder = tmp_path_factory.mktemp("nli3")
    paths = write_three_label_set(folder, sizes=(60, 20, 20))
    with paths["dev"].open("a", encoding="utf-8") as handle:
        handle.write("\t".join(["dev-long", " ".join(["the report"] * (LONG // 2)), "The report.", "neutral"]) + "\n")
    return paths


@pytest.fixture(scope="module")
def elmo(tmp_path_factory, files) -> Path:
    """An untrained ELMo of the default size (2 x 256), saved as a slim checkpoint."""
    tokenizer = Tokenizer.build(line.split("\t")[1] for line in files["train"].read_text().splitlines()[1:])
    torch.manual_seed(0)
    lit = LitBiLM(vocab_size=len(tokenizer), hidden_size=256, num_layers=2, dropout=0.0)
    lit.tokenizer = tokenizer
    state = {"state_dict": lit.state_dict(), "epoch": 0, "global_step": 0}
    lit.on_save_checkpoint(state)
    path = tmp_path_factory.mktemp("encoder") / "elmo.ckpt"
    torch.save(slim_checkpoint(state), path)
    return path


def data(files, **flags) -> PairDataModule:
    return PairDataModule(
        dataset="tsv",
        train=str(files["train"]),
        dev=str(files["dev"]),
        test=str(files["test"]),
        cache_dir="none",
        **flags,
    )


def test_a_sentence_longer_than_the_cap_is_refused_naming_file_and_pair(files, elmo):
    from downstream.data.input_limits import DEFAULT_MAX_TOKENS

    with pytest.raises(UserError) as raised:
        data(files).check_inputs(load_encoder(elmo), "features")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        f"--data.dev={files['dev']}: pair dev-long has a sentence1 of {LONG} tokens, more than "
        f"{DEFAULT_MAX_TOKENS} (--data.max_tokens)"
    )


def test_the_encoders_positions_set_the_limit_when_lower(files, save_encoder, tmp_path):
    path, _ = save_encoder("gpt", tmp_path)  # max_positions 64
    for kind in ("tokens", "joint"):
        with pytest.raises(UserError) as raised:
            data(files).check_inputs(load_encoder(path), kind)
        assert "this gpt encoder's max_positions 64" in str(raised.value)


def test_a_raised_cap_still_refuses_features_that_cannot_fit_in_memory(files, elmo, monkeypatch):
    monkeypatch.setattr("downstream.data.pair_datamodule.available_bytes", lambda device: 2**30)
    with pytest.raises(UserError) as raised:
        data(files, max_tokens=200_000).check_inputs(load_encoder(elmo), "features")
    message = str(raised.value)
    assert (
        message.startswith(
            f"--data.max_tokens=200000: frozen features of a batch of the longest sentences ({LONG} tokens) need about "
        )
        and "only 1.0 GiB of memory is free" in message
    )


def test_short_pairs_pass(files, elmo):
    short = {split: path for split, path in files.items()}
    short["dev"] = files["test"].with_name("dev-short.tsv")
    short["dev"].write_text("".join(files["dev"].read_text().splitlines(keepends=True)[:-1]), encoding="utf-8")
    data(short).check_inputs(load_encoder(elmo), "features")


def test_a_data_module_built_without_flags_checks_its_registry_data_set(mrpc_dir, elmo):
    """The default data set, no ``dataset`` flag passed: its splits are named by the data set."""
    PairDataModule(mrpc_dir=str(mrpc_dir), cache_dir="none", max_pairs=20).check_inputs(load_encoder(elmo), "features")


@pytest.mark.slow
def test_the_cli_under_a_memory_budget_refuses_in_one_line(files, elmo, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "OMP_NUM_THREADS": "1"}

    def budget():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BUDGET, MEMORY_BUDGET))

    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "downstream",
            "fit",
            "--config",
            str(FINETUNE_SMOKE),
            f"--model.encoder={elmo}",
            "--data.dataset=tsv",
            f"--data.train={files['train']}",
            f"--data.dev={files['dev']}",
            f"--data.test={files['test']}",
            f"--data.cache_dir={tmp_path / 'cache'}",
            "--trainer.enable_progress_bar=false",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=budget,
    )
    assert process.returncode == 2, process.stderr[-3000:]
    lines = process.stderr.strip().splitlines()
    assert "Traceback" not in process.stderr and lines[-1].startswith(
        f"error: --data.dev={files['dev']}: pair dev-long"
    )
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    assert not client.search_runs(experiments, run_view_type=ViewType.ALL)  # refused before any run
