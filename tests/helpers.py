"""Helpers shared by the test modules that run the real CLIs against a store of their own: the
CLI in a subprocess, every run of a store, the run a summary printed, and the one-line-error
checks (``from tests.helpers import ...``)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from tests import preloaded

REPO = Path(__file__).resolve().parents[1]
CLI_TIMEOUT = 600  # seconds: a smoke run takes under a minute, a loaded 2-core machine several
RUN_ID = re.compile(r"^  run +([0-9a-f]{32})\b", re.MULTILINE)  # the `run` line of a stage's summary


def store_uri(store: str | Path) -> str:
    """A tracking URI, or a folder's ``mlflow.db`` as one."""
    return f"sqlite:///{Path(store) / 'mlflow.db'}" if isinstance(store, Path) else store


def cli_env(uri: str, mrpc_dir: str | Path | None = None, **extra: str) -> dict:
    """The environment of a CLI under test: its store, the MSR files, one thread, no progress bars."""
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
        **extra,
    }
    if mrpc_dir is not None:
        env["MRPC_DIR"] = str(mrpc_dir)
    return env


def run_module(
    module: str,
    *args: str,
    uri: str,
    cwd: Path,
    mrpc_dir: str | Path | None = None,
    timeout: float = CLI_TIMEOUT,
    **extra_env: str,
) -> subprocess.CompletedProcess:
    """``python -m <module> <args>`` in ``cwd`` against the store ``uri``; output captured. It runs
    as a fork of the preloaded Python (:mod:`tests.preloaded`), a new process without the import cost."""
    env = cli_env(uri, mrpc_dir, **extra_env)
    return subprocess.run(
        preloaded.command(module, *args, env=env), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def all_runs(store: str | Path, view: int = ViewType.ALL) -> list:
    """Every run of the store (a URI or a folder holding ``mlflow.db``), deleted experiments included."""
    client = MlflowClient(store_uri(store))
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    return client.search_runs(experiments, run_view_type=view, max_results=10_000) if experiments else []


def printed_run_id(process: subprocess.CompletedProcess) -> str:
    """The run id on the summary of a CLI that succeeded."""
    assert process.returncode == 0, process.stderr[-5000:]
    found = RUN_ID.search(process.stdout)
    assert found, process.stdout[-3000:]
    return found.group(1)


def assert_one_line_error(call, *fragments: str) -> str:
    """``call()`` raises a UserError of one line holding every fragment; returns the message."""
    with pytest.raises(UserError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def assert_one_line_exit(process: subprocess.CompletedProcess, *fragments: str) -> str:
    """A CLI stopped at a user error: exit 2, no traceback, one ``error:`` line (the last) holding
    every fragment; returns that line."""
    assert process.returncode == 2, process.stderr[-3000:]
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    lines = process.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == [lines[-1]], process.stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]
    return lines[-1]


def finetune_refused_before_any_run(files: dict[str, Path], encoder: str, tmp_path: Path, monkeypatch, capsys) -> str:
    """The smoke finetune CLI (in process) on the TSV splits ``files``: it stops at a user error
    (exit 2) before any run exists; returns its last stderr line."""
    from downstream.run.cli import FinetuneCLI
    from harness.cli.tracked_cli import run_cli

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    code = run_cli(
        FinetuneCLI,
        [
            "fit",
            "--config",
            str(REPO / "configs/downstream/smoke.yaml"),
            f"--model.encoder={encoder}",
            "--data.dataset=tsv",
            *(f"--data.{split}={path}" for split, path in files.items()),
        ],
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and all_runs(uri) == [], lines[-3:]
    return lines[-1]


def save_tiny_bilm(sentences, folder: Path) -> Path:
    """A tiny biLM (2 layers of H=8: L=3, D=16) over the words of ``sentences``, saved the way
    pretraining exports it; returns the checkpoint's path."""
    import torch

    from pretrain.encoders.checkpoints import slim_checkpoint
    from pretrain.lit_bilm import LitBiLM
    from pretrain.tokenization.words import Tokenizer

    tokenizer = Tokenizer.build(sentences)
    torch.manual_seed(0)
    lit = LitBiLM(vocab_size=len(tokenizer), hidden_size=8, num_layers=2, dropout=0.0)
    lit.tokenizer = tokenizer
    state = {"state_dict": lit.state_dict(), "hyper_parameters": dict(lit.hparams), "epoch": 0, "global_step": 0}
    lit.on_save_checkpoint(state)
    path = folder / "bilm.ckpt"
    torch.save(slim_checkpoint(state), path)
    return path


def mrpc_train_sentences(mrpc_dir: Path, pairs: int = 300) -> list[str]:
    """Both sentences of the first ``pairs`` MRPC train pairs."""
    from harness.datasets.mrpc import load_mrpc

    return [s for pair in load_mrpc(str(mrpc_dir)).train[:pairs] for s in (pair.sentence1, pair.sentence2)]
