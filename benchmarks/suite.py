"""``python -m benchmarks.suite --config configs/benchmarks/default.yaml``: pretrained encoders ×
mixes × heads × seeds, the random-encoder control through the same code, baselines, learning
curves; one MLflow parent run (``stage=benchmark``) with ``results.csv``, ``report.md`` and figures.
The pair data set is MRPC unless the config's ``dataset:`` names another (the ``--data.*`` keys of
``harness.pairdata.load_pair_data``), passed to every cell. Re-running skips cells that already
finished with the same settings; a cell whose process died (left RUNNING) is marked KILLED and run
again. The parent is never FINISHED while a child is still RUNNING."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from mlflow.tracking import MlflowClient

from benchmarks.cells import Cell, file_digests, finished_run, pretrain, settings_hash
from benchmarks.matrix import data_flags, dataset_spec, load_config, repo_path, with_budget
from benchmarks.parent import describe_parent, link_lines
from benchmarks.plan import plan
from benchmarks.report import build_results, write_outputs
from benchmarks.runner import CellRunner, default_jobs
from benchmarks.stats import ID_COLUMNS, ITEMS_ONLY, METRICS
from pretrain.hf_encoder import is_hf_source
from pretrain.runs import load_encoder, resolve_run_id
from harness.errors import UserError
from harness.liveness import mark_dead_runs, process_tags
from harness.naming import benchmark_run_name
from harness.pairdata import PairData, load_pair_data
from harness.store import prepare_store
from harness.params import flatten
from harness.tracking import REPO_ROOT, ensure_experiment, tracking_uri
from harness.versioning import code_version, git_commit

def pretrain_stages(encoder: dict) -> list[dict]:
    """The encoder's pretraining as a list of stages (``config`` + ``args``); one stage unless it is
    a list, as for ULMFiT (general LM, then target-task LM)."""
    stages = encoder.get("pretrain", [])
    return [dict(stage) for stage in (stages if isinstance(stages, list) else [stages])]


def resolve_encoder(encoder: dict, benchmark: str, logs: Path, data_digest: str) -> dict:
    """Reuse the given run, or pretrain once (found again by its settings, the data's and corpus
    files' content and the code version on a re-run). A later pretraining stage continues the
    earlier stage's run (``--model.init_from``).

    Returns:
        the encoder's name, run id, family, layers, held-out perplexity, corpus and its size.
    """
    if is_hf_source(str(encoder.get("run", ""))):
        return published_encoder(encoder)
    run_id = None
    if encoder.get("run"):
        try:
            run_id = resolve_run_id(encoder["run"]) or encoder["run"].removeprefix("runs:/")  # latest, models:/…
        except UserError:
            if "pretrain" not in encoder:
                raise
    if run_id is None:
        for number, stage in enumerate(pretrain_stages(encoder)):
            config_path = str(repo_path(stage["config"]))
            args = [*stage.get("args", []), *([f"--model.init_from=runs:/{run_id}"] if run_id else [])]
            config_text = Path(config_path).read_text() if Path(config_path).is_file() else ""
            cell_hash = settings_hash({"config": config_path, "args": args, "config_text": config_text,
                                       "data": data_digest, "files": file_digests(args)})
            run_id = finished_run("pretrain", cell_hash)
            if run_id is None:
                print(f"  pretraining encoder '{encoder['name']}' stage {number + 1} ({config_path} {' '.join(args)}) …",
                      flush=True)
                run_id = pretrain(config_path, args, cell_hash, benchmark,
                                  logs / f"pretrain-{encoder['name']}-{number + 1}.log")
    try:
        run = MlflowClient(tracking_uri()).get_run(run_id)
    except Exception:  # noqa: BLE001 - an unknown id is the user's to fix
        raise UserError(f"encoder '{encoder['name']}': no run {run_id} in {tracking_uri()}") from None
    if run.data.tags.get("stage") != "pretrain":
        raise UserError(f"encoder '{encoder['name']}': run {run_id} is not a pretrain run")
    params, metrics = run.data.params, run.data.metrics
    stages = pretrain_stages(encoder)
    return {"name": encoder["name"], "run_id": run_id, "family": run.data.tags.get("family", "elmo"),
            "num_layers": int(params["model.num_layers"]) + 1,
            # the best checkpoint's perplexity (runs made before best_val_ppl: the last val_ppl logged)
            "val_ppl": metrics.get("best_val_ppl", metrics.get("val_ppl")),
            "train_tokens": int(params.get("train_tokens", 0)), "train_words": int(params.get("train_words", 0)),
            "corpus": params.get("data.corpus", "mrpc"),
            "config": stages[-1]["config"] if stages else params.get("config", "")}


def published_encoder(encoder: dict) -> dict:
    """A published encoder (``run: hf:<folder>`` or ``reference:<name>``): loaded once here for its
    layers and fingerprint; its cells pass the source itself to ``--model.encoder``."""
    try:
        loaded = load_encoder(encoder["run"])
    except UserError as error:
        raise UserError(f"encoder '{encoder['name']}': {error}") from None
    return {"name": encoder["name"], "run_id": loaded.source, "family": loaded.family, "num_layers": loaded.num_layers,
            "fingerprint": loaded.fingerprint, "published": True,
            "reference": str(encoder["run"]).startswith("reference:"), "val_ppl": None, "train_tokens": 0,
            "train_words": 0, "corpus": "published", "config": encoder["run"]}


def open_parent(config: dict, suite_hash: str, data: PairData) -> str:
    """The benchmark's parent run: resumed when this config ran before, else new."""
    client = MlflowClient(tracking_uri())
    experiment_id = ensure_experiment(config["experiment"])
    found = client.search_runs([experiment_id], f"tags.suite_hash = '{suite_hash}' and tags.stage = 'benchmark'",
                               order_by=["attributes.start_time DESC"], max_results=1)
    if found:
        run_id = found[0].info.run_id
        client.update_run(run_id, status="RUNNING")
        for key, value in process_tags().items():
            client.set_tag(run_id, key, value)
        return run_id
    tags = {"stage": "benchmark", "suite_hash": suite_hash, "benchmark": config["name"], "dataset": data.name,
            "code_version": code_version(), **process_tags()}
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    run = client.create_run(experiment_id, run_name=benchmark_run_name(config["name"]), tags=tags)
    params = {key: json.dumps(value) if isinstance(value, list) else value for key, value in flatten(config).items()}
    for key, value in params.items():
        client.log_param(run.info.run_id, key, str(value)[:6000])
    return run.info.run_id


def read_predictions(path: str) -> pd.DataFrame:
    """A predictions file with ids, labels and predictions as text (label names compare as written)."""
    return pd.read_csv(path, dtype={column: str for column in (*ID_COLUMNS, "label", "pred")}, keep_default_na=False)


def run_table(done: list[tuple[Cell, str]]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """One row per finished cell (metrics, mix weights, the parent it belongs to: this benchmark's,
    or an earlier one's for a linked cell) and its test predictions."""
    client = MlflowClient(tracking_uri())
    rows, predictions = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        for cell, run_id in done:
            run = client.get_run(run_id)
            metrics = run.data.metrics
            row = {"run_id": run_id, "parent_run_id": run.data.tags.get("mlflow.parentRunId", ""),
                   "method": cell.method, "seed": cell.seed, "encoder": cell.encoder, "family": cell.family,
                   "transfer": cell.transfer, "kind": cell.kind, "mix": cell.mix, "head": cell.head,
                   "train_fraction": cell.train_fraction,
                   "control": cell.control, **{m: metrics.get(m) for m in METRICS},
                   **{f"{split}_pairs": run.data.params.get(f"{split}_pairs") for split in ("dev", "test")}}
            row.update({k: v for k, v in metrics.items() if k.startswith(("mix_", "time_"))})
            rows.append(row)
            path = client.download_artifacts(run_id, "predictions/test.csv", scratch)
            predictions[run_id] = read_predictions(path)
    return pd.DataFrame(rows), predictions


def drop_unpaired_controls(runs: pd.DataFrame, predictions: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Clear the control of a method whose test predictions cover other pairs than its control's
    (baselines on the full test set against cells capped by ``--data.max_pairs``): a paired test
    needs the same items, so such a method gets no p-value rather than a crash."""
    def ids(frame: pd.DataFrame) -> set[tuple]:  # each pair's ids (MRPC: id1, id2; a TSV data set: id)
        return set(frame[[column for column in ID_COLUMNS if column in frame]].astype(str).itertuples(index=False))

    pairs = {run_id: ids(frame) for run_id, frame in predictions.items()}
    run_of = {(method, seed): run_id for method, seed, run_id in zip(runs["method"], runs["seed"], runs["run_id"])}
    unpaired = {row.method for row in runs.itertuples() if row.control
                and (row.control, row.seed) in run_of and pairs[row.run_id] != pairs[run_of[(row.control, row.seed)]]}
    for method in sorted(unpaired):
        print(f"  note: {method} was evaluated on other test pairs than its control: no p-value")
    return runs.assign(control=["" if method in unpaired else control
                                for method, control in zip(runs["method"], runs["control"])])


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=REPO_ROOT / "configs/benchmarks/default.yaml")
    parser.add_argument("--results-dir", type=Path, default=None, help="default: benchmarks/results/<name>")
    parser.add_argument("--finetune-args", default="", help="extra flags for every finetune cell")
    parser.add_argument("--pretrain-args", default="", help="extra flags for every pretraining")
    parser.add_argument("--budget", action="store_true",
                        help="run the config's `budget:` subset (a smaller study, e.g. fewer seeds or fractions)")
    parser.add_argument("--jobs", type=positive_int, default=default_jobs(),
                        help="finetune cells run at once, each single-threaded in its own worker process "
                             "(default: the usable cores, at most 4; 1 runs them in this process)")
    args = parser.parse_args(argv)
    # One line per cell is the suite's progress; MLflow's per-download bars would drown it.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        return run_suite(args)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def running_children(client: MlflowClient, parent: str) -> list[str]:
    """Children of ``parent`` still RUNNING once those whose process died are marked KILLED."""
    mark_dead_runs(client, parent_run_id=parent)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    children = client.search_runs(experiments, f"tags.`mlflow.parentRunId` = '{parent}' and "
                                               f"attributes.status = 'RUNNING'", max_results=1000)
    return [run.info.run_id for run in children]


def run_suite(args) -> int:
    started = time.perf_counter()
    config = load_config(args.config)
    if args.budget:
        config = with_budget(config, args.config)
    prepare_store(tracking_uri())
    mark_dead_runs(MlflowClient(tracking_uri()))
    spec = dataset_spec(config)
    data = load_pair_data(**spec)  # read and checked once, before any cell runs
    flags = data_flags(spec)
    for encoder in config["encoders"]:
        if "pretrain" in encoder:
            stages = pretrain_stages(encoder)
            for stage in stages:
                stage["args"] = [*flags, *stage.get("args", []), *shlex.split(args.pretrain_args)]
            encoder["pretrain"] = stages
    finetune_args = [*flags, *config["finetune"].get("args", []), *shlex.split(args.finetune_args)]
    finetune_config = str(repo_path(config["finetune"]["config"]))
    directory = args.results_dir or REPO_ROOT / "benchmarks" / "results" / config["name"]
    logs = directory / "logs"
    encoders = [resolve_encoder(encoder, config["name"], logs, data.content_hash) for encoder in config["encoders"]]
    cells = plan(config, encoders, finetune_args)
    suite_hash = settings_hash({"config": config, "finetune_args": finetune_args, "data": data.content_hash,
                                "encoders": [e["run_id"] for e in encoders]})
    parent = open_parent(config, suite_hash, data)
    client = MlflowClient(tracking_uri())
    print(f"benchmark '{config['name']}' on {data.name}: {len(cells)} cells, parent run {parent}, "
          f"{args.jobs} at a time")
    try:
        done = CellRunner(config, finetune_config, parent, data, logs, args.jobs).run(cells)
        runs, predictions = run_table(done)
        runs = drop_unpaired_controls(runs, predictions)
        results = build_results(runs, predictions)
        wall = time.perf_counter() - started
        throughput_file = REPO_ROOT / "benchmarks" / "results" / "throughput.json"
        context = {"name": config["name"], "parent_run_id": parent, "wall_seconds": wall, "settings": config,
                   "encoders": encoders, "dataset": data.name, "anchors": data.name == "mrpc",
                   "labels": list(data.labels), "positive_label": data.positive_label,
                   "throughput": json.loads(throughput_file.read_text()) if throughput_file.is_file() else None}
        written = write_outputs(directory, results, runs, context)
        for path in written:
            folder = path.parent.relative_to(directory).as_posix()
            client.log_artifact(parent, str(path), None if folder == "." else folder)
        client.log_metric(parent, "wall_seconds", wall)
        client.log_metric(parent, "cells", len(cells))
        view = describe_parent(client, parent, config["name"], results, directory / "report.md", args.config)
    except BaseException as error:
        try:
            client.set_terminated(parent, "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")
        except Exception:  # noqa: BLE001 - a store that went away: the next start marks the parent KILLED
            pass
        raise
    still_running = running_children(client, parent)
    if still_running:  # another live process works under this parent: it closes the parent when done
        print(f"  note: {len(still_running)} child run(s) of {parent} are still RUNNING in another process; "
              f"the parent stays RUNNING")
    else:
        client.set_terminated(parent, "FINISHED")
    print_summary(results, config, parent, directory, wall, data.name, link_lines(client, parent, view, runs))
    return 0


def print_summary(results: pd.DataFrame, config: dict, parent: str, directory: Path, wall: float,
                  data_name: str = "mrpc", links: list[str] = ()) -> None:
    """The results on the console: mean ± std over seeds, and the paired gap over the random twin
    on test accuracy with its 95% CI and p (points; † = one seed pair: no seed replication, no CI or p)."""
    print(f"\n── benchmark '{config['name']}' on {data_name} finished in {wall / 60:.1f} min " + "─" * 30)
    print(f"  {'method':<34}{'n':>3}  {'dev acc':>14}  {'test acc':>14}  {'test F1':>14}  "
          f"{'gap vs random (95% CI)':<24}  p")
    for row in results.itertuples():
        cells = [f"{100 * getattr(row, f'{m}_mean'):5.1f} ± {100 * getattr(row, f'{m}_std'):4.1f}"
                 for m in ("dev_acc", "test_acc", "test_f1")]
        gap, p_value = "—", "—"
        if pd.notna(getattr(row, "gap_vs_random", float("nan"))) and pd.isna(row.gap_ci_low):
            gap = f"{100 * row.gap_vs_random:+.1f} †"  # one seed pair: no CI, no p
        elif pd.notna(getattr(row, "gap_vs_random", float("nan"))):
            gap = f"{100 * row.gap_vs_random:+.1f} ({100 * row.gap_ci_low:+.1f}, {100 * row.gap_ci_high:+.1f})"
            p_value = f"{row.p_value_vs_random:.3g}"
        print(f"  {row.method:<34}{row.n_seeds:>3}  {cells[0]:>14}  {cells[1]:>14}  {cells[2]:>14}  "
              f"{gap:<24}  {p_value}")
    if "gap_test" in results and (results["gap_test"] == ITEMS_ONLY).any():
        print("  † one seed pair: no seed replication, so no CI or p (see report.md, How to read)")
    print(f"  parent run {parent}  (experiment '{config['experiment']}')")
    print(f"  report     {directory / 'report.md'}")
    for line in links:
        print(line)


if __name__ == "__main__":
    sys.exit(main())
