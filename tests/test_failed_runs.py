"""A run that crashes after it started is marked FAILED, never left RUNNING: pretraining,
fine-tuning, and a benchmark cell (with its parent). The crash is real: Lightning's own
EarlyStopping, told to watch a metric no stage logs, raises at the end of the first validation —
after the MLflow run exists and has logged."""

import subprocess
from pathlib import Path

import pytest

from tests.helpers import all_runs, run_module, store_uri

REPO = Path(__file__).resolve().parents[1]
CRASH = ["--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.monitor=no_such_metric"]

pytestmark = pytest.mark.slow


def run(directory: Path, mrpc_dir: Path, *command: str) -> subprocess.CompletedProcess:
    return run_module(*command, uri=store_uri(directory), cwd=directory, mrpc_dir=mrpc_dir)


@pytest.fixture(scope="module")
def store(tmp_path_factory, mrpc_dir) -> Path:
    directory = tmp_path_factory.mktemp("crash")
    process = run(
        directory,
        mrpc_dir,
        "pretrain",
        "fit",
        "--config",
        str(REPO / "configs/pretrain/smoke.yaml"),
        "--trainer.enable_progress_bar=false",
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return directory


def test_a_pretraining_that_crashes_mid_run_is_failed(store, mrpc_dir):
    before = {r.info.run_id for r in all_runs(store)}
    process = run(
        store,
        mrpc_dir,
        "pretrain",
        "fit",
        "--config",
        str(REPO / "configs/pretrain/smoke.yaml"),
        "--trainer.enable_progress_bar=false",
        *CRASH,
    )
    assert process.returncode != 0 and "no_such_metric" in process.stderr
    new = [r for r in all_runs(store) if r.info.run_id not in before]
    assert len(new) == 1 and new[0].info.status == "FAILED"
    assert new[0].data.metrics.get("train_loss") is not None  # it really ran before it crashed


def test_a_finetune_that_crashes_mid_run_is_failed(store, mrpc_dir):
    before = {r.info.run_id for r in all_runs(store)}
    process = run(
        store,
        mrpc_dir,
        "downstream",
        "fit",
        "--config",
        str(REPO / "configs/downstream/smoke.yaml"),
        f"--data.cache_dir={store / 'cache'}",
        "--trainer.enable_progress_bar=false",
        *CRASH,
    )
    assert process.returncode != 0 and "no_such_metric" in process.stderr
    new = [r for r in all_runs(store) if r.info.run_id not in before]
    assert len(new) == 1 and new[0].info.status == "FAILED" and new[0].data.tags["stage"] == "finetune"


def test_a_benchmark_whose_cell_crashes_leaves_nothing_running(store, mrpc_dir):
    before = {r.info.run_id for r in all_runs(store)}
    finetune_args = " ".join(
        ["--data.max_pairs=100", "--trainer.max_epochs=1", f"--data.cache_dir={store / 'cache'}", *CRASH]
    )
    process = run(
        store,
        mrpc_dir,
        "benchmarks.suite",
        "--config",
        str(REPO / "configs/benchmarks/quick.yaml"),
        "--results-dir",
        str(store / "results"),
        "--finetune-args",
        finetune_args,
        "--pretrain-args",
        "--data.max_sentences=300 --model.hidden_size=16 --trainer.limit_val_batches=3",
    )
    assert process.returncode == 2, process.stderr[-3000:]
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cell ") and "no_such_metric" in last  # the cell's own reason, in one line
    assert ".log" in last.rsplit("its output is in ", 1)[-1]
    new = [r for r in all_runs(store) if r.info.run_id not in before]
    statuses = {}  # stage → the statuses of its new runs
    for r in new:
        statuses.setdefault(r.data.tags.get("stage"), set()).add(r.info.status)
    # the first finetune cell crashed; whatever ran beside it (two at a time: the other finetune cell,
    # or a baseline still running on a slow machine) crashed too or was cancelled, and the parent
    # says the benchmark failed; baselines that finished stay FINISHED and will be reused
    assert statuses["benchmark"] == {"FAILED"} and "FAILED" in statuses["finetune"]
    (parent,) = [r for r in new if r.data.tags.get("stage") == "benchmark"]
    assert parent.data.tags["harness.ended"] == "failed: " + last.removeprefix("error: ")
    assert statuses["finetune"] <= {"FAILED", "KILLED"}
    assert statuses.get("baseline", {"FINISHED"}) <= {"FINISHED", "KILLED"}
    assert not [r for r in all_runs(store) if r.info.status == "RUNNING"]
