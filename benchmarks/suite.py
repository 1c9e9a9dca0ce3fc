"""``python -m benchmarks.suite --config configs/benchmarks/default.yaml``: pretrained encoders ×
mixes × heads × seeds, the random-encoder control through the same code, baselines, learning
curves; one MLflow parent run (``stage=benchmark``) with ``results.csv``, ``report.md`` and figures.
The pair data set is MRPC unless the config's ``dataset:`` names another (the ``--data.*`` keys of
``harness.datasets.registry.load_pair_data``), passed to every cell. Pretraining stages and cells are tasks
of Ray (a local instance, or the cluster ``RAY_ADDRESS`` names). Re-running skips cells that
already finished with the same settings; a cell whose process died (left RUNNING) is marked KILLED
and run again. The parent is never FINISHED while a child is still RUNNING."""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from benchmarks.engine.parent_run import abandon_parent, close_parent, open_parent
from benchmarks.engine.ray_cluster import RETRIES, InlineEngine, RayEngine, paths_to_check
from benchmarks.engine.suite_lease import one_suite
from benchmarks.engine.task_graph import StudyExecutor, StudyStopped
from benchmarks.plan.encoders import corpus_digests, given_run, pretrain_stages
from benchmarks.plan.lr_selection import lr_grid_table, select_learning_rates
from benchmarks.plan.matrix import Matrix, data_flags, dataset_spec, load_config, repo_path, with_budget
from benchmarks.plan.precision import check_study_precision, named_precision, with_precision
from benchmarks.plan.trainer_settings import trainer_setting
from benchmarks.report.cells_from_store import drop_unpaired_controls, run_table
from benchmarks.report.console_summary import print_summary
from benchmarks.report.outputs import write_outputs
from benchmarks.report.parent_view import describe_parent, link_lines
from benchmarks.report.results_table import build_results
from benchmarks.results_files.folder import ResultSet
from benchmarks.results_files.recipe_folders import check_selections_exist, recipe_table, with_picks
from benchmarks.results_files.store_transfer import STUDY_ARTIFACT
from benchmarks.stats.preregistration import adjust_registered
from benchmarks.tasks.attempts import end_driver_runs, new_driver_id
from benchmarks.tasks.cells import FINETUNE_THREADS
from benchmarks.tasks.entry_points import Study
from harness.datasets.registry import anchors_of, load_pair_data
from harness.entry_point import run_main
from harness.errors import UserError
from harness.interruption import EXIT_CODES, interruption, sigterm_as_interrupt
from harness.machine import cpu_model, usable_cpus
from harness.protocol import settings_hash
from harness.tracking.liveness import mark_dead_runs
from harness.tracking.runs import REPO_ROOT, ensure_experiment, tracking_uri
from harness.tracking.store import check_can_log, prepare_store

__all__ = ["main", "print_summary", "drop_unpaired_controls"]  # the last two: imported from here by tests


def default_jobs() -> int:
    """One task per core this process may use (a finetune cell is single-threaded), at most 4:
    every worker holds its own interpreter, model and mapped features (~0.5–1 GB on MRPC)."""
    return max(1, min(4, usable_cpus()))


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=REPO_ROOT / "configs/benchmarks/default.yaml")
    parser.add_argument("--results-dir", type=Path, default=None, help="default: benchmarks/results/<name>")
    parser.add_argument("--finetune-args", default="", help="extra flags for every finetune cell")
    parser.add_argument("--pretrain-args", default="", help="extra flags for every pretraining")
    parser.add_argument(
        "--budget",
        action="store_true",
        help="run the config's `budget:` subset (a smaller study, e.g. fewer seeds or fractions)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=default_jobs(),
        help="CPUs of the local Ray instance: tasks at once, each cell single-threaded "
        "(default: the usable cores, at most 4; 1 runs every task in this process). "
        "Ignored with RAY_ADDRESS: the cluster's CPUs count",
    )
    parser.add_argument(
        "--pretrain-cpus",
        type=positive_int,
        default=None,
        help="torch threads (CPUs) per pretraining stage and device (default: --jobs shared "
        "among the encoders that pretrain side by side, at least 1; on a cluster --jobs)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        nargs="+",
        default=[],
        metavar="FOLDER",
        help="results folders (python -m benchmarks export): their cells count as done, "
        "matched by cell hash, so a study goes on from a committed folder on another machine",
    )
    parser.add_argument(
        "--retries", type=count, default=RETRIES, help="attempts after the first for a task whose worker or node died"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    # One line per cell is the suite's progress; MLflow's per-download bars would drown it.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        with sigterm_as_interrupt():  # handled as Ctrl-C is: tasks cancelled, their runs and the parent KILLED
            return run_suite(args)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except StudyStopped as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as stop:
        signal_name = interruption(stop)
        print(
            f"error: interrupted ({signal_name}): the tasks were cancelled and their runs marked KILLED; "
            f"run the same command again to continue",
            file=sys.stderr,
        )
        return EXIT_CODES[signal_name]


def default_pretrain_cpus(jobs: int, config: Matrix, given: dict, engine) -> int:
    """Threads per pretraining stage: a local instance's CPUs shared among the encoders pretrained
    here, which pretrain side by side: a stage at 2 threads runs well under twice its 1-thread speed
    (docs/speed.md), so two 1-thread stages at once do more work than one at 2."""
    if getattr(engine, "address", None):  # a cluster: its nodes take independent stages
        return jobs
    pretrained_here = sum(1 for encoder in config.encoders if encoder.get("pretrain") and not given[encoder["name"]])
    return max(1, jobs // max(1, min(jobs, pretrained_here)))


def machine_record(jobs: int, engine, pretrain_threads: int, finetune_args: list[str]) -> dict:
    """What the study's times were measured on: the CPU model, the tasks at once (a cluster's
    address instead), the threads of a cell and of a pretraining stage, and the precision."""
    address = getattr(engine, "address", None)
    return {
        "cpu_model": cpu_model(),
        "cpus": usable_cpus(),
        "jobs": None if address else jobs,
        "cluster": bool(address),
        "finetune_threads": FINETUNE_THREADS,
        "pretrain_threads": pretrain_threads,
        "precision": named_precision(finetune_args),
    }


def run_suite(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    config = load_config(args.config)
    if args.budget:
        config = with_budget(config, args.config)
    finetune_config = str(repo_path(config.finetune_config))
    check_study_precision(
        config.precision,
        str(args.config),
        trainer_setting(finetune_config, list(config.finetune_args), "accelerator", "auto"),
    )
    check_selections_exist(config, str(args.config))  # a selection not run yet: before the store and the data
    with one_suite(config.name, tracking_uri()):
        return run_study(args, config, started)


def run_study(args: argparse.Namespace, config: Matrix, started: float) -> int:
    prepare_store(tracking_uri())
    check_can_log(tracking_uri(), config.experiment)  # a READ user stops here, before any cell or pretraining
    mark_dead_runs(MlflowClient(tracking_uri()))
    spec = dataset_spec(config)
    data = load_pair_data(**spec)  # read and checked once, before any task runs
    config = with_picks(config, str(args.config), data.content_hash)  # each arm's recipe_from pick, before any run
    results = ResultSet(args.results, data.content_hash) if args.results else None  # checked before any run
    flags = data_flags(spec)
    for encoder in config.encoders:
        if "pretrain" in encoder:
            stages = pretrain_stages(encoder)
            for stage in stages:
                stage["args"] = with_precision(
                    str(repo_path(stage["config"])),
                    [*flags, *stage.get("args", []), *shlex.split(args.pretrain_args)],
                    config.precision,
                )
            encoder["pretrain"] = stages
    finetune_config = str(repo_path(config.finetune_config))
    finetune_args = with_precision(
        finetune_config, [*flags, *config.finetune_args, *shlex.split(args.finetune_args)], config.precision
    )
    engine = (
        InlineEngine() if args.jobs == 1 and not os.environ.get("RAY_ADDRESS") else RayEngine(args.jobs, args.retries)
    )
    if isinstance(engine, RayEngine) and engine.address:  # a cluster is checked before any run is created
        engine.start(cluster_paths(config, finetune_config, finetune_args, spec))
    directory = args.results_dir or REPO_ROOT / "benchmarks" / "results" / config.name
    given = {encoder["name"]: given_run(encoder) for encoder in config.encoders}  # run: latest, once
    suite_hash = settings_hash(
        {
            "config": config.source,
            "finetune_args": finetune_args,
            "data": data.content_hash,
            "encoders": list(given.values()),
        }
    )
    for experiment in {config.experiment, "pretrain"}:  # created here: creating them in tasks races
        ensure_experiment(experiment)
    parent = open_parent(config.source, suite_hash, data)
    client = MlflowClient(tracking_uri())
    pretrain_threads = args.pretrain_cpus or default_pretrain_cpus(args.jobs, config, given, engine)
    study_record = {
        "benchmark": config.name,
        "experiment": config.experiment,
        "dataset": data.name,
        "data_digest": data.content_hash,
        "labels": list(data.labels),
        "positive_label": data.positive_label,
        "settings": json.loads(json.dumps(config.source, default=str)),
        "corpora": corpus_digests(config.encoders),
        "machine": machine_record(args.jobs, engine, pretrain_threads, finetune_args),
    }
    client.log_dict(parent, study_record, STUDY_ARTIFACT)  # what `python -m benchmarks export` writes out
    driver = new_driver_id()
    study = Study(config.name, config.experiment, parent, driver, directory / "logs", data.content_hash)
    print(
        f"benchmark '{config.name}' on {data.name}: parent run {parent}, "
        f"{'cluster ' + engine.address if getattr(engine, 'address', None) else f'{args.jobs} at a time'}"
    )
    try:
        executor = StudyExecutor(
            engine, study, config, data, finetune_config, finetune_args, pretrain_threads, given, results
        )
        encoders, done = executor.run()
        study_record = {
            **study_record,
            "wall_seconds": round(time.perf_counter() - started, 1),
            **({"linked": executor.linked} if executor.linked else {}),
        }
        client.log_dict(parent, study_record, STUDY_ARTIFACT)  # the suite's time to its last cell, for costs
        engine_text = engine.describe()
        runs, predictions = run_table(done, data.task)
        grid = lr_grid_table(runs, data.task)  # each arm's learning-rate grid, chosen on dev (lr_grid: in the matrix)
        runs = drop_unpaired_controls(select_learning_rates(runs, data.task), predictions)
        results, family = adjust_registered(build_results(runs, predictions, data.task), config.comparisons)
        wall = time.perf_counter() - started
        throughput_file = REPO_ROOT / "benchmarks" / "results" / "throughput.json"
        context = {
            "name": config.name,
            "parent_run_id": parent,
            "wall_seconds": wall,
            "settings": config.source,
            "smoke": bool(config.source.get("smoke")),
            "encoders": encoders,
            "dataset": data.name,
            "task": data.task,
            "anchors": anchors_of(data),
            "labels": list(data.labels),
            "positive_label": data.positive_label,
            "lr_grid": grid,
            "recipes": recipe_table([config], task=data.task),
            "family": family,
            "throughput": json.loads(throughput_file.read_text()) if throughput_file.is_file() else None,
        }
        written = write_outputs(directory, results, runs, context)
        for path in written:
            folder = path.parent.relative_to(directory).as_posix()
            client.log_artifact(parent, str(path), None if folder == "." else folder)
        client.log_metric(parent, "wall_seconds", wall)
        client.log_metric(parent, "cells", len(done))
        view = describe_parent(client, parent, config.name, results, directory / "report.md", args.config, data.task)
    except BaseException as error:
        end_driver_runs(driver, f"the study stopped ({type(error).__name__}); task cancelled")
        abandon_parent(client, parent, error)
        raise
    finally:
        engine.close()
    close_parent(client, parent)
    print_summary(
        results,
        config.source,
        parent,
        directory,
        wall,
        data.name,
        link_lines(client, parent, view, runs),
        engine=engine_text,
        task=data.task,
    )
    return 0


def cluster_paths(config: Matrix, finetune_config: str, finetune_args: list[str], spec: dict) -> list[str]:
    """The files every node must read: configs, data, corpora named by flags."""
    configs = [
        finetune_config,
        *[str(repo_path(stage["config"])) for encoder in config.encoders for stage in pretrain_stages(encoder)],
    ]
    configs += [
        str(repo_path(transfer.config))
        for transfers in config.transfers.values()
        for transfer in transfers
        if transfer.config
    ]
    stage_args = [
        argument
        for encoder in config.encoders
        for stage in pretrain_stages(encoder)
        for argument in stage.get("args", [])
    ]
    data_dir = os.environ.get("MRPC_DIR", "")
    return paths_to_check(
        configs, finetune_args, stage_args, [str(value) for value in spec.values()], [data_dir] if data_dir else []
    )


if __name__ == "__main__":
    run_main(main)
