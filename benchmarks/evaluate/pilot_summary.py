"""``python -m benchmarks.evaluate.pilot_summary results/tasks-pilot``: the cross-task pilot read
from its committed chunks alone (each family's ``chunk.json``, its tasks' results folders and
zero-shot files): the table across tasks, and per task the variance components and costs that a
pre-registered cross-task study is planned from. Writes ``<folder>/summary.md`` and
``<folder>/components.csv``.

Each gap is pretrained − random-init twin in the task's main score (the zero-shot rows: Spearman),
seeds and items crossed (:func:`benchmarks.stats.gaps.crossed_gap`, on the task's per-item scores:
correctness, or jackknife pseudo-values of the correlation). A deterministic arm (the pretrained
encoder's probe and zero-shot similarity: frozen features, no initialisation) is repeated at each
of its twin's seeds. With one pretraining run per family, the between-run variance is not
estimable here: the planned MDE leaves it out and says so.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.results_files.folder import read_folder
from benchmarks.stats.gaps import crossed_gap, minimum_detectable_effect
from benchmarks.stats.pairing import paired_scores
from harness.datasets.registry import task_of
from harness.datasets.task import metric_title
from harness.entry_point import run_main
from harness.errors import UserError

PILOT_TASKS = ("mrpc", "sick-e", "sick-r", "stsb")  # the table's column order
PLANNED_SEED_PAIRS = 10  # a study of 5 pretraining runs × 2 head seeds, as v3
ARMS = ("scalar-attn", "linear-probe", "zero-shot", "zero-shot-st")
TWIN = "random"


@dataclass
class Arm:
    """One method of one family on one task: its runs (seed → predictions) and its twin's."""

    family: str
    task: str
    arm: str
    runs: dict[int, pd.DataFrame]
    twin_runs: dict[int, pd.DataFrame]
    cpu_minutes: list[float]

    @property
    def metric(self) -> str:
        task = task_of(self.task)
        return task.zero_shot_metric if self.arm.startswith("zero-shot") else task.main_metric


def zero_shot_runs(folder: Path) -> dict[str, dict[int, pd.DataFrame]]:
    """Method → seed → test predictions of a task's ``zero-shot/`` folder (``<method>/s<seed>/`` or,
    as the first chunk wrote them, ``<method>/`` with its seed in ``metrics.json``)."""
    methods: dict[str, dict[int, pd.DataFrame]] = {}
    for record_path in sorted(folder.glob("**/metrics.json")):
        record = json.loads(record_path.read_text(encoding="utf-8"))
        frame = pd.read_csv(record_path.parent / "test.csv", dtype=str)
        frame[["label", "pred"]] = frame[["label", "pred"]].astype(float)
        methods.setdefault(record["method"], {})[int(record["seed"])] = frame
    return methods


def read_arms(pilot: Path) -> tuple[list[Arm], dict[str, dict[str, float]], list[dict]]:
    """Every (family, task, arm) of the pilot's chunks, the baselines' test scores per task, the chunks."""
    arms, baselines, chunks = [], {}, []
    for chunk_path in sorted(pilot.glob("*/chunk.json")):
        chunk = json.loads(chunk_path.read_text(encoding="utf-8"))
        chunk.setdefault("chunk", chunk_path.parent.name)
        chunk["encoders"] = set()
        chunks.append(chunk)
        family = chunk["family"]
        for task_folder in sorted((chunk_path.parent / "evaluate").iterdir()):
            if not (task_folder / "results").is_dir():
                continue
            task = task_folder.name
            _, cells = read_folder(task_folder / "results")
            methods: dict[str, dict[int, pd.DataFrame]] = {}
            minutes: dict[str, list[float]] = {}
            for cell in cells:
                spec, metrics = cell.record["cell"], cell.record["metrics"]
                if spec["kind"] == "baseline":
                    main = task_of(task).main_metric
                    baselines.setdefault(task, {})[spec["method"]] = metrics[f"test_{main}"]
                    continue
                methods.setdefault(spec["method"], {})[spec["seed"]] = cell.predictions["test"]
                if spec["kind"] == "pretrained":
                    chunk["encoders"].add(spec["encoder_identity"])
                if "time_cpu_s" in metrics:
                    minutes.setdefault(spec["method"], []).append(metrics["time_cpu_s"] / 60)
            methods.update(zero_shot_runs(task_folder / "zero-shot"))
            for arm in ARMS:
                mine, twin = methods.get(f"{family}-{arm}"), methods.get(f"{TWIN}-{arm}")
                if mine and twin:
                    spent = minutes.get(f"{family}-{arm}", []) + minutes.get(f"{TWIN}-{arm}", [])
                    arms.append(Arm(family, task, arm, mine, twin, spent))
    if not chunks:
        raise UserError(f"{pilot}: no chunk.json below it (python -m benchmarks.evaluate.pilot_chunk writes them)")
    return arms, baselines, chunks


def arm_row(arm: Arm) -> dict:
    """The arm's scores, its gap to the twin with a 95% CI, the variance components (points²) and MDEs."""
    task = task_of(arm.task)
    runs = arm.runs
    if len(runs) == 1:  # deterministic: the same predictions at each of the twin's seeds
        runs = {seed: next(iter(runs.values())) for seed in arm.twin_runs}
    seeds, mine, twin = paired_scores(runs, arm.twin_runs, arm.arm, task, arm.metric)
    gap = crossed_gap(mine - twin)
    items = mine.shape[1]
    components = [100**2 * float(value) for value in (gap.seed_variance, gap.item_variance, gap.residual_variance)]

    def detectable(seed_pairs: int) -> float:
        """The MDE in points for ``seed_pairs`` on these items (NaN with one seed pair: seed luck unknown)."""
        if len(seeds) < 2:
            return float("nan")
        return 100 * minimum_detectable_effect(*(value / 100**2 for value in components), seed_pairs, items)

    return {
        "task": arm.task,
        "family": arm.family,
        "arm": arm.arm,
        "metric": arm.metric,
        "seeds": len(seeds),
        "items": items,
        "score": 100 * float(mine.mean()),
        "twin": 100 * float(twin.mean()),
        "gap": 100 * float(gap.gap),
        "ci_low": 100 * float(gap.ci_low),
        "ci_high": 100 * float(gap.ci_high),
        "p": float(gap.p_value),
        "seed_sd": components[0] ** 0.5,
        "item_sd": components[1] ** 0.5,
        "residual_sd": components[2] ** 0.5,
        "mde_this_design": detectable(len(seeds)),
        "mde_planned": detectable(PLANNED_SEED_PAIRS),
        "cpu_minutes_per_cell": statistics.fmean(arm.cpu_minutes) if arm.cpu_minutes else float("nan"),
    }


def gap_text(row) -> str:
    """``71.2 (+1.3 [+0.2, +2.4])``; without a CI where one seed pair left seed luck unknown."""
    if np.isnan(row.ci_low):
        return f"{row.score:.1f} ({row.gap:+.1f}, one seed pair: no CI)"
    return f"{row.score:.1f} ({row.gap:+.1f} [{row.ci_low:+.1f}, {row.ci_high:+.1f}])"


def cross_task_table(rows: pd.DataFrame, baselines: dict[str, dict[str, float]], tasks: list[str]) -> list[str]:
    """Markdown: a row per family and arm, a column per task: score (gap to the twin, its CI)."""
    titles = [f"{task} ({metric_title('test_' + task_of(task).main_metric)})" for task in tasks]
    lines = ["| family | method | " + " | ".join(titles) + " |", "|---|---|" + "---:|" * len(tasks)]
    for (family, arm), group in rows.groupby(["family", "arm"], sort=False):
        by_task = {row.task: row for row in group.itertuples()}
        cells = [gap_text(row) if row is not None else "" for row in (by_task.get(task) for task in tasks)]
        name = f"{arm} (ρ)" if arm.startswith("zero-shot") else arm
        lines.append(f"| {family} | {name} | " + " | ".join(cells) + " |")
    for method in sorted({name for scores in baselines.values() for name in scores}):
        cells = [f"{100 * baselines[task][method]:.1f}" if method in baselines.get(task, {}) else "" for task in tasks]
        lines.append(f"| baseline | {method} | " + " | ".join(cells) + " |")
    return lines


def components_table(rows: pd.DataFrame) -> list[str]:
    lines = [
        "| task | family | method | seeds × items | seed SD | item SD | residual SD | MDE, this design | "
        f"MDE, {PLANNED_SEED_PAIRS} seed pairs | CPU min per cell |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows.itertuples():
        figures = [
            figure(row.seed_sd, ".2f"),
            *(figure(value, ".1f") for value in (row.item_sd, row.residual_sd, row.mde_this_design, row.mde_planned)),
            figure(row.cpu_minutes_per_cell, ".1f"),
        ]
        lines.append(
            f"| {row.task} | {row.family} | {row.arm} | {row.seeds} × {row.items} | " + " | ".join(figures) + " |"
        )
    return lines


def figure(value: float, spec: str) -> str:
    """``value`` formatted, or nothing where it was not estimable (one seed) or not logged."""
    return "" if math.isnan(value) else f"{value:{spec}}"


def chunk_lines(chunks: list[dict]) -> list[str]:
    """A row per chunk (its commit, minutes against its estimate, the load), then a line for each
    family whose chunks pretrained checkpoints that differ (CPU pretraining is seeded, not always
    bit-reproducible)."""
    lines = [
        "| chunk | tasks | commit | stages (min) | evaluate (min) | total (min) | estimate (min) | load |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for chunk in chunks:
        stages = " + ".join(f"{stage['minutes']:.0f}" for stage in chunk["stages"])
        load = f"{chunk['load_average_start'][0]:.1f}, {chunk['load_average_end'][0]:.1f}"
        lines.append(
            f"| {chunk['chunk']} | {', '.join(chunk.get('tasks', []))} | `{chunk['commit'][:12]}` | {stages} | "
            f"{chunk['evaluate_minutes']:.0f} | {chunk['minutes']:.0f} | {chunk['estimate_minutes']} | {load} |"
        )
    for family in dict.fromkeys(chunk["family"] for chunk in chunks):
        identities = set().union(*(chunk["encoders"] for chunk in chunks if chunk["family"] == family))
        if len(identities) > 1:
            lines += ["", f"{family}: its chunks pretrained {len(identities)} different checkpoints from one seed."]
    for chunk in chunks:
        if chunk.get("note"):
            lines += ["", f"{chunk['chunk']}: {chunk['note']}"]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n")[0])
    parser.add_argument("pilot", type=Path, help="the pilot's folder (results/tasks-pilot)")
    args = parser.parse_args(argv)
    arms, baselines, chunks = read_arms(args.pilot)
    rows = pd.DataFrame([arm_row(arm) for arm in arms])
    tasks = [task for task in PILOT_TASKS if task in set(rows["task"])] + sorted(set(rows["task"]) - set(PILOT_TASKS))
    rows.to_csv(args.pilot / "components.csv", index=False, float_format="%.6g")
    text = [
        "# The cross-task pilot: its table, variance components and costs",
        "",
        f"Written by `python -m benchmarks.evaluate.pilot_summary {args.pilot}` from the chunks below.",
        "",
        "## Test scores × 100 (gap to the random-init twin, points, 95% CI over seeds × items)",
        "",
        *cross_task_table(rows, baselines, tasks),
        "",
        "Scores: mean over seeds of each seed's test score (accuracy for mrpc and sick-e, Pearson r × 100 "
        "for sick-r and stsb; zero-shot rows (ρ) Spearman ρ × 100). One pretraining run per family: the CIs "
        "cover head seeds and test items, not pretraining.",
        "",
        "## Variance components of each gap (points) and what a study of them can detect",
        "",
        *components_table(rows),
        "",
        "Seed, item and residual SDs of the per-seed, per-item differences pretrained − twin (two-way crossed "
        f"random effects, truncated at 0); MDE at α 0.05 and power 0.8 for this design and for {PLANNED_SEED_PAIRS} "
        "seed pairs on the same items, without the between-run variance, which one run per family cannot "
        "estimate (study v3's MRPC figure: docs/study.md). CPU minutes per trained cell: both arms' mean "
        "(none for the probes and zero-shot, whose cells log no CPU time); an empty "
        "SD or MDE: one seed, from which it cannot be estimated.",
        "",
        "## Chunks",
        "",
        *chunk_lines(chunks),
    ]
    (args.pilot / "summary.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    print("\n".join(text[4:]))
    return 0


if __name__ == "__main__":
    run_main(main)
