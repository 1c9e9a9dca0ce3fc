"""``python -m benchmarks.scaleout [--config <study>] [--budget] [--cpus N ...]``: how long a study's
plan would take on N CPUs, by the cost model (``benchmarks.plan.cost_model``) and the minutes in
``benchmarks/scaleout-costs.json`` measured on this machine: the CPU-hours, the critical path and
the simulated wall time of the executor's own policy on each CPU count. No task runs: it plans the
config (each ``recipe_from`` arm at the pick its selection folder holds, once those folders exist)
and schedules the costs."""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
from pathlib import Path

from benchmarks.plan.cost_model import COSTS_FILE, Costs, critical_path, simulate, study_plan
from benchmarks.plan.matrix import load_config, with_budget
from benchmarks.plan.pretraining_runs import method_encoder
from benchmarks.results_files.recipe_folders import with_known_picks
from harness.entry_point import run_main
from harness.errors import UserError
from harness.tracking.runs import REPO_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaleout", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=REPO_ROOT / "configs/benchmarks/families.yaml")
    parser.add_argument("--budget", action="store_true", help="the config's `budget:` subset")
    parser.add_argument("--costs", type=Path, default=COSTS_FILE)
    parser.add_argument("--cpus", type=int, nargs="+", default=[2, 16, 64, 256])
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        config = with_budget(config, args.config) if args.budget else config
        if not args.costs.is_file():
            raise UserError(f"--costs={args.costs}: no such file")
        costs = Costs.read(args.costs)
        missing = sorted({method_encoder(e) for e in config.encoders if method_encoder(e) not in costs.stages})
        if missing:
            raise UserError(f"--costs={args.costs}: no stage minutes for encoder(s) {missing}")
        costs = costs.only(config.encoders)
        cells = study_plan(with_known_picks(config, str(args.config)))  # a folder of another recipe: one line
    except UserError as error:
        print(f"error: {error}")
        return 2
    suite_config = config.finetune_config
    work = sum(costs.planned(cells, suite_config).values()) + sum(
        sum(m) * costs.stage_cpus for m in costs.stages.values() if m
    )
    path = critical_path(costs, cells, suite_config)
    print(
        f"{config.name}: {len(cells)} cells, {len(config.encoders)} encoders, "
        f"{work / 60:.1f} CPU-hours, critical path {path / 60:.2f} h"
    )
    print("| CPUs | simulated wall time | bound max(critical path, CPU-hours / CPUs) |")
    print("|---:|---:|---:|")
    for count in args.cpus:
        simulated = simulate(costs, cells, count, suite_config)
        print(f"| {count} | {simulated / 60:.2f} h | {max(path, work / count) / 60:.2f} h |")
    return 0


if __name__ == "__main__":
    run_main(main)
