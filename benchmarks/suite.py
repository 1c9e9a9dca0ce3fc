"""``python -m benchmarks.suite --config configs/benchmarks/default.yaml``: pretrained encoders ×
mixes × heads × seeds, the random-encoder control through the same code, baselines, learning
curves; one MLflow parent run (``stage=benchmark``) with ``results.csv``, ``report.md`` and figures.
Re-running skips cells that already finished with the same settings."""

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
import yaml
from mlflow.tracking import MlflowClient

from benchmarks.cells import (BASELINES, Cell, baseline, file_digests, finetune, finished_run, pretrain,
                              settings_hash)
from benchmarks.parent import describe_parent, link_lines
from benchmarks.report import build_results, write_outputs
from benchmarks.stats import ITEMS_ONLY, METRICS
from pretrain.runs import resolve_run_id
from harness.errors import UserError
from harness.mrpc import load_mrpc
from harness.naming import benchmark_run_name
from harness.tracking import REPO_ROOT, ensure_experiment, flatten, tracking_uri
from harness.versioning import code_version, git_commit

KEYS = {"name", "experiment", "encoders", "finetune", "mixes", "heads", "seeds", "random_control", "baselines",
        "learning_curve", "mrpc_dir"}


def load_config(path: Path) -> dict:
    """Read and check a suite config; a mistake is one line naming the file and key."""
    if not path.is_file():
        raise UserError(f"--config={path}: no such file")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise UserError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from None
    if not isinstance(config, dict) or not config.get("encoders"):
        raise UserError(f"{path}: needs a mapping with at least `encoders`")
    unknown = set(config) - KEYS
    if unknown:
        raise UserError(f"{path}: unknown key(s) {sorted(unknown)}; known: {sorted(KEYS)}")
    for encoder in config["encoders"]:
        if "name" not in encoder or not ({"run", "pretrain"} & set(encoder)):
            raise UserError(f"{path}: each encoder needs `name` and `run` (latest | runs:/<id>) or `pretrain`")
    for key in ("mixes", "heads", "baselines"):
        if not isinstance(config.get(key, []), list):
            raise UserError(f"{path}: `{key}` must be a list, e.g. {key}: [{config[key]}]")
    curve = config.get("learning_curve")
    if curve is not None and not (isinstance(curve, dict) and isinstance(curve.get("fractions"), list)):
        raise UserError(f"{path}: `learning_curve` needs `fractions`, e.g. fractions: [0.1, 0.25, 0.5, 1.0]")
    for baseline_name in config.get("baselines", []):
        if baseline_name not in BASELINES:
            raise UserError(f"{path}: unknown baseline {baseline_name!r}; choose from {sorted(BASELINES)}")
    config.setdefault("name", path.stem)
    config.setdefault("experiment", "mrpc")
    config.setdefault("finetune", {"config": "configs/downstream/mrpc.yaml"})
    return config


def repo_path(path: str) -> Path:
    """Config paths in a suite file are relative to the repository root."""
    return Path(path) if Path(path).is_absolute() else REPO_ROOT / path


def seed_list(value) -> list[int]:
    return list(range(value)) if isinstance(value, int) else [int(seed) for seed in value]


def resolve_encoder(encoder: dict, benchmark: str, logs: Path, data_digest: str) -> dict:
    """Reuse the given run, or pretrain once (found again by its settings, the data's and corpus
    files' content and the code version on a re-run)."""
    run_id = None
    if encoder.get("run"):
        run = encoder["run"]
        try:
            run_id = resolve_run_id(run) or run.removeprefix("runs:/")  # latest, runs:/<id>, models:/…
        except UserError:
            if "pretrain" not in encoder:
                raise
    if run_id is None:
        spec = {"config": encoder["pretrain"]["config"], "args": encoder["pretrain"].get("args", [])}
        spec["config"] = str(repo_path(spec["config"]))
        config_text = Path(spec["config"]).read_text() if Path(spec["config"]).is_file() else ""
        cell_hash = settings_hash({**spec, "config_text": config_text, "data": data_digest,
                                   "files": file_digests(spec["args"])})
        run_id = finished_run("pretrain", cell_hash)
        if run_id is None:
            print(f"  pretraining encoder '{encoder['name']}' ({spec['config']} {' '.join(spec['args'])}) …", flush=True)
            run_id = pretrain(spec["config"], spec["args"], cell_hash, benchmark,
                              logs / f"pretrain-{encoder['name']}.log")
    try:
        run = MlflowClient(tracking_uri()).get_run(run_id)
    except Exception:  # noqa: BLE001 - an unknown id is the user's to fix
        raise UserError(f"encoder '{encoder['name']}': no run {run_id} in {tracking_uri()}") from None
    if run.data.tags.get("stage") != "pretrain":
        raise UserError(f"encoder '{encoder['name']}': run {run_id} is not a pretrain run")
    return {"name": encoder["name"], "run_id": run_id, "num_layers": int(run.data.params["model.num_layers"]) + 1,
            # the best checkpoint's perplexity (runs made before best_val_ppl: the last val_ppl logged)
            "val_ppl": run.data.metrics.get("best_val_ppl", run.data.metrics.get("val_ppl")),
            "train_tokens": int(run.data.params.get("train_tokens", 0)),
            "config": encoder.get("pretrain", {}).get("config", run.data.params.get("config", ""))}


def expand_mixes(mixes: list[str], num_layers: int) -> list[str]:
    """``layers`` stands for each single layer below the top (``top`` is layer L-1)."""
    expanded = []
    for mix in mixes:
        expanded += [f"layer:{k}" for k in range(num_layers - 1)] if mix == "layers" else [mix]
    return list(dict.fromkeys(expanded))


def plan(config: dict, encoders: list[dict], finetune_args: list[str]) -> list[Cell]:
    """Every cell of the matrix, controls right after what they control."""
    cells: list[Cell] = []
    several = len(encoders) > 1
    for encoder in encoders:
        random_name = f"random({encoder['name']})" if several else "random"
        combos = [(mix, head, 1.0, seed_list(config.get("seeds", 5)))
                  for mix in expand_mixes(config.get("mixes", ["scalar"]), encoder["num_layers"])
                  for head in config.get("heads", ["pool-mlp"])]
        curve = config.get("learning_curve")
        if curve:
            combos += [(curve.get("mix", "scalar"), curve.get("head", "pool-mlp"), float(fraction),
                        seed_list(curve.get("seeds", config.get("seeds", 5))))
                       for fraction in curve["fractions"] if float(fraction) < 1.0]
        for mix, head, fraction, seeds in combos:
            suffix = f"-{mix}-{head}" + (f"@{fraction:g}" if fraction < 1 else "")
            kinds = [("pretrained", encoder["name"] + suffix)]
            if config.get("random_control", True):
                kinds.append(("random", random_name + suffix))
            for seed in seeds:
                for kind, method in kinds:
                    cells.append(Cell(method, kind, seed, encoder["name"], encoder["run_id"], mix, head, fraction,
                                      random_name + suffix if kind == "pretrained" and len(kinds) > 1 else "",
                                      finetune_args))
    control = next((c.method for c in cells if c.kind == "random"), "")
    for name in config.get("baselines", []):
        cells.append(Cell(name, "baseline", 0, control=control))
    return cells


def open_parent(config: dict, suite_hash: str) -> str:
    """The benchmark's parent run: resumed when this config ran before, else new."""
    client = MlflowClient(tracking_uri())
    experiment_id = ensure_experiment(config["experiment"])
    found = client.search_runs([experiment_id], f"tags.suite_hash = '{suite_hash}' and tags.stage = 'benchmark'",
                               order_by=["attributes.start_time DESC"], max_results=1)
    if found:
        client.update_run(found[0].info.run_id, status="RUNNING")
        return found[0].info.run_id
    tags = {"stage": "benchmark", "suite_hash": suite_hash, "benchmark": config["name"], "code_version": code_version()}
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    run = client.create_run(experiment_id, run_name=benchmark_run_name(config["name"]), tags=tags)
    params = {key: json.dumps(value) if isinstance(value, list) else value for key, value in flatten(config).items()}
    for key, value in params.items():
        client.log_param(run.info.run_id, key, str(value)[:6000])
    return run.info.run_id


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
                   "method": cell.method, "seed": cell.seed, "encoder": cell.encoder,
                   "kind": cell.kind, "mix": cell.mix, "head": cell.head, "train_fraction": cell.train_fraction,
                   "control": cell.control, **{m: metrics.get(m) for m in METRICS}}
            row.update({k: v for k, v in metrics.items() if k.startswith("mix_")})
            rows.append(row)
            path = client.download_artifacts(run_id, "predictions/test.csv", scratch)
            predictions[run_id] = pd.read_csv(path, dtype={"id1": str, "id2": str})
    return pd.DataFrame(rows), predictions


def drop_unpaired_controls(runs: pd.DataFrame, predictions: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Clear the control of a method whose test predictions cover other pairs than its control's
    (baselines on the full test set against cells capped by ``--data.max_pairs``): a paired test
    needs the same items, so such a method gets no p-value rather than a crash."""
    pairs = {run_id: set(zip(frame["id1"].astype(str), frame["id2"].astype(str)))
             for run_id, frame in predictions.items()}
    run_of = {(method, seed): run_id for method, seed, run_id in zip(runs["method"], runs["seed"], runs["run_id"])}
    unpaired = {row.method for row in runs.itertuples() if row.control
                and (row.control, row.seed) in run_of and pairs[row.run_id] != pairs[run_of[(row.control, row.seed)]]}
    for method in sorted(unpaired):
        print(f"  note: {method} was evaluated on other test pairs than its control: no p-value")
    return runs.assign(control=["" if method in unpaired else control
                                for method, control in zip(runs["method"], runs["control"])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=REPO_ROOT / "configs/benchmarks/default.yaml")
    parser.add_argument("--results-dir", type=Path, default=None, help="default: benchmarks/results/<name>")
    parser.add_argument("--finetune-args", default="", help="extra flags for every finetune cell")
    parser.add_argument("--pretrain-args", default="", help="extra flags for every pretraining")
    args = parser.parse_args(argv)
    # One line per cell is the suite's progress; MLflow's per-download bars would drown it.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        return run_suite(args)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def run_suite(args) -> int:
    started = time.perf_counter()
    config = load_config(args.config)
    for encoder in config["encoders"]:
        if "pretrain" in encoder:
            encoder["pretrain"]["args"] = [*encoder["pretrain"].get("args", []), *shlex.split(args.pretrain_args)]
    finetune_args = [*config["finetune"].get("args", []), *shlex.split(args.finetune_args)]
    finetune_config = str(repo_path(config["finetune"]["config"]))
    config_text = Path(finetune_config).read_text() if Path(finetune_config).is_file() else ""
    directory = args.results_dir or REPO_ROOT / "benchmarks" / "results" / config["name"]
    logs = directory / "logs"
    data_digest = load_mrpc(config.get("mrpc_dir")).content_hash
    encoders = [resolve_encoder(encoder, config["name"], logs, data_digest) for encoder in config["encoders"]]
    cells = plan(config, encoders, finetune_args)
    suite_hash = settings_hash({"config": config, "finetune_args": finetune_args, "data": data_digest,
                                "encoders": [e["run_id"] for e in encoders]})
    parent = open_parent(config, suite_hash)
    client = MlflowClient(tracking_uri())
    print(f"benchmark '{config['name']}': {len(cells)} cells, parent run {parent}")
    done: list[tuple[Cell, str]] = []
    try:
        for number, cell in enumerate(cells, start=1):
            cell_hash = settings_hash({**cell.spec(), "method": cell.method, "config_text": config_text,
                                       "data": data_digest})
            run_id = finished_run(config["experiment"], cell_hash, parent)
            status = None
            if run_id is not None:
                owner = client.get_run(run_id).data.tags.get("mlflow.parentRunId")
                status = "reused" if owner == parent else f"linked from benchmark {str(owner)[:8]}"
            else:
                cell_started = time.perf_counter()
                if cell.kind == "baseline":
                    run_id = baseline(cell, config.get("mrpc_dir"), config["experiment"], parent, cell_hash,
                                      config["name"])
                else:
                    log_path = logs / f"{cell.method}-seed{cell.seed}.log".replace(":", "")
                    run_id = finetune(cell, finetune_config, config["experiment"], parent, cell_hash, log_path,
                                      config["name"])
                status = f"{time.perf_counter() - cell_started:.0f} s"
            metrics = client.get_run(run_id).data.metrics
            print(f"  [{number:>3}/{len(cells)}] {cell.method:<34} seed {cell.seed}  dev acc {metrics['dev_acc']:.3f}"
                  f"  test acc {metrics['test_acc']:.3f}  ({status})", flush=True)
            done.append((cell, run_id))
        runs, predictions = run_table(done)
        runs = drop_unpaired_controls(runs, predictions)
        results = build_results(runs, predictions)
        wall = time.perf_counter() - started
        throughput_file = REPO_ROOT / "benchmarks" / "results" / "throughput.json"
        context = {"name": config["name"], "parent_run_id": parent, "wall_seconds": wall, "settings": config,
                   "encoders": encoders,
                   "throughput": json.loads(throughput_file.read_text()) if throughput_file.is_file() else None}
        written = write_outputs(directory, results, runs, context)
        for path in written:
            folder = path.parent.relative_to(directory).as_posix()
            client.log_artifact(parent, str(path), None if folder == "." else folder)
        client.log_metric(parent, "wall_seconds", wall)
        client.log_metric(parent, "cells", len(cells))
        view = describe_parent(client, parent, config["name"], results, directory / "report.md", args.config)
    except BaseException as error:
        client.set_terminated(parent, "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")
        raise
    client.set_terminated(parent, "FINISHED")
    print_summary(results, config, parent, directory, wall, link_lines(client, parent, view, runs))
    return 0


def print_summary(results: pd.DataFrame, config: dict, parent: str, directory: Path, wall: float,
                  links: list[str] = ()) -> None:
    """The results on the console: mean ± std over seeds, and the paired gap over the random twin
    on test accuracy with its 95% CI and p (points; † = one seed pair, an items-only test)."""
    print(f"\n── benchmark '{config['name']}' finished in {wall / 60:.1f} min " + "─" * 30)
    print(f"  {'method':<34}{'n':>3}  {'dev acc':>14}  {'test acc':>14}  {'test F1':>14}  "
          f"{'gap vs random (95% CI)':<24}  p")
    for row in results.itertuples():
        cells = [f"{100 * getattr(row, f'{m}_mean'):5.1f} ± {100 * getattr(row, f'{m}_std'):4.1f}"
                 for m in ("dev_acc", "test_acc", "test_f1")]
        gap, p_value = "—", "—"
        if pd.notna(getattr(row, "gap_vs_random", float("nan"))):
            mark = " †" if row.gap_test == ITEMS_ONLY else ""
            gap = f"{100 * row.gap_vs_random:+.1f} ({100 * row.gap_ci_low:+.1f}, {100 * row.gap_ci_high:+.1f}){mark}"
            p_value = f"{row.p_value_vs_random:.3g}"
        print(f"  {row.method:<34}{row.n_seeds:>3}  {cells[0]:>14}  {cells[1]:>14}  {cells[2]:>14}  "
              f"{gap:<24}  {p_value}")
    if "gap_test" in results and (results["gap_test"] == ITEMS_ONLY).any():
        print("  † one seed pair: the gap's CI counts test items only, not seed luck (see report.md, How to read)")
    print(f"  parent run {parent}  (experiment '{config['experiment']}')")
    print(f"  report     {directory / 'report.md'}")
    for line in links:
        print(line)


if __name__ == "__main__":
    sys.exit(main())
