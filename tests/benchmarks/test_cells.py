"""A benchmark cell runs a real CLI inside the suite's (or a worker's) process: once it has
finished, nothing of it may stay alive, or every worker holds the previous cell's mapped features
beside the next one's (with MRPC's features at ~700 MB a store, that doubled a worker's memory)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from benchmarks.tasks.cells import run_quietly
from downstream.run.cli import FinetuneCLI

REPO = Path(__file__).resolve().parents[2]
LEFT_BEHIND = ("FinetuneCLI", "Trainer", "PairDataModule", "FeatureStore")


def alive() -> dict[str, int]:
    gc.collect()
    counts = dict.fromkeys(LEFT_BEHIND, 0)
    for thing in gc.get_objects():
        if type(thing).__name__ in counts:
            counts[type(thing).__name__] += 1
    return counts


def mapped_features() -> list[str]:
    return [line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "features.npy" in line]


@pytest.mark.slow
def test_a_finished_cell_leaves_no_cli_data_or_mapped_features(tmp_path, mrpc_dir, save_encoder, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    encoder, _ = save_encoder("elmo", tmp_path)
    before = alive()
    for seed in (0, 1):
        args = [
            "fit",
            "--config",
            str(REPO / "configs/downstream/smoke.yaml"),
            f"--model.encoder={encoder}",
            f"--seed_everything={seed}",
            "--trainer.max_epochs=1",
            "--trainer.enable_progress_bar=false",
            f"--data.cache_dir={tmp_path / 'cache'}",
            f"--trainer.default_root_dir={tmp_path}",
        ]
        log = tmp_path / f"cell-{seed}.log"
        assert run_quietly(FinetuneCLI, args, log) == 0, log.read_text()[-3000:]
        assert alive() == before, f"after cell {seed}"
        assert not [path for path in mapped_features() if str(tmp_path) in path]


def test_a_cells_log_holds_each_line_as_soon_as_it_is_printed(tmp_path):
    """A pretraining stage runs for an hour: its progress lines must be in its log while it runs."""
    log = tmp_path / "stage.log"
    seen = []

    class Talking:
        def __init__(self, args):
            print("epoch 1/3  step 100  train_loss 5.1")
            seen.append(log.read_text())

    assert run_quietly(Talking, [], log) == 0
    assert seen == ["epoch 1/3  step 100  train_loss 5.1\n"]
