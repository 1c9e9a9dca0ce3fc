"""The report's linear-probe checks (``benchmarks.tasks.linear_probe``): a row per probe (each encoder's
frozen features, and its random-init twin's), shown apart from the methods, and a remark for every
collapsed head arm whose encoder's probe is clearly above the majority rate — a defect of the
protocol (the head did not learn what the features hold), not a finding about pretraining."""

from __future__ import annotations

import math

import pandas as pd

from benchmarks.cell.method_names import PROBE_SUFFIX
from benchmarks.cell.run_table import text_column, train_fractions
from benchmarks.stats.results_columns import COLLAPSED_COLUMN
from harness.datasets.metric_text import metrics_sentence, short_title
from harness.datasets.task import CLASSES, Task

MAJORITY = "majority"


def probe_methods(runs: pd.DataFrame) -> list[str]:
    """The probe methods of a run table, in order."""
    return list(dict.fromkeys(runs.loc[text_column(runs, "kind") == "probe", "method"]))


PROBE_MODELS = {"classes": "Logistic regression", "graded": "Ridge regression"}  # a task's target → its probe


def probe_section(results: pd.DataFrame, runs: pd.DataFrame, task: Task = CLASSES) -> list[str]:
    """Markdown lines: the probes' dev and test metrics of the task (mean over seeds); [] without probes."""
    probes = probe_methods(runs)
    if not probes:
        return []
    table = results.set_index("method")
    metrics = task.run_metrics()
    rows = [
        f"| `{method}` | {int(table.loc[method, 'n_seeds'])} | "
        + " | ".join(_percent(table.loc[method], metric) for metric in metrics)
        + " |"
        for method in probes
        if method in table.index
    ]
    return [
        "",
        "## Linear probes (checks)",
        "",
        f"{PROBE_MODELS[task.target]} on each encoder's frozen features (mean over real tokens and layers; a pair "
        "[u; v; |u − v|; u·v], standardised; L2 chosen by 5-fold CV on the whole train split), and on its "
        "random-init twin's at each seed: what a linear read-out of the features reaches. A head arm that "
        "collapses where its encoder's probe is clearly above the majority rate is a defect of the protocol, "
        f"not a result. {metrics_sentence(task)}, mean ± std over seeds.",
        "",
        "| probe | seeds | " + " | ".join(map(short_title, metrics)) + " |",
        "|---|---|" + "---|" * len(metrics),
        *rows,
    ]


def _percent(row: pd.Series, metric: str) -> str:
    mean, std = 100 * row.get(f"{metric}_mean", math.nan), 100 * row.get(f"{metric}_std", math.nan)
    return "—" if pd.isna(mean) else f"{mean:.1f} ± {std:.1f}"


def probe_index(runs: pd.DataFrame) -> dict[tuple[str, str, float], str]:
    """``{(encoder, pretrained | random, fraction): probe method}`` of a run table's linear probes."""
    kinds, encoders, probe_of = text_column(runs, "kind"), text_column(runs, "encoder"), text_column(runs, "probe_of")
    return {
        (encoder, of, fraction): method
        for method, encoder, of, kind, fraction in zip(runs["method"], encoders, probe_of, kinds, train_fractions(runs))
        if kind == "probe"
    }


def twin_probes(runs: pd.DataFrame) -> dict[str, str]:
    """``{pretrained method: its twin's linear probe}``: the probe of the random-init encoder of the
    method's own encoder, fitted at the method's labelled fraction (the probe a head on the twin's
    frozen features could at least reach); methods without one are left out."""
    probes = probe_index(runs)
    kinds, encoders, fractions = text_column(runs, "kind"), text_column(runs, "encoder"), train_fractions(runs)
    found = {}
    for method, encoder, kind, fraction in zip(runs["method"], encoders, kinds, fractions):
        if kind == "pretrained" and (encoder, "random", fraction) in probes:
            found.setdefault(method, probes[(encoder, "random", fraction)])
    return found


def probe_remarks(results: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """One remark per collapsed arm whose encoder's probe (same encoder, same pretrained or twin
    kind) beats the majority baseline's test accuracy by more than two binomial standard errors
    over the test items; [] without probes, a majority row (a task of classes') or collapsed arms."""
    table = results.set_index("method")
    if not probe_methods(runs) or MAJORITY not in table.index or COLLAPSED_COLUMN not in table:
        return []
    majority = table.loc[MAJORITY, "test_acc_mean"]
    items = pd.to_numeric(runs["test_pairs"], errors="coerce").max() if "test_pairs" in runs else math.nan
    margin = 2 * math.sqrt(majority * (1 - majority) / items) if items and not math.isnan(items) else 0.02
    kinds, encoders = text_column(runs, "kind"), text_column(runs, "encoder")
    probes = probe_index(runs)
    remarks = []
    arms = runs[kinds.isin(["pretrained", "random"])].assign(encoder=encoders, kind=kinds)
    for method, group in arms.groupby("method", sort=False):
        collapsed = table.loc[method, COLLAPSED_COLUMN] if method in table.index else 0
        fraction = train_fractions(group).iloc[0]
        probe = probes.get((group["encoder"].iloc[0], group["kind"].iloc[0], fraction)) or probes.get(
            (group["encoder"].iloc[0], group["kind"].iloc[0], 1.0)
        )
        if not collapsed or probe is None or probe not in table.index:
            continue
        accuracy = table.loc[probe, "test_acc_mean"]
        fitted_on = "the whole train split" if probe.endswith(PROBE_SUFFIX) else "the same fraction of it"
        if accuracy > majority + margin:
            remarks.append(
                f"**Protocol defect:** `{method}` collapsed to one class in {int(collapsed)}/"
                f"{int(table.loc[method, 'n_seeds'])} seeds, yet a linear probe of the same encoder's frozen features "
                f"(`{probe}`, fitted on {fitted_on}) reaches {100 * accuracy:.1f}% test accuracy against "
                f"the majority class's {100 * majority:.1f}% (more than 2 standard errors, {100 * margin:.1f} points, "
                "above it): the features hold signal the head did not learn, so this arm's gap measures the head's "
                "optimisation, not the encoder."
            )
    return remarks
