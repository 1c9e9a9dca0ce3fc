"""Running a benchmark's cells: each is found again by its settings hash (and reused or linked) or
run; finetune cells run ``jobs`` at a time, each in a worker process of its own.

Finetune cells run single-threaded (``benchmarks.cells.FINETUNE_THREADS``), so on a machine with
C cores ``jobs = C`` keeps every core busy; each worker is a fresh (spawned) interpreter that runs
many cells in turn, so the imports and the CUDA/OpenMP state are never forked. Workers share the
feature cache (written atomically, under the writer's pid) and the tracking store.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from mlflow.tracking import MlflowClient

from benchmarks.cells import Cell, baseline, finetune, finished_run, settings_hash
from benchmarks.matrix import repo_path
from harness.pairdata import PairData
from harness.tracking import tracking_uri


def timed_finetune(*arguments) -> tuple[str, float]:
    """:func:`benchmarks.cells.finetune` in a worker: the run id and the cell's own wall seconds."""
    started = time.perf_counter()
    return finetune(*arguments), time.perf_counter() - started


def default_jobs() -> int:
    """One worker per core this process may use (a finetune cell is single-threaded), at most 4:
    every worker holds its own interpreter, model and mapped features (~0.5–1 GB on MRPC)."""
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


@dataclass
class Job:
    """A cell to run, with what its run needs."""

    number: int
    cell: Cell
    cell_config: str
    cell_hash: str


class CellRunner:
    """Runs the cells of one benchmark under ``parent`` and prints a line per cell as it ends."""

    def __init__(self, config: dict, finetune_config: str, parent: str, data: PairData, logs: Path, jobs: int):
        self.config, self.finetune_config, self.parent, self.data = config, finetune_config, parent, data
        self.logs, self.jobs = logs, jobs
        self.client = MlflowClient(tracking_uri())

    def run(self, cells: list[Cell]) -> list[tuple[Cell, str]]:
        """Every cell's run id, in the order of ``cells``."""
        self.total = len(cells)
        run_ids: dict[int, str] = {}
        pending: list[Job] = []
        for number, cell in enumerate(cells, start=1):
            job = self.job(number, cell)
            run_id = finished_run(self.config["experiment"], job.cell_hash, self.parent)
            if run_id is not None:
                owner = self.client.get_run(run_id).data.tags.get("mlflow.parentRunId")
                self.report(job, run_id, "reused" if owner == self.parent else f"linked from benchmark {str(owner)[:8]}")
                run_ids[number] = run_id
            elif cell.kind == "baseline":  # seconds, in this process
                started = time.perf_counter()
                run_ids[number] = baseline(cell, self.data, self.config["experiment"], self.parent, job.cell_hash,
                                           self.config["name"])
                self.report(job, run_ids[number], f"{time.perf_counter() - started:.0f} s")
            else:
                pending.append(job)
        run_ids.update(self.run_inline(pending) if self.jobs <= 1 or len(pending) <= 1 else self.run_parallel(pending))
        return [(cell, run_ids[number]) for number, cell in enumerate(cells, start=1)]

    def job(self, number: int, cell: Cell) -> Job:
        cell_config = str(repo_path(cell.config)) if cell.config else self.finetune_config
        config_text = Path(cell_config).read_text() if Path(cell_config).is_file() else ""
        cell_hash = settings_hash({**cell.spec(), "method": cell.method, "config_text": config_text,
                                   "data": self.data.content_hash})
        return Job(number, cell, cell_config, cell_hash)

    def arguments(self, job: Job) -> tuple:
        log_path = self.logs / f"{job.cell.method}-seed{job.cell.seed}.log".replace(":", "")
        return (job.cell, job.cell_config, self.config["experiment"], self.parent, job.cell_hash, log_path,
                self.config["name"])

    def run_inline(self, jobs: list[Job]) -> dict[int, str]:
        run_ids = {}
        for job in jobs:
            started = time.perf_counter()
            run_ids[job.number] = finetune(*self.arguments(job))
            self.report(job, run_ids[job.number], f"{time.perf_counter() - started:.0f} s")
        return run_ids

    def run_parallel(self, jobs: list[Job]) -> dict[int, str]:
        """``self.jobs`` cells at a time. The first failure stops the queue: the cells still running
        finish, the rest never start, and the failure is raised (one line naming the cell's log)."""
        run_ids = {}
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(self.jobs, len(jobs)), mp_context=context) as pool:
            submitted: dict[Future, Job] = {}
            try:
                for job in jobs:
                    submitted[pool.submit(timed_finetune, *self.arguments(job))] = job
                remaining = set(submitted)
                while remaining:
                    finished, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                    for future in finished:
                        job = submitted[future]
                        run_ids[job.number], seconds = future.result()
                        self.report(job, run_ids[job.number], f"{seconds:.0f} s")
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        return run_ids

    def report(self, job: Job, run_id: str, status: str) -> None:
        metrics = self.client.get_run(run_id).data.metrics
        print(f"  [{job.number:>3}/{self.total}] {job.cell.method:<34} seed {job.cell.seed}  "
              f"dev acc {metrics['dev_acc']:.3f}  test acc {metrics['test_acc']:.3f}  ({status}{time_split(metrics)})",
              flush=True)


def time_split(metrics: dict) -> str:
    """``: fit 12, eval 2, total 16 s`` from a finetune run's time metrics; "" for runs without them."""
    if "time_total_s" not in metrics:
        return ""
    return (f": fit {metrics['time_fit_s']:.0f}, eval {metrics['time_eval_s']:.0f}, "
            f"total {metrics['time_total_s']:.0f} s")
