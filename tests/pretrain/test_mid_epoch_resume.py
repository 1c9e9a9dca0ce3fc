"""A pretraining run killed in the middle of an epoch and resumed with ``--ckpt_path=last`` ends
bit for bit like its uninterrupted twin (one thread, CPU): from a checkpoint written after a batch
(``--checkpoint_every_minutes``) and from one written at a validation inside the epoch
(``val_check_interval``, as GPT's and ULMFiT's configs validate four times an epoch), for every
family (GPT's and ULMFiT's modules are not the CLI's default class: their checkpoint's
hyper-parameters must go to their own class)."""

import os
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from tests.helpers import all_runs, run_module, store_uri

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs" / "pretrain"
FAMILIES = {
    "elmo": [str(CONFIGS / "smoke.yaml")],
    "gpt": [str(CONFIGS / "gpt-tiny.yaml")],
    "ulmfit": [
        str(CONFIGS / "ulmfit.yaml"),
        "--model.embedding_size=16",
        "--model.hidden_size=24",
        "--data.corpus=mrpc",
        "--trainer.max_time=null",
    ],
}
# two epochs of 6 batches (of the 13 the 400 sentences make), a validation after every third
FLAGS = [
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=6",
    "--trainer.val_check_interval=3",
    "--trainer.limit_val_batches=2",
    "--data.max_sentences=400",
    "--samples_every_n_steps=0",
    "--checkpoint_every_minutes=0",
    "--trainer.enable_progress_bar=false",
]
KILL = "--trainer.callbacks+=kill_mid_epoch.KillAtBatch"

pytestmark = pytest.mark.slow


def pretrain(directory: Path, mrpc_dir: Path, family: str, *flags: str, **env: str):
    config, *family_flags = FAMILIES[family]
    return run_module(
        "pretrain",
        "fit",
        "--config",
        config,
        *family_flags,
        *FLAGS,
        *flags,
        uri=store_uri(directory),
        cwd=directory,
        mrpc_dir=mrpc_dir,
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(REPO)]),
        **env,
    )


def history(directory: Path, run_id: str, metric: str) -> list[tuple[int, float]]:
    client = MlflowClient(store_uri(directory))
    return sorted((point.step, point.value) for point in client.get_metric_history(run_id, metric))


def weights(directory: Path, run_id: str, name: str) -> dict:
    return torch.load(directory / "checkpoints" / "pretrain" / run_id / name, weights_only=True)["state_dict"]


@pytest.fixture(scope="module")
def twins(tmp_path_factory, real_mrpc_dir):
    """The uninterrupted run of a family (store folder, run id), made once."""
    made = {}

    def twin(family: str) -> tuple[Path, str]:
        if family not in made:
            directory = tmp_path_factory.mktemp(f"twin-{family}")
            process = pretrain(directory, real_mrpc_dir, family)
            assert process.returncode == 0, process.stderr[-3000:]
            (run,) = all_runs(directory)
            made[family] = directory, run.info.run_id
        return made[family]

    return twin


# 0:2 — the last save came after batch 1 (the interval); 1:3 — at the validation after batch 2
# of the second epoch.
@pytest.mark.parametrize("family, kill_at", [("elmo", "0:2"), ("elmo", "1:3"), ("gpt", "1:3"), ("ulmfit", "0:2")])
def test_a_run_killed_mid_epoch_resumes_to_the_same_weights(tmp_path, real_mrpc_dir, twins, family, kill_at):
    killed = pretrain(tmp_path, real_mrpc_dir, family, KILL, KILL_AT_BATCH=kill_at)
    assert killed.returncode == -9, killed.stderr[-3000:]
    (last,) = tmp_path.glob("checkpoints/pretrain/*/last.ckpt")
    saved = torch.load(last, weights_only=True)
    assert saved["CorpusDataModule"]["skip"] == int(kill_at.split(":")[1]), "not a mid-epoch checkpoint"
    resumed = pretrain(tmp_path, real_mrpc_dir, family, "--ckpt_path=last")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "not resumable" not in resumed.stderr
    (run,) = all_runs(tmp_path)
    assert run.info.status == "FINISHED"
    twin_directory, twin_run = twins(family)
    for metric in ("val_ppl", "train_loss"):
        assert history(tmp_path, run.info.run_id, metric) == history(twin_directory, twin_run, metric), metric
    for name in ("last.ckpt", "encoder.ckpt"):
        resumed_weights, uninterrupted = (
            weights(tmp_path, run.info.run_id, name),
            weights(twin_directory, twin_run, name),
        )
        assert resumed_weights.keys() == uninterrupted.keys()
        for key, value in uninterrupted.items():
            assert torch.equal(resumed_weights[key], value), (name, key)
