"""What an import may write into a store, whatever a folder says: a cell's own tags only (no
``mlflow.*`` tag but its run name, no stage but a cell's), never into an experiment encoders are
resolved from (``pretrain``, ``$ENCODER_EXPERIMENTS``: an imported run there could become
``latest``), never a start or end time in the future (a copy that sorts first everywhere). Each
refusal is one line naming the file."""

from __future__ import annotations

import time
from pathlib import Path

from harness.errors import UserError
from harness.tracking.experiment_names import experiment_name
from pretrain.encoders.trusted import encoder_experiments

# The tags the harness itself gives a cell's run (``downstream.run.cli``, ``benchmarks.tasks.cells``):
# nothing else of a folder's ``tags`` is imported.
CELL_TAGS = (
    "stage",
    "method",
    "seed",
    "kind",
    "dataset",
    "task",
    "benchmark",
    "encoder",
    "encoder_source",
    "family",
    "suite_encoder",
    "pretrain_run_id",
    "finetune_mode",
    "mix",
    "head",
    "train_fraction",
    "probe_of",
    "grid_of",
    "learning_rate",
    "recipe_from",
    "mlflow.runName",
    "harness.checkpoint_dir",
    "harness.resumed_from",
    "harness.changed_params",
)
CELL_STAGES = ("finetune", "baseline")
CLOCK_SKEW_MS = 10 * 60 * 1000  # another machine's clock may run this far ahead


def cell_tags(tags: object, path: Path) -> dict[str, str]:
    """The harness's own cell tags of a record's ``tags``; a stage that is not a cell's is one line."""
    if not isinstance(tags, dict):
        raise UserError(f"{path}: `tags` is not a mapping")
    kept = {key: str(value) for key, value in tags.items() if key in CELL_TAGS}
    if kept.get("stage", CELL_STAGES[0]) not in CELL_STAGES:
        raise UserError(
            f"{path}: tag stage={kept['stage']!r} is not a cell's ({' or '.join(CELL_STAGES)}); not imported"
        )
    return kept


def target_experiment(benchmark: dict, folder: Path) -> str:
    """The experiment a folder's cells go to; one that encoders are resolved from is refused."""
    experiment = experiment_name(str(benchmark.get("experiment") or benchmark["dataset"]), f"{folder}: experiment")
    if experiment in encoder_experiments():
        raise UserError(
            f"{folder}: targets experiment '{experiment}', where encoders are resolved from "
            f"(pretrain and $ENCODER_EXPERIMENTS); a results folder's cells may not go there"
        )
    return experiment


def run_times(run: object, path: Path, now_ms: int | None = None) -> tuple[int | None, int | None]:
    """A record's start and end times (epoch ms); a time in the future or of a wrong type is one line."""
    if not isinstance(run, dict):
        raise UserError(f"{path}: `run` is not a mapping")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    times = []
    for key in ("start_time", "end_time"):
        value = run.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UserError(f"{path}: run.{key} {value!r} is not a time in milliseconds")
        if value is not None and value > now_ms + CLOCK_SKEW_MS:
            raise UserError(
                f"{path}: run.{key} {value} lies in the future "
                f"({time.strftime('%Y-%m-%d', time.gmtime(value / 1000))}); not imported"
            )
        times.append(value)
    return times[0], times[1]
