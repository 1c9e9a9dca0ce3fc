"""Ctrl-C and SIGTERM end a stage's run KILLED, never FAILED: tagged ``harness.ended`` with the
signal, the exit status a shell gives the signal, one line saying how to continue the run (and
the flag it names does), and ``latest`` never takes the interrupted run for a finished one. The
signals are real: the process sends them to itself as a training batch starts."""

import os
import re
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.tracking.liveness import ENDED_TAG
from tests.helpers import all_runs, run_module, store_uri

REPO = Path(__file__).resolve().parents[1]
INTERRUPT = "--trainer.callbacks+=interrupt_at_batch.InterruptAtBatch"
PRETRAIN = [
    "pretrain",
    "fit",
    "--config",
    str(REPO / "configs/pretrain/smoke.yaml"),
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=2",
    "--samples_every_n_steps=0",
    "--trainer.enable_progress_bar=false",
]
RESUME = re.compile(r"continue it with (--ckpt_path=\S+)$")

pytestmark = pytest.mark.slow


def run(directory: Path, mrpc_dir: Path, *command: str, **env: str) -> subprocess.CompletedProcess:
    return run_module(
        *command,
        uri=store_uri(directory),
        cwd=directory,
        mrpc_dir=mrpc_dir,
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(REPO)]),
        **env,
    )


def new_runs(store: Path, before: set[str]) -> list:
    return [found for found in all_runs(store) if found.info.run_id not in before]


@pytest.fixture(scope="module")
def store(tmp_path_factory, mrpc_dir) -> Path:
    """A store with one finished pretraining (what `latest` must keep finding)."""
    directory = tmp_path_factory.mktemp("interrupted")
    process = run(directory, mrpc_dir, *PRETRAIN)
    assert process.returncode == 0, process.stderr[-3000:]
    return directory


@pytest.fixture(scope="module")
def interrupted_pretraining(store, mrpc_dir) -> dict:
    """Ctrl-C in the second epoch, after the first epoch's checkpoint."""
    before = {found.info.run_id for found in all_runs(store)}
    process = run(store, mrpc_dir, *PRETRAIN, INTERRUPT, INTERRUPT_AT_BATCH="1:1", INTERRUPT_SIGNAL="INT")
    return {"process": process, "runs": new_runs(store, before), "before": before}


def test_ctrl_c_ends_a_pretraining_killed_with_a_tag_and_how_to_continue(interrupted_pretraining):
    process, runs = interrupted_pretraining["process"], interrupted_pretraining["runs"]
    assert process.returncode == 130, process.stderr[-3000:]
    assert [found.info.status for found in runs] == ["KILLED"]
    assert runs[0].data.tags[ENDED_TAG].startswith("interrupted (Ctrl-C)")
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: interrupted (Ctrl-C): run {runs[0].info.run_id} marked KILLED; "), last
    assert (
        RESUME.search(last) and RESUME.search(last).group(1).endswith("last.ckpt") and "Traceback" not in process.stderr
    )


def test_latest_never_takes_an_interrupted_run_for_a_finished_one(store, interrupted_pretraining, monkeypatch):
    from pretrain.encoders.loading import latest_pretrain_run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(store))
    assert latest_pretrain_run() in interrupted_pretraining["before"]


def test_the_printed_flag_continues_the_interrupted_run_to_finished(store, mrpc_dir, interrupted_pretraining):
    killed = interrupted_pretraining["runs"][0].info.run_id
    flag = RESUME.search(interrupted_pretraining["process"].stderr.strip().splitlines()[-1]).group(1)
    process = run(store, mrpc_dir, *PRETRAIN, flag)
    assert process.returncode == 0, process.stderr[-3000:]
    resumed = MlflowClient(store_uri(store)).get_run(killed)
    assert resumed.info.status == "FINISHED" and ENDED_TAG not in resumed.data.tags


def test_sigterm_ends_a_finetune_killed_with_a_tag_saying_so(store, mrpc_dir):
    before = {found.info.run_id for found in all_runs(store)}
    process = run(
        store,
        mrpc_dir,
        "downstream",
        "fit",
        "--config",
        str(REPO / "configs/downstream/smoke.yaml"),
        f"--data.cache_dir={store / 'cache'}",
        "--trainer.enable_progress_bar=false",
        INTERRUPT,
        INTERRUPT_AT_BATCH="0:1",
        INTERRUPT_SIGNAL="TERM",
    )
    assert process.returncode == 143, process.stderr[-3000:]
    runs = new_runs(store, before)
    assert [(found.data.tags["stage"], found.info.status) for found in runs] == [("finetune", "KILLED")]
    assert runs[0].data.tags[ENDED_TAG].startswith("interrupted (SIGTERM)")
    assert process.stderr.strip().splitlines()[-1] == (
        f"error: interrupted (SIGTERM): run {runs[0].info.run_id} marked KILLED; it had written no checkpoint "
        f"yet: start it again"
    )
