"""The study's tasks — one pretraining stage, one finetune cell, one baseline or probe — as plain functions
the engine runs in a worker (or, with ``--jobs 1``, in the suite's process). Each sets its own
torch threads (Ray starts workers with ``OMP_NUM_THREADS=1``), is idempotent (a retried attempt
first looks for its finished run, then ends its lost predecessor's), and returns its run id, its
wall seconds and the node it ran on."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cell.definition import Cell
from benchmarks.plan.encoders import PRETRAIN_EXPERIMENT, Stage
from benchmarks.tasks.attempts import (
    attempt_tags,
    end_lost_attempts,
    finished_child,
    node_name,
    stopped_attempt_checkpoint,
)
from benchmarks.tasks.cells import FINETUNE_THREADS, baseline, finetune, finished_run, linear_probe, pretrain
from harness.cli.runtime import intra_op_threads
from harness.datasets.types import PairData
from harness.tracking.runs import ensure_experiment


@dataclass(frozen=True)
class Study:
    """What every task of one suite run shares."""

    name: str  # the benchmark's name
    experiment: str
    parent: str  # the parent run's id
    driver: str  # benchmarks.tasks.attempts.new_driver_id() of the suite process
    logs: Path
    data_digest: str


def result(run_id: str, started: float, reused: bool = False, resumed: bool = False) -> dict:
    return {
        "run_id": run_id,
        "seconds": time.perf_counter() - started,
        "node": node_name(),
        "reused": reused,
        "resumed": resumed,
    }


def run_stage(
    stage: Stage, previous_run_id: str | None, study: Study, threads: int, previous_hash: str | None = None
) -> dict:
    """Pretrain one stage with ``threads`` torch threads (continuing ``previous_run_id``, whose
    stage hash is ``previous_hash``); a stage an earlier attempt left stopped goes on from its last
    checkpoint."""
    started = time.perf_counter()
    cell_hash = stage.settings_hash(previous_hash, study.data_digest)
    found = finished_run(PRETRAIN_EXPERIMENT, cell_hash)
    if found is not None:
        return result(found, started, reused=True)
    end_lost_attempts(cell_hash, study.driver)
    checkpoint = stopped_attempt_checkpoint(ensure_experiment(PRETRAIN_EXPERIMENT), cell_hash)
    resume = [f"--ckpt_path={checkpoint}"] if checkpoint else []
    with intra_op_threads(threads):
        run_id = pretrain(
            stage.config,
            [*stage.flags(previous_run_id), *resume],
            cell_hash,
            study.name,
            study.logs / stage.log_name(),
            tags=attempt_tags(study.driver),
        )
    return result(run_id, started, resumed=checkpoint is not None)


def cell_log(logs: Path, cell: Cell) -> Path:
    return logs / f"{cell.method}-seed{cell.seed}.log".replace(":", "")


def run_once(cell_hash: str, study: Study, run: Callable[[], str]) -> dict:
    """The result of this cell's run that already finished under the parent, or else of ``run()``,
    called once the RUNNING runs of the cell's lost attempts are marked KILLED."""
    started = time.perf_counter()
    found = finished_child(ensure_experiment(study.experiment), cell_hash, study.parent)
    if found is not None:
        return result(found, started, reused=True)
    end_lost_attempts(cell_hash, study.driver)
    return result(run(), started)


def run_cell(cell: Cell, cell_config: str, cell_hash: str, study: Study) -> dict:
    """One finetune cell under the parent run (single-threaded: ``cells.FINETUNE_THREADS``)."""
    return run_once(
        cell_hash,
        study,
        lambda: finetune(
            cell,
            cell_config,
            study.experiment,
            study.parent,
            cell_hash,
            cell_log(study.logs, cell),
            study.name,
            tags=attempt_tags(study.driver),
        ),
    )


def run_baseline(cell: Cell, data: PairData, cell_hash: str, study: Study) -> dict:
    """One baseline (seconds) on the data the driver read and checked."""

    def run() -> str:
        with intra_op_threads(1):
            return baseline(
                cell, data, study.experiment, study.parent, cell_hash, study.name, tags=attempt_tags(study.driver)
            )

    return run_once(cell_hash, study, run)


def run_probe(cell: Cell, data: PairData, cell_hash: str, study: Study) -> dict:
    """One linear probe of an encoder's (or its twin's) frozen features, on the data the driver read."""

    def run() -> str:
        with intra_op_threads(FINETUNE_THREADS):
            return linear_probe(
                cell, data, study.experiment, study.parent, cell_hash, study.name, tags=attempt_tags(study.driver)
            )

    return run_once(cell_hash, study, run)
