"""The MLflow runs this process opens: created (or continued) with the stage's tags, and never
left RUNNING — a crash marks them FAILED, Ctrl-C or SIGTERM KILLED (tag ``harness.ended`` saying
so), and a tracking server that went away is explained in one line saying where the run's
checkpoints are."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from pytorch_lightning.loggers import MLFlowLogger
from pytorch_lightning.utilities import rank_zero_only

from harness.interruption import interruption
from harness.tracking.liveness import ENDED_TAG, process_tags
from harness.tracking.store import REPO_ROOT as REPO_ROOT  # re-exported
from harness.tracking.store import SERVER_SCHEMES, ensure_experiment, scheme_of, server_problem, tracking_uri
from harness.training.checkpoints import LAST

CHECKPOINT_DIR_TAG = "harness.checkpoint_dir"


@dataclass
class OpenRun:
    """A run this process started (or resumed), and where its local checkpoints go."""

    logger: MLFlowLogger
    checkpoint_dir: Path | None = None


# Runs of this process, so a crash anywhere can mark them FAILED (or say where their checkpoints are).
_OPEN_RUNS: list[OpenRun] = []


def interrupted_note(signal_name: str) -> str:
    """The ``harness.ended`` tag of a run an interruption ended."""
    return f"interrupted ({signal_name}) in process {os.getpid()}"


class TrackedLogger(MLFlowLogger):
    """Lightning ends its run FAILED on any exception it catches, Ctrl-C included; an interruption
    (:mod:`harness.interruption`) ends it KILLED, tagged ``harness.ended`` with the signal."""

    def finalize(self, status: str = "success") -> None:
        signal_name = interruption(sys.exc_info()[1]) if status == "failed" else None
        if signal_name and self._initialized and rank_zero_only.rank == 0:
            self.experiment.set_tag(self.run_id, ENDED_TAG, interrupted_note(signal_name))
            status = "KILLED"
        super().finalize(status)


def make_logger(experiment: str, run_name: str, tags: dict[str, str], run_id: str | None = None) -> MLFlowLogger:
    """An MLFlowLogger on :func:`tracking_uri`. A new run (created on first use) carries ``tags``
    and the process tags of :mod:`harness.tracking.liveness`; with ``run_id`` the logger continues that
    run, which is set RUNNING again under this process."""
    uri = tracking_uri()
    if run_id is None:
        ensure_experiment(experiment, uri)
        logger = TrackedLogger(
            experiment_name=experiment,
            run_name=run_name,
            tracking_uri=uri,
            tags={**{key: str(value) for key, value in tags.items()}, **process_tags()},
        )
    else:
        logger = TrackedLogger(tracking_uri=uri, run_id=run_id)
        if rank_zero_only.rank == 0:
            client = logger.experiment
            client.update_run(run_id, status="RUNNING")
            for key, value in {**tags, **process_tags()}.items():
                client.set_tag(run_id, key, str(value))
            if ENDED_TAG in client.get_run(run_id).data.tags:
                client.delete_tag(run_id, ENDED_TAG)
    _OPEN_RUNS.append(OpenRun(logger))
    return logger


def keep_checkpoints_in(logger: MLFlowLogger, directory: Path) -> None:
    """Note where the open run of ``logger`` writes its checkpoints: named if the server goes away,
    and in the run's ``harness.checkpoint_dir`` tag (where a study resumes a stopped stage from)."""
    for open_run in _OPEN_RUNS:
        if open_run.logger is logger:
            open_run.checkpoint_dir = directory
    if rank_zero_only.rank == 0:
        logger.experiment.set_tag(logger.run_id, CHECKPOINT_DIR_TAG, str(Path(directory).resolve()))


def fail_open_runs(status: str = "FAILED", ended: str | None = None) -> None:
    """Mark every run this process started and left RUNNING as ``status`` (``ended``: the
    ``harness.ended`` tag saying why; best effort: a store that cannot be reached is left as it is)."""
    for open_run in _OPEN_RUNS:
        logger = open_run.logger
        if not (logger._initialized and logger.run_id):  # only look, never create a run
            continue
        try:
            client = logger.experiment
            if client.get_run(logger.run_id).info.status == "RUNNING":
                if ended:
                    client.set_tag(logger.run_id, ENDED_TAG, ended)
                client.set_terminated(logger.run_id, status)
        except Exception:  # noqa: BLE001 - the store is gone; its next start marks the run (liveness)
            pass
    _OPEN_RUNS.clear()


def kill_open_runs(signal_name: str) -> str:
    """After Ctrl-C or SIGTERM: every run this process started and left RUNNING is KILLED, tagged
    with the signal. Returns what became of each run and how to continue it, for the one line
    the command ends with."""
    notes = []
    for open_run in _OPEN_RUNS:
        run_id = open_run.logger._run_id  # the id alone: the run may not have been created
        if not run_id:
            continue
        last = open_run.checkpoint_dir / LAST if open_run.checkpoint_dir else None
        resume = (
            f"continue it with --ckpt_path={last}"
            if last is not None and last.is_file()
            else "it had written no checkpoint yet: start it again"
        )
        notes.append(f"run {run_id} marked KILLED; {resume}")
    fail_open_runs("KILLED", interrupted_note(signal_name))
    return "; ".join(notes) or "no run was started"


def server_lost() -> str | None:
    """When this process has open runs and the tracking URI is a server that no longer answers:
    one line saying so, what became of the runs and how to continue them (the runs are then
    forgotten: nothing can close them). None otherwise."""
    uri = tracking_uri()
    if not _OPEN_RUNS or scheme_of(uri) not in SERVER_SCHEMES:
        return None
    problem = server_problem(uri, timeout=(2.0, 3.0))
    if problem is None:
        return None
    message = f"tracking server {uri} stopped answering during the run ({problem})"
    for open_run in _OPEN_RUNS:
        run_id = open_run.logger._run_id  # the id alone, no request to the dead server
        if not run_id:
            continue
        last = open_run.checkpoint_dir / LAST if open_run.checkpoint_dir else None
        if last is not None and last.is_file():
            message += (
                f"; run {run_id} stays RUNNING there; local checkpoints are kept in {last.parent}; "
                f"once the server is back, continue the same run with --ckpt_path={last}"
            )
        else:
            message += f"; run {run_id} had written no checkpoint yet: start it again once the server is back"
    _OPEN_RUNS.clear()
    return message
