"""Results folders to and from an MLflow store: ``export`` writes a benchmark's finished cells to
a folder (``benchmarks.results_files.folder``), ``import`` loads folders into any store as FINISHED runs
under a parent, so the UI shows them and a suite finds them by their cell hash."""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from benchmarks.plan.encoders import with_stages
from benchmarks.report.cells_from_store import read_predictions
from benchmarks.results_files.folder import (
    BENCHMARK_FILE,
    CELLS_DIR,
    FORMAT,
    PREDICTIONS_SUFFIX,
    SPLITS,
    CellResult,
    ResultSet,
    predictions_bytes,
    write_json,
)
from benchmarks.results_files.folder_readme import README_FILE, readme_text
from benchmarks.results_files.import_lease import (
    discard,
    one_import,
    parent_tags,
    resume_parent,
    unfinished_import,
    unfinished_parent,
)
from benchmarks.results_files.import_rules import cell_tags, run_times, target_experiment
from benchmarks.results_files.manifest import write_manifest
from benchmarks.results_files.seal_chain import next_seals
from benchmarks.results_files.store_copies import IMPORTED_TAG, held_copies, predictions_digest
from benchmarks.results_files.unique_cells import check_unique
from benchmarks.tasks.reuse import result_numbers
from harness.atomic import atomic_folder
from harness.cli.precision import FLOAT32
from harness.errors import UserError
from harness.tracking.liveness import HOST_TAG, PID_TAG, STARTED_TAG, process_tags
from harness.tracking.runs import ensure_experiment, tracking_uri

STUDY_ARTIFACT = "study.json"  # the parent's record of its benchmark (the suite logs it)
RECORD_TAG = "result_record"  # a cell's settings and context (``benchmarks.tasks.cells.result_tags``)
PROCESS_TAGS = (HOST_TAG, PID_TAG, STARTED_TAG, "harness.driver", "harness.node", "harness.ended")
ORIGIN_TAGS = ("origin_run_id", "origin_parent_run_id", "origin_host")  # where an imported cell was computed


def newest_parent(client: MlflowClient, name: str) -> tuple[str, dict]:
    """The newest parent run of benchmark ``name`` in any experiment, and its study record."""
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = (
        client.search_runs(
            experiments,
            f"tags.stage = 'benchmark' and tags.benchmark = '{name}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if experiments
        else []
    )
    if not runs:
        raise UserError(f"--benchmark {name}: no benchmark of that name in {tracking_uri()}")
    parent = runs[0].info.run_id
    with tempfile.TemporaryDirectory() as scratch:
        try:
            path = client.download_artifacts(parent, STUDY_ARTIFACT, scratch)
        except Exception:  # noqa: BLE001 - a parent made before results files, or an import that died
            raise UserError(
                f"--benchmark {name}: "
                + (
                    unfinished_import(runs[0])
                    or f"its parent run {parent} has no {STUDY_ARTIFACT} (run before results files existed); run "
                    "the benchmark again to export it"
                )
            ) from None
        return parent, json.loads(Path(path).read_text())


def cell_runs(client: MlflowClient, parent: str, study: dict) -> list:
    """The parent's FINISHED cells with a record, and the cells it linked from other benchmarks."""
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    children = client.search_runs(
        experiments, f"tags.`mlflow.parentRunId` = '{parent}' and attributes.status = 'FINISHED'", max_results=50_000
    )
    runs = {run.info.run_id: run for run in children if RECORD_TAG in run.data.tags}
    for run_id in study.get("linked", []):
        if run_id not in runs:
            runs[run_id] = client.get_run(run_id)
    newest: dict[str, object] = {}
    for run in sorted(runs.values(), key=lambda run: run.info.start_time):
        newest[run.data.tags["cell_hash"]] = run  # a cell that ran twice: its newest run
    return list(newest.values())


def ran_precision(params: dict) -> str | None:
    """The precision a cell's run trained in: its ``trainer.precision`` param; a finetune run of a
    harness before the precision was always recorded ran Lightning's default, float32; None for a
    baseline or probe, which trains no network under Lightning."""
    if "trainer.precision" in params:
        return params["trainer.precision"]
    return FLOAT32 if "train_epoch_pairs" in params else None


def cell_record(client: MlflowClient, run, study: dict, scratch: Path) -> tuple[dict, bytes]:
    """A cell run as a results record and its predictions file's bytes (an encoder recorded with
    its last stage's figures alone is completed from this store: :func:`with_stages`)."""
    tags = run.data.tags
    context = json.loads(tags[RECORD_TAG])
    frames = {}
    for split in SPLITS:
        path = client.download_artifacts(run.info.run_id, f"predictions/{split}.csv", str(scratch))
        frames[split] = read_predictions(path)
    content = predictions_bytes(frames)
    kept_tags = {
        key: value
        for key, value in tags.items()
        if key not in (RECORD_TAG, IMPORTED_TAG, *ORIGIN_TAGS, *PROCESS_TAGS)
        and (not key.startswith("mlflow.") or key == "mlflow.runName")
    }
    record = {
        "format": FORMAT,
        "cell_hash": tags["cell_hash"],
        "protocol": tags.get("protocol_version", ""),
        "commit": tags.get("git_commit", ""),
        "data_digest": study["data_digest"],
        "spec": context.get("spec"),
        "cell": context["cell"],
        "order": context.get("order", [0, 0]),
        "encoder": with_stages(context.get("encoder"), client),
        "precision": ran_precision(run.data.params),
        "metrics": dict(run.data.metrics),
        "params": dict(run.data.params),
        "tags": kept_tags,
        "run": {
            "run_id": tags.get("origin_run_id", run.info.run_id),
            "parent_run_id": tags.get("origin_parent_run_id", tags.get("mlflow.parentRunId", "")),
            "start_time": run.info.start_time,
            "end_time": run.info.end_time,
            "host": tags.get("origin_host", tags.get(HOST_TAG, "")),
        },
        "predictions": {
            "file": f"{tags['cell_hash']}{PREDICTIONS_SUFFIX}",
            "sha256": hashlib.sha256(content).hexdigest(),
            "rows": {split: len(frames[split]) for split in SPLITS},
        },
    }
    return record, content


def export_benchmark(name: str, out: Path) -> tuple[int, int]:
    """Write benchmark ``name``'s finished cells (its newest parent's) to ``out`` with a README that
    places them (``benchmarks.results_files.folder_readme``), replacing what a former export left
    there; returns (cells, bytes written)."""
    client = MlflowClient(tracking_uri())
    parent, study = newest_parent(client, name)
    runs = cell_runs(client, parent, study)
    unversioned = [run.info.run_id for run in runs if not run.data.tags.get("protocol_version")]
    if unversioned:
        raise UserError(
            f"--benchmark {name}: {len(unversioned)} cell(s) carry no protocol version (e.g. run "
            f"{unversioned[0]}); run the benchmark again to export it"
        )
    written = 0

    def write(staging: Path) -> None:
        nonlocal written
        (staging / CELLS_DIR).mkdir()
        records = []
        with tempfile.TemporaryDirectory() as scratch:
            for run in runs:
                record, content = cell_record(client, run, study, Path(scratch))
                (staging / CELLS_DIR / record["predictions"]["file"]).write_bytes(content)
                write_json(staging / CELLS_DIR / f"{record['cell_hash']}.json", record)
                records.append(record)
        benchmark = {
            "format": FORMAT,
            **{
                key: study[key]
                for key in (
                    "benchmark",
                    "experiment",
                    "dataset",
                    "data_digest",
                    "labels",
                    "positive_label",
                    "settings",
                    "corpora",
                    "machine",
                    "wall_seconds",
                )
                if key in study
            },
            "parent_run_id": study.get("origin_parent_run_id", parent),
            "cells": len(runs),
        }
        write_json(staging / BENCHMARK_FILE, benchmark)
        write_manifest(staging, next_seals(staging))  # the first seal: the commit exporting
        (staging / README_FILE).write_text(readme_text(benchmark, records), encoding="utf-8")
        ResultSet([staging])  # what was written reads back, every check passed
        written = sum(path.stat().st_size for path in staging.rglob("*") if path.is_file())

    atomic_folder(Path(out), write)  # whole or not at all
    return len(runs), written


def import_cell(cell: CellResult, experiment: str, parent: str, client: MlflowClient | None = None) -> str:
    """One checked cell as a FINISHED child run of ``parent`` with the harness's own cell tags only
    (:mod:`benchmarks.results_files.import_rules`); returns its run id."""
    client = client or MlflowClient(tracking_uri())
    record = cell.record
    start_time, end_time = run_times(record["run"], cell.path)
    tags = {
        **cell_tags(record["tags"], cell.path),
        "cell_hash": record["cell_hash"],
        "protocol_version": record["protocol"],
        "git_commit": str(record.get("commit", "")),
        "mlflow.parentRunId": parent,
        IMPORTED_TAG: str(cell.folder),
        "origin_run_id": str(record["run"]["run_id"]),
        "origin_parent_run_id": str(record["run"].get("parent_run_id", "")),
        "origin_host": str(record["run"].get("host", "")),
        **process_tags(),  # a cell whose import is killed half-way is marked KILLED, not RUNNING forever
        RECORD_TAG: json.dumps(
            {"cell": record["cell"], "order": record["order"], "encoder": record["encoder"], "spec": record["spec"]},
            sort_keys=True,
        ),
    }
    run = client.create_run(
        ensure_experiment(experiment), start_time=start_time, run_name=tags.get("mlflow.runName"), tags=tags
    )
    run_id = run.info.run_id
    try:
        client.log_batch(
            run_id,
            metrics=[Metric(key, float(value), end_time or 0, 0) for key, value in record["metrics"].items()],
            params=[Param(key, str(value)) for key, value in record["params"].items()],
        )
        for split in SPLITS:
            client.log_text(run_id, cell.predictions[split].to_csv(index=False), f"predictions/{split}.csv")
    except BaseException:
        discard(client, [run_id])
        raise
    client.set_terminated(run_id, "FINISHED", end_time=end_time)
    return run_id


@dataclass
class ImportPlan:
    """One folder's import, decided before anything is written: the cells to add and the runs
    already holding the others (linked from its parent, never copied again)."""

    folder: Path
    result: ResultSet
    experiment: str
    new: list[CellResult] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)  # cell hashes an earlier folder of the same import adds


def plan_import(client: MlflowClient, folder: Path, result: ResultSet, planned: dict[str, CellResult]) -> ImportPlan:
    """Check ``folder`` against its experiment in the store (where a suite looks for its cells) and
    the folders planned before it (``planned``: cell hash → cell): a cell held with the same numbers
    and predictions is linked, one held with other numbers stops the import in one line naming both
    digests."""
    plan = ImportPlan(folder, result, target_experiment(result.benchmarks[0], folder))
    for cell in result.ordered:
        cell_tags(cell.record["tags"], cell.path)
        run_times(cell.record["run"], cell.path)
        earlier = planned.get(cell.cell_hash)
        if earlier is not None:
            if earlier.record["predictions"]["sha256"] != cell.record["predictions"]["sha256"] or result_numbers(
                earlier.record["metrics"]
            ) != result_numbers(cell.record["metrics"]):
                raise UserError(
                    f"{cell.path}: cell {cell.cell_hash} has other numbers than in {earlier.path} "
                    f"(predictions sha256 {cell.record['predictions']['sha256'][:12]}, not "
                    f"{earlier.record['predictions']['sha256'][:12]}); nothing imported"
                )
            plan.shared.append(cell.cell_hash)
            continue
        planned[cell.cell_hash] = cell
        held = None
        for run in held_copies(client, plan.experiment, cell.cell_hash):
            digest, recorded = predictions_digest(client, run), cell.record["predictions"]["sha256"]
            if digest != recorded or result_numbers(run.data.metrics) != result_numbers(cell.record["metrics"]):
                fields = cell.record["cell"]
                raise UserError(
                    f"{cell.path}: cell {cell.cell_hash} ({fields.get('method')} seed "
                    f"{fields.get('seed')}) is in the store already as run {run.info.run_id} with other "
                    f"numbers (predictions sha256 {digest[:12]} there, {recorded[:12]} here); nothing "
                    f"imported: the store's copy stays"
                )
            held = held or run.info.run_id
        if held:
            plan.held.append(held)
        else:
            plan.new.append(cell)
    return plan


def import_folders(folders: list[Path]) -> list[tuple[str | None, int, int]]:
    """Each folder (all checked first, against the store too) under a parent run of its own, with
    only the cells the store does not hold yet; returns (parent or None, cells added, cells already
    held) per folder. Importing a folder again adds nothing; an import that died is completed
    (:mod:`benchmarks.results_files.import_lease`, whose lease the whole import holds)."""
    results = [ResultSet([folder]) for folder in folders]  # every check before anything is written
    check_unique(cell for result in results for cell in result.ordered)  # and across the folders
    names = [str(result.benchmarks[0]["benchmark"]) for result in results]
    with one_import(names, folders, tracking_uri()):
        return import_results(folders, results)


def import_results(folders: list[Path], results: list[ResultSet]) -> list[tuple[str | None, int, int]]:
    """:func:`import_folders` once its folders are read and its lease held."""
    client = MlflowClient(tracking_uri())
    planned: dict[str, CellResult] = {}
    plans = [plan_import(client, Path(folder), result, planned) for folder, result in zip(folders, results)]
    imported, written = [], {}
    for plan in plans:
        plan.held += [written[cell_hash] for cell_hash in plan.shared if cell_hash in written]
        benchmark = plan.result.benchmarks[0]
        resumed = unfinished_parent(client, plan.experiment, benchmark, tracking_uri())
        own = resume_parent(client, resumed) if resumed else set()  # its finished cells are its own
        plan.held = [run_id for run_id in plan.held if run_id not in own]
        if not plan.new and not resumed:
            imported.append((None, 0, len(plan.held)))
            continue
        parent = (
            resumed
            or client.create_run(
                ensure_experiment(plan.experiment),
                run_name=f"benchmark {benchmark['benchmark']}",
                tags={
                    "stage": "benchmark",
                    "benchmark": str(benchmark["benchmark"]),
                    "dataset": str(benchmark["dataset"]),
                    IMPORTED_TAG: str(plan.folder),
                    **parent_tags(benchmark),
                },
            ).info.run_id
        )
        created = [] if resumed else [parent]
        try:
            for cell in plan.new:
                created.append(import_cell(cell, plan.experiment, parent, client))
                written[cell.cell_hash] = created[-1]
            study = {
                **{
                    key: benchmark[key]
                    for key in benchmark
                    if key not in ("folder", "format", "cells", "parent_run_id")
                },
                "origin_parent_run_id": benchmark.get("parent_run_id", ""),
                **({"linked": plan.held} if plan.held else {}),
            }
            client.log_dict(parent, study, STUDY_ARTIFACT)
        except BaseException:
            discard(client, created)  # nothing imported half-way
            raise
        client.set_terminated(parent, "FINISHED")
        imported.append((parent, len(plan.new), len(plan.held)))
    return imported
