"""Faithful resume of the real ``python -m pretrain`` CLI: a run killed with SIGKILL after its first
checkpoint, resumed with ``--ckpt_path=last``, continues the same MLflow run and ends with the
same metrics and weights as its uninterrupted twin (bit for bit: one thread, CPU). Also how a
checkpoint that cannot be resumed from, and other bad settings, end: one line, exit 2, no run
left RUNNING."""

import os
import subprocess
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from harness.cli.tracked_cli import run_cli
from pretrain.cli import PretrainCLI
from tests.helpers import all_runs, assert_one_line_exit, run_module, store_uri

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
# Three short epochs, a learning rate high enough that held-out perplexity gets worse after the
# first epoch, so the plateau scheduler halves it: a resume must replay that step too.
FLAGS = [
    "--trainer.max_epochs=3",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=2",
    "--data.max_sentences=200",
    "--model.learning_rate=0.08",
    "--model.plateau_patience=0",
    "--samples_every_n_steps=0",
    "--trainer.enable_progress_bar=false",
]
KILL = "--trainer.callbacks+=kill_after_first_epoch.KillAfterFirstEpoch"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mrpc_dir(real_mrpc_dir) -> Path:
    return real_mrpc_dir


def pretrain(directory: Path, mrpc_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return run_module(
        "pretrain",
        "fit",
        "--config",
        str(SMOKE),
        *FLAGS,
        *flags,
        uri=store_uri(directory),
        cwd=directory,
        mrpc_dir=mrpc_dir,
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(REPO)]),
    )


def history(directory: Path, run_id: str, metric: str) -> list[tuple[int, float]]:
    client = MlflowClient(f"sqlite:///{directory / 'mlflow.db'}")
    return sorted((point.step, point.value) for point in client.get_metric_history(run_id, metric))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mrpc_dir) -> dict:
    """An uninterrupted run; a twin killed after its first epoch; a start that stops at a user
    error on the killed store; then ``--ckpt_path=last`` there. The runs in the stores after each."""
    twin, killed = tmp_path_factory.mktemp("twin"), tmp_path_factory.mktemp("killed")
    found = {"twin": twin, "killed": killed, "mrpc_dir": mrpc_dir, "twin_process": pretrain(twin, mrpc_dir)}
    found["kill_process"] = pretrain(killed, mrpc_dir, KILL)
    found["after_kill"] = all_runs(killed)
    found["missing"] = pretrain(killed, mrpc_dir, f"--ckpt_path={killed / 'missing.ckpt'}")
    found["after_missing"] = all_runs(killed)
    lasts = list(killed.glob("checkpoints/pretrain/*/last.ckpt"))
    found["epochs_of_last"] = [torch.load(last, weights_only=True)["epoch"] for last in lasts]
    found["resumed"] = pretrain(killed, mrpc_dir, "--ckpt_path=last")
    found["after_resume"] = all_runs(killed)
    found["twin_runs"] = all_runs(twin)
    return found


def test_the_runs_ran_as_planned(runs):
    assert runs["twin_process"].returncode == 0, runs["twin_process"].stderr[-3000:]
    assert runs["kill_process"].returncode == -9, runs["kill_process"].stderr[-3000:]
    assert runs["epochs_of_last"] == [0]
    assert runs["resumed"].returncode == 0, runs["resumed"].stderr[-3000:]


def test_a_killed_run_is_marked_killed_at_the_next_start(runs):
    assert [run.info.status for run in runs["after_kill"]] == ["RUNNING"]
    assert [(run.info.run_id, run.info.status) for run in runs["after_missing"]] == [
        (runs["after_kill"][0].info.run_id, "KILLED")
    ]
    assert_one_line_exit(runs["missing"], "--ckpt_path=", "missing.ckpt: no such file")


def test_resume_continues_the_same_run(runs):
    assert [(run.info.run_id, run.info.status) for run in runs["after_resume"]] == [
        (runs["after_kill"][0].info.run_id, "FINISHED")
    ]
    (run,) = runs["after_resume"]
    assert run.data.tags["harness.resumed_from"].endswith("last.ckpt")
    assert "harness.ended" not in run.data.tags
    client = MlflowClient(f"sqlite:///{runs['killed'] / 'mlflow.db'}")
    names = {artifact.path for artifact in client.list_artifacts(run.info.run_id)}
    assert "config.yaml" in names and any(name.startswith("config-resumed-") for name in names)


def test_resumed_run_ends_like_its_uninterrupted_twin(runs):
    (run,), (twin,) = runs["after_resume"], runs["twin_runs"]
    for metric in ("val_ppl", "val_ppl_fwd", "val_ppl_bwd", "train_loss"):
        assert history(runs["killed"], run.info.run_id, metric) == history(runs["twin"], twin.info.run_id, metric), (
            metric
        )
    assert run.data.metrics["val_ppl"] == twin.data.metrics["val_ppl"]
    for name in ("last.ckpt", "encoder.ckpt"):
        resumed = torch.load(runs["killed"] / "checkpoints" / "pretrain" / run.info.run_id / name, weights_only=True)
        uninterrupted = torch.load(
            runs["twin"] / "checkpoints" / "pretrain" / twin.info.run_id / name, weights_only=True
        )
        assert resumed["state_dict"].keys() == uninterrupted["state_dict"].keys()
        for key, value in uninterrupted["state_dict"].items():
            assert torch.equal(resumed["state_dict"][key], value), (name, key)


class Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_a_crafted_best_model_path_does_not_run_its_payload(runs, tmp_path):
    """A real checkpoint whose ModelCheckpoint state points at a pickle payload in the run's
    folder: resuming reads the 'best' checkpoint at the end and must refuse it."""
    twin, run_id = runs["twin"], runs["twin_runs"][0].info.run_id
    folder = twin / "checkpoints" / "pretrain" / run_id
    marker = tmp_path / "payload-ran"
    torch.save({"state_dict": {}, "payload": Payload(marker)}, folder / "evil.ckpt")
    checkpoint = torch.load(folder / "best.ckpt", weights_only=True)  # a full training checkpoint of epoch 0
    (key,) = [key for key in checkpoint["callbacks"] if key.startswith("ModelCheckpoint") and "val_ppl" in key]
    checkpoint["callbacks"][key]["best_model_path"] = str(folder / "evil.ckpt")
    torch.save(checkpoint, folder / "crafted.ckpt")
    # max_epochs=1: nothing is left to train, so the fit goes straight to the export of the "best"
    process = pretrain(twin, runs["mrpc_dir"], f"--ckpt_path={folder / 'crafted.ckpt'}", "--trainer.max_epochs=1")
    assert not marker.exists()
    assert_one_line_exit(process, "evil.ckpt", "refused to load")
    (run,) = all_runs(twin)
    assert run.info.status == "FAILED"


@pytest.mark.parametrize(
    "flag, fragments",
    [
        ("--data.batch_size=0", ["--data.batch_size=0", "at least 1"]),
        ("--data.batch_size=-1", ["--data.batch_size=-1", "at least 1"]),
        ("--trainer.max_epochs=0", ["--trainer.max_epochs=0", "nothing would be trained"]),
        ("--ckpt_path=CORRUPT", ["--ckpt_path=", "truncated, or not a torch checkpoint"]),
    ],
    ids=["batch-0", "batch-negative", "max-epochs-0", "corrupt-ckpt"],
)
def test_bad_settings_end_in_one_line_and_leave_no_run(tmp_path, mrpc_dir, monkeypatch, capsys, flag, fragments):
    """In this process (these stop before any data is read): one line, exit 2, no run."""
    if flag == "--ckpt_path=CORRUPT":
        corrupt = tmp_path / "last.ckpt"
        torch.save({"state_dict": {"weight": torch.zeros(1000)}, "loops": {}}, corrupt)
        corrupt.write_bytes(corrupt.read_bytes()[:2048])  # a copy cut short
        flag = f"--ckpt_path={corrupt}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.chdir(tmp_path)
    code = run_cli(PretrainCLI, ["fit", "--config", str(SMOKE), *FLAGS, flag])
    stderr = capsys.readouterr().err
    assert_one_line_exit(subprocess.CompletedProcess([], code, "", stderr), *fragments)
    assert not (tmp_path / "mlflow.db").exists() or all_runs(tmp_path) == []


def test_without_validation_the_export_lands_in_the_runs_own_folder(tmp_path, mrpc_dir, monkeypatch, capsys):
    """The slim encoder.ckpt lands in the run's folder, not a shared <root>/checkpoints/, when no
    validation ran."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.chdir(tmp_path)
    code = run_cli(
        PretrainCLI,
        [
            "fit",
            "--config",
            str(SMOKE),
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=2",
            "--trainer.limit_val_batches=0",
            "--data.max_sentences=64",
            "--samples_every_n_steps=0",
            "--trainer.enable_progress_bar=false",
        ],
    )
    assert code == 0, capsys.readouterr().err[-3000:]
    (run,) = all_runs(tmp_path)
    assert run.info.status == "FINISHED"
    assert sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.glob("checkpoints/**/*.ckpt")) == [
        f"checkpoints/pretrain/{run.info.run_id}/encoder.ckpt",
        f"checkpoints/pretrain/{run.info.run_id}/last.ckpt",
    ]
