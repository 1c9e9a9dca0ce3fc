"""A benchmark's ``results.csv``: a row per method, aggregated over seeds, each method beside its
random-init twin and the TF-IDF baseline (the gap tests of ``benchmarks.stats.gaps``)."""

from __future__ import annotations

import pandas as pd

from benchmarks.cell.method_names import fraction_suffix
from benchmarks.cell.run_table import controls, prediction_keys, text_column, train_fractions
from benchmarks.plan.lr_selection import CHOSEN_COLUMN
from benchmarks.report.probe_checks import twin_probes
from benchmarks.report.recipe_section import picked_heads
from benchmarks.stats.aggregate import aggregate_runs
from benchmarks.stats.controls import control_check
from benchmarks.stats.gaps import Gap, compare_with_twin, is_collapsed
from benchmarks.stats.paired_seeds import paired_t_over_seeds
from benchmarks.stats.pairing import same_items
from benchmarks.stats.pretraining_runs import PretrainingGaps, compare_over_pretrainings
from benchmarks.stats.results_columns import Evidence, results_frame
from harness.datasets.task import CLASSES, Task

CHECK_KINDS = ("baseline", "probe")  # systems fitted beside the methods, with no twin or TF-IDF gap
TFIDF_BASELINE = "tfidf-lr"  # a task of classes': every learned method is also tested against it (``gap_vs_tfidf``)


def tfidf_baseline(task: Task = CLASSES) -> str:
    """The fitted TF-IDF baseline of the task, the last of its baselines: ``tfidf-lr`` (classes),
    ``tfidf-ridge`` (a graded score over the same overlap features)."""
    return task.baselines[-1]


def tfidf_gap(
    method: str, method_runs: dict, fraction: float, by_seed: dict, run_of: dict | None = None, task: Task = CLASSES
) -> tuple[Gap | None, str]:
    """A method's gap to TF-IDF + LR and the baseline row it is against: at a fraction below 1, the
    ``tfidf-lr@<fraction>`` fitted on each seed's own labelled subset, paired by seed like a twin;
    else (or where that row did not run) the one deterministic ``tfidf-lr`` on the whole train split,
    repeated at every seed. Read as the twin gap is (``twin_gap``: over pretraining runs where the
    method's cells come from several), so every gap of a method is in one unit."""
    reference = tfidf_baseline(task)
    at_fraction = f"{reference}{fraction_suffix(fraction)}"
    if (
        at_fraction != reference
        and at_fraction in by_seed
        and same_items(next(iter(method_runs.values())), next(iter(by_seed[at_fraction].values())))
    ):  # not on capped cells
        gap = twin_gap(method, method_runs, by_seed[at_fraction], run_of, task)[0]
        if gap is not None:
            return gap, at_fraction
    if reference not in by_seed:
        return None, ""
    full = by_seed[reference][min(by_seed[reference])]  # deterministic: one run is all of it
    if not same_items(next(iter(method_runs.values())), full):
        return None, ""
    gap = twin_gap(method, method_runs, {seed: full for seed in method_runs}, run_of, task)[0]
    return gap, reference if gap is not None else ""


def pretraining_runs(runs: pd.DataFrame) -> dict[str, dict]:
    """``{method: {seed: pretraining run}}`` of the pretrained methods, from ``encoder_run``."""
    pretrained = runs[(text_column(runs, "kind") == "pretrained") & (text_column(runs, "encoder_run") != "")]
    return {method: dict(zip(group["seed"], group["encoder_run"])) for method, group in pretrained.groupby("method")}


def twin_gap(
    method: str, method_runs: dict, twin_runs: dict, run_of: dict | None, task: Task = CLASSES
) -> tuple[Gap | None, PretrainingGaps | None]:
    """A method's gap over its twin: over its pretraining runs ("this recipe", with "these checkpoints"
    beside it) where its cells come from several, else the crossed seeds × items test."""
    run_of = run_of or {}
    if len(set(run_of.get(seed) for seed in method_runs)) > 1:
        try:
            nested = compare_over_pretrainings(
                {(run_of.get(seed), seed): frame for seed, frame in method_runs.items()}, twin_runs, method, task
            )
        except ValueError as error:  # an unbalanced design: the conditional reading alone
            print(f"  note: {error}; its gap is the crossed test over every seed, conditional on its runs")
            return compare_with_twin(method_runs, twin_runs, method, task), None
        return (None, None) if nested is None else (nested.recipe, nested)
    return compare_with_twin(method_runs, twin_runs, method, task), None


def build_results(runs: pd.DataFrame, test_predictions: dict[str, pd.DataFrame], task: Task = CLASSES) -> pd.DataFrame:
    """The benchmark's ``results.csv`` table.

    A method with a ``control`` is compared with that random-init twin: runs paired by seed value
    (seeds both have, with predictions), items by their id columns, the accuracy gap tested across
    seeds and items (``stats.compare_with_twin``; beside it, a paired t over the seed pairs,
    ``stats.paired_seeds``), and its control is checked against the
    pre-registered rule (``stats.controls``: both arms learned), and with the twin's linear probe at its
    fraction (``probe_checks.twin_probes``), read as the twin gap is. Every method but the baselines is
    also compared with TF-IDF + LR at its own labelled fraction (``tfidf_gap``; a graded task's TF-IDF
    ridge); baselines get no gap to a twin. Every score, gap and collapse is the task's
    (``benchmarks.stats``: accuracy, or a graded task's main correlation).

    Returns:
        DataFrame, one row per method (first-appearance order), the columns
        ``benchmarks.stats.results_columns`` declares (its optional ones where some method has a value).
    """
    keys = prediction_keys(runs)
    predicted = runs[keys.isin(list(test_predictions))].assign(prediction_key=keys)
    by_seed = {
        method: {seed: test_predictions[key] for seed, key in zip(group["seed"], group["prediction_key"])}
        for method, group in predicted.groupby("method")
    }
    baselines = set(runs.loc[text_column(runs, "kind").isin(CHECK_KINDS), "method"])  # no gaps: checks
    gaps, baseline_gaps, nested, seeds_t = {}, {}, {}, {}
    run_of = pretraining_runs(predicted)
    for method, control in controls(runs).items():
        if control != method and method in by_seed and control in by_seed and method not in baselines:
            gap, over_runs = twin_gap(method, by_seed[method], by_seed[control], run_of.get(method, {}), task)
            if gap is not None:
                gaps[method] = gap
                seeds_t[method] = paired_t_over_seeds(by_seed[method], by_seed[control], method, task=task)
            if over_runs is not None:
                nested[method] = over_runs
    probe_gaps, probe_of = {}, {}
    for method, probe in twin_probes(predicted).items():
        if method in gaps and probe in by_seed:  # the twin's probe as a third reference, read as the twin gap is
            gap = twin_gap(method, by_seed[method], by_seed[probe], run_of.get(method, {}), task)[0]
            if gap is not None:
                probe_gaps[method], probe_of[method] = gap, probe
    fraction_of = train_fractions(runs).groupby(runs["method"]).first()
    references = {}
    for method in sorted(set(by_seed) - baselines):
        gap, references[method] = tfidf_gap(
            method, by_seed[method], fraction_of[method], by_seed, run_of.get(method, {}), task
        )
        if gap is not None:
            baseline_gaps[method] = gap
    collapsed = predicted.assign(
        collapsed=[is_collapsed(test_predictions[key], task) for key in predicted["prediction_key"]]
    )
    counts = collapsed.groupby("method")["collapsed"].sum()
    checked = {
        method: control_check(method, by_seed[method], control, by_seed[control], task)
        for method, control in controls(runs).items()
        if method in gaps
    }
    rates = steps = None
    if CHOSEN_COLUMN in runs and pd.to_numeric(runs[CHOSEN_COLUMN], errors="coerce").notna().any():
        rates = pd.to_numeric(runs[CHOSEN_COLUMN], errors="coerce").groupby(runs["method"]).first()  # lr_grid's pick
    heads = picked_heads(runs)  # a head chosen on dev (recipe_from, head `picked`): the one its cells ran with
    if "train_steps" in runs:  # the optimiser steps of a method's fits (cells logged since equal_steps)
        steps = pd.to_numeric(runs["train_steps"], errors="coerce").groupby(runs["method"]).mean()
    evidence = [
        Evidence(
            method,
            row,
            gap=gaps.get(method),
            baseline=baseline_gaps.get(method),
            reference=references.get(method) or "",
            collapsed=int(counts.get(method, 0)),
            control=checked.get(method),
            pretrainings=len(set(run_of[method].values())) if method in run_of else None,
            over_runs=nested.get(method),
            rate=None if rates is None else rates.get(method, float("nan")),
            steps=None if steps is None else steps.get(method, float("nan")),
            head=heads.get(method, float("nan")) if heads else None,
            seeds_t=seeds_t.get(method),
            probe=probe_gaps.get(method),
            probe_reference=probe_of.get(method, ""),
        )
        for method, row in ((row["method"], row) for row in aggregate_runs(runs, task).to_dict("records"))
    ]
    return results_frame(evidence, task)
