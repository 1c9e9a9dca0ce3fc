"""``python -m benchmarks.evaluate.pilot_chunk --chunk gpt-b --out ../pilot-out/gpt-b``: one
chunk of the cross-task pilot (``configs/benchmarks/tasks-pilot/pilot.yaml``). It pretrains the
chunk's family on text free of every task's dev and test sentences (``--data.keep_out``), evaluates
the encoder on the chunk's tasks (:mod:`benchmarks.evaluate.run` under the pilot's matrix), and writes
``chunk.json``: the commit, the estimate and the measured minutes of each part, the load beside them,
and each stage's run and contamination counts, so the next study is planned from what it cost."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from harness.datasets.registry import load_pair_data
from harness.entry_point import run_main
from harness.errors import UserError
from harness.unique_keys import load_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = REPO_ROOT / "configs" / "benchmarks" / "tasks-pilot" / "pilot.yaml"


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.evaluate.pilot_chunk", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--chunk", required=True, help="a chunk of the config's `chunks` (e.g. gpt-a)")
    parser.add_argument(
        "--out", type=Path, required=True, help="the chunk's folder, outside its worktree (e.g. ../pilot-out/gpt-b)"
    )
    parser.add_argument("--pretrain-args", default="", help="extra flags of every stage, one string (a smoke run)")
    parser.add_argument("--template", type=Path, default=None, help="another matrix than the config's (a smoke run)")
    return parser.parse_args(argv)


def stage_command(stage: dict, pilot: dict, extra: list[str]) -> list[str]:
    """The ``python -m pretrain fit`` command of one stage: its config and flags, the pilot's
    kept-out tasks, precision and seed, then ``extra``."""
    keep_out = ", ".join(pilot["keep_out"])
    return [
        sys.executable,
        "-m",
        "pretrain",
        "fit",
        "--config",
        stage["config"],
        *stage.get("args", []),
        f"--data.keep_out=[{keep_out}]",
        f"--trainer.precision={pilot['precision']}",
        f"--seed_everything={pilot['pretraining_seed']}",
        *extra,
    ]


def new_pretrain_run(since_ms: int) -> tuple[str, dict]:
    """The pretraining run a stage just made (FINISHED, started after ``since_ms``) and its params."""
    from mlflow.tracking import MlflowClient

    from harness.tracking.runs import tracking_uri

    client = MlflowClient(tracking_uri())
    runs = client.search_runs(
        [experiment.experiment_id for experiment in client.search_experiments()],
        f"tags.stage = 'pretrain' and attributes.status = 'FINISHED' and attributes.start_time >= {since_ms}",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not runs:
        raise UserError(f"no finished pretraining run in {tracking_uri()} since the stage started")
    return runs[0].info.run_id, dict(runs[0].data.params)


def repo_path(path: Path) -> str:
    """``path`` relative to the repository where it lies inside it (a record names no worktree)."""
    resolved = path.resolve()
    return resolved.relative_to(REPO_ROOT).as_posix() if resolved.is_relative_to(REPO_ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    if not args.config.is_file():
        raise UserError(f"--config {args.config}: no such file")
    pilot = load_yaml(args.config)
    if args.chunk not in pilot["chunks"]:
        raise UserError(f"--chunk {args.chunk}: expected one of {', '.join(pilot['chunks'])}")
    chunk = pilot["chunks"][args.chunk]
    family = pilot["families"][chunk["family"]]
    template = args.template or REPO_ROOT / pilot["template"]
    if not template.is_file():
        raise UserError(f"--template {template}: no such file")
    data = {task: load_pair_data(dataset=task) for task in chunk["tasks"]}  # a missing folder: one line, first
    args.out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()
    record = {
        "chunk": args.chunk,
        "family": chunk["family"],
        "tasks": chunk["tasks"],
        "commit": commit,
        "config": repo_path(args.config),
        "estimate_minutes": chunk["estimate_minutes"],
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "precision": pilot["precision"],
        "jobs": pilot["jobs"],
        "load_average_start": list(os.getloadavg()),
        "pretrain_args": args.pretrain_args,
        "stages": [],
    }
    started = time.perf_counter()
    for number, stage in enumerate(family["stages"], 1):
        command = stage_command(stage, pilot, shlex.split(args.pretrain_args))
        print(f"pilot {args.chunk}: stage {number}/{len(family['stages'])}: {' '.join(command[1:])}", flush=True)
        stage_started, since_ms = time.perf_counter(), int(time.time() * 1000)
        if subprocess.run(command, cwd=REPO_ROOT).returncode != 0:
            raise UserError(f"pilot {args.chunk}: stage {number} ({stage['config']}) failed")
        run_id, params = new_pretrain_run(since_ms)
        record["stages"].append(
            {
                "config": stage["config"],
                "run_id": run_id,
                "minutes": round((time.perf_counter() - stage_started) / 60, 1),
                "kept_out_sentences": params.get("kept_out_sentences"),
                "contamination": {key: value for key, value in params.items() if key.startswith("contamination_")},
            }
        )
    from benchmarks.evaluate.run import Evaluation, evaluate  # torch, Lightning, MLflow: only now

    evaluate_started = time.perf_counter()
    evaluate(
        Evaluation(
            f"runs:/{record['stages'][-1]['run_id']}",
            tuple(chunk["tasks"]),
            tuple(pilot["heads"]),
            pilot["seeds"],
            twin=True,
            jobs=pilot["jobs"],
            out=args.out / "evaluate",
            template=template,
        ),
        data,
    )
    record.update(
        evaluate_minutes=round((time.perf_counter() - evaluate_started) / 60, 1),
        minutes=round((time.perf_counter() - started) / 60, 1),
        ended=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        load_average_end=list(os.getloadavg()),
    )
    (args.out / "chunk.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    minutes, estimate = record["minutes"], record["estimate_minutes"]
    print(f"pilot {args.chunk}: {minutes} min (estimate {estimate}); {args.out / 'chunk.json'}")
    return 0


if __name__ == "__main__":
    run_main(main)
