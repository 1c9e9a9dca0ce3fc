"""One evaluation: an encoder on a list of tasks. Each task is a benchmark-suite study of its own
(:mod:`benchmarks.evaluate.task_matrix`: frozen features once, the probe, the heads, the twin and
the task's baselines, skipped where they finished before), a child of one evaluation parent run
(``stage=benchmark``, ``kind=evaluate``); zero-shot similarity beside it on graded tasks; the task's
cells exported to a results folder (``python -m benchmarks export``'s format); then the table across
tasks (:mod:`benchmarks.evaluate.table`) on the console and in ``table.md``.

Folder of an evaluation (``--out``, default ``benchmarks/results/evaluate/<encoder>``):
``table.md``, and per task ``<task>/matrix.yaml`` (what the suite ran), ``<task>/suite/`` (its
report and logs), ``<task>/suite.log`` (its console), ``<task>/results/`` (the exported cells) and
``<task>/zero-shot/<method>/s<seed>/`` (predictions and metrics).
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient

from benchmarks.cell.method_names import twin_name
from benchmarks.evaluate.table import TaskScores, console_table, markdown_table
from benchmarks.evaluate.task_matrix import TEMPLATE, task_benchmark, task_matrix
from benchmarks.evaluate.zero_shot_run import ST_POOLING, ZeroShot, log_zero_shot
from benchmarks.plan.encoders import is_published
from benchmarks.results_files.store_transfer import export_benchmark, newest_parent
from benchmarks.suite import main as suite_main
from downstream.data.pair_datamodule import DEFAULT_CACHE_DIR
from harness.datasets.registry import load_pair_data
from harness.datasets.types import PairData
from harness.errors import UserError
from harness.protocol import protocol_version
from harness.tracking.liveness import mark_dead_runs, process_tags
from harness.tracking.naming import encoder_label
from harness.tracking.runs import REPO_ROOT, ensure_experiment, tracking_uri
from harness.tracking.store import check_can_log, prepare_store
from pretrain.encoders.loading import load_encoder, random_encoder

EXPERIMENT = "evaluate"


@dataclass(frozen=True)
class Evaluation:
    """What ``make evaluate`` was asked: the encoder, the tasks, extra heads and seeds, the twin
    (None: for the project's own encoders, not for published ones), the zero-shot methods."""

    encoder: str
    tasks: tuple[str, ...]
    heads: tuple[str, ...] = ()
    seeds: int | None = None
    twin: bool | None = None
    zero_shot: tuple[ZeroShot, ...] = (ZeroShot(), ZeroShot(ST_POOLING, "top"))
    jobs: int = 1  # cells at once (1: inline, no Ray instance to start)
    out: Path | None = None
    cache_dir: str | None = DEFAULT_CACHE_DIR
    template: Path = TEMPLATE  # the matrix every task fills in (configs/benchmarks/evaluate.yaml)


def evaluate(request: Evaluation, data: dict[str, PairData] | None = None) -> int:
    """Run the evaluation (``data``: the tasks' data sets, when read already); returns 0. Bad input
    is a UserError before any run is created."""
    started = time.perf_counter()
    prepare_store(tracking_uri())
    check_can_log(tracking_uri(), EXPERIMENT)
    client = MlflowClient(tracking_uri())
    mark_dead_runs(client)
    data = data or {task: load_pair_data(dataset=task) for task in request.tasks}  # every folder checked first
    encoder = load_encoder(request.encoder)  # resolved once: a bad reference stops here
    name = getattr(encoder, "name", None) or encoder.family
    label = encoder_label(encoder.family, encoder.config, encoder.run_id, False, getattr(encoder, "name", None))
    twin = (not is_published({"run": request.encoder})) if request.twin is None else request.twin
    matrices = {
        task: task_matrix(task, name, request.encoder, label, twin, request.heads, request.seeds, request.template)
        for task in request.tasks
    }
    seeds = range(int(next(iter(matrices.values()))["seeds"]))
    out = request.out or REPO_ROOT / "benchmarks" / "results" / "evaluate" / label
    parent = open_evaluation(client, request, label)
    print(f"evaluate {label} on {', '.join(request.tasks)}: parent run {parent} (experiment '{EXPERIMENT}'), {out}")
    try:
        scores = []
        for task in request.tasks:
            task_started = time.perf_counter()
            folder = out / task
            folder.mkdir(parents=True, exist_ok=True)
            print(f"  {task}: running (its console: {folder / 'suite.log'})", flush=True)
            suite_parent, linked = run_task_suite(client, matrices[task], folder, request.jobs, parent)
            task_scores = TaskScores(task, test_pairs=len(data[task].test))
            if data[task].task.zero_shot_metric:
                arms = [(encoder, 0)] + [(random_encoder(encoder, seed), seed) for seed in seeds if twin]
                for arm, seed in arms:
                    for method in request.zero_shot:
                        log_zero_shot(
                            arm,
                            method.method(twin_name() if arm.is_random else name),
                            method,
                            data[task],
                            EXPERIMENT,
                            suite_parent,
                            folder / "zero-shot",
                            request.cache_dir,
                            seed,
                            request.encoder,
                        )
            export_benchmark(task_benchmark(label, task), folder / "results")
            collect_scores(client, suite_parent, linked, task_scores)
            task_scores.wall_seconds = time.perf_counter() - task_started
            scores.append(task_scores)
            print(f"  {task}: {len(task_scores.scores)} methods in {task_scores.wall_seconds / 60:.1f} min")
        title = f"{label} on {', '.join(request.tasks)}"
        notes = [f"Parent run {parent}; per task a results folder under {out}; protocol {protocol_version()}."]
        (out / "table.md").write_text(markdown_table(scores, title, notes, name), encoding="utf-8")
        client.log_artifact(parent, str(out / "table.md"))
        client.log_metric(parent, "wall_seconds", time.perf_counter() - started)
    except BaseException as error:
        client.set_tag(parent, "harness.ended", type(error).__name__)
        client.set_terminated(parent, "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")
        raise
    client.set_terminated(parent, "FINISHED")
    wall = time.perf_counter() - started
    print(f"\n── evaluate {label}: finished in {wall / 60:.1f} min " + "─" * 30)
    print(console_table(scores, name))
    print("  test × 100, mean over seeds (gap to the twin); (ρ) zero-shot Spearman ρ, else each task's main score")
    print(f"  table   {out / 'table.md'}")
    print(f"  parent  {parent}  (experiment '{EXPERIMENT}')")
    return 0


def open_evaluation(client: MlflowClient, request: Evaluation, label: str) -> str:
    """The evaluation's parent run (RUNNING): tagged ``stage=benchmark``, ``kind=evaluate``."""
    tags = {
        "stage": "benchmark",
        "kind": "evaluate",
        "benchmark": f"evaluate-{label}",
        "encoder": label,
        "tasks": " ".join(request.tasks),
        "protocol_version": protocol_version(),
        **process_tags(),
    }
    run = client.create_run(ensure_experiment(EXPERIMENT), run_name=f"evaluate·{label}", tags=tags)
    params = {
        "encoder": request.encoder,
        "tasks": json.dumps(list(request.tasks)),
        "heads": json.dumps(list(request.heads)),
        "seeds": request.seeds or "",
        "twin": "auto" if request.twin is None else request.twin,
        "zero_shot": json.dumps([f"{method.pooling}:{method.mix}" for method in request.zero_shot]),
    }
    for key, value in params.items():
        client.log_param(run.info.run_id, key, value)
    return run.info.run_id


def run_task_suite(client: MlflowClient, matrix: dict, folder: Path, jobs: int, parent: str) -> tuple[str, list[str]]:
    """Run one task's matrix through the benchmark suite (its console in ``suite.log``), made a child
    of the evaluation's parent run; returns the suite's parent run id and the cells it linked from
    other benchmarks (finished there with the same settings, e.g. a task's baselines)."""
    config = folder / "matrix.yaml"
    config.write_text(yaml.safe_dump(matrix, sort_keys=False), encoding="utf-8")
    log = folder / "suite.log"
    with log.open("w", buffering=1) as stream, contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        code = suite_main(["--config", str(config), "--results-dir", str(folder / "suite"), "--jobs", str(jobs)])
    if code != 0:
        tail = [line for line in log.read_text(encoding="utf-8").splitlines() if line.strip()][-1:]
        raise UserError(f"{matrix['dataset']['dataset']}: the suite stopped ({tail[0] if tail else code}); see {log}")
    suite_parent, study = newest_parent(client, matrix["name"])
    client.set_tag(suite_parent, "mlflow.parentRunId", parent)
    return suite_parent, list(study.get("linked", []))


def collect_scores(client: MlflowClient, suite_parent: str, linked: list[str], scores: TaskScores) -> None:
    """Every FINISHED child of a task's suite parent, and the cells it linked, into ``scores`` (a
    method's newest run per seed)."""
    runs = client.search_runs(
        [experiment.experiment_id for experiment in client.search_experiments()],
        f"tags.`mlflow.parentRunId` = '{suite_parent}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time ASC"],
        max_results=50_000,
    )
    runs = [*(client.get_run(run_id) for run_id in linked), *runs]
    newest = {(run.data.tags.get("method"), run.data.tags.get("seed")): run for run in runs}
    for (method, _), run in newest.items():
        if method:
            kind = run.data.tags.get("kind") or run.data.tags.get("stage", "")
            scores.add(method, kind, run.data.metrics)
