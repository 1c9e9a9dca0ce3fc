"""The benchmark's figures, drawn from the per-run table (``benchmarks.cell.run_table``): learning
curve, learned scalar-mix weights, and the task's main test score (accuracy, or a graded task's
Pearson × 100) by single layer (each pretrained encoder beside its random twin).

Score axes start at a floor that keeps a gap's size honest (chance: a binary task's coin flip, no
correlation for a graded task; or the majority rate minus a margin, whichever is lower), with the
task's baselines (majority class and TF-IDF + LR, or the overlap cosine and TF-IDF + ridge) drawn
as horizontal lines where the benchmark ran them; titles say how many seeds a point is."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure  # no pyplot: figures render with Agg and hold no global state

from benchmarks.cell.run_table import (
    SETTING,
    controls,
    encoder_layers,
    full_fraction_method,
    setting_label,
    settings,
    single_layer,
    text_column,
    train_fractions,
    weight_columns,
)
from harness.datasets.metric_text import main_test_metric, metric_title, unit
from harness.datasets.task import CLASSES, Task


def _learning_curve(runs: pd.DataFrame, path: Path, data_name: str = "MRPC", task: Task = CLASSES) -> Path | None:
    table = settings(runs).assign(score=runs[main_test_metric(task)].astype(float) * 100)
    table = table[table["kind"] != "baseline"]  # baselines are the horizontal lines, never a curve
    if not (table["fraction"] < 1).any():
        return None
    curve_keys = set(map(tuple, table.loc[table["fraction"] < 1, SETTING].values))
    table = table[[tuple(row) in curve_keys for row in table[SETTING].values]]
    figure = Figure(figsize=(6, 4))
    axes = figure.subplots()
    for setting, group in table.groupby(SETTING, sort=False):
        _errorbar(axes, group, "fraction", full_fraction_method(runs, setting) or setting_label(setting))
    ticks = sorted(table["fraction"].unique())
    axes.set_xscale("log")
    axes.set_xticks(ticks, [f"{tick:g}" for tick in ticks])
    axes.set(
        xlabel=f"fraction of {data_name} train",
        ylabel=axis_label(task),
        title=f"Learning curve ({seed_text(table, [*SETTING, 'fraction'])})",
    )
    _accuracy_axis(axes, runs, task)
    legend_outside(axes)
    return _save(figure, path)


def _mix_weights(runs: pd.DataFrame, path: Path) -> Path | None:
    columns = weight_columns(runs)
    scalar = runs[(text_column(runs, "mix") == "scalar") & (train_fractions(runs) == 1.0)]
    if not columns or scalar[columns].isna().all().all():
        return None
    columns = [column for column in columns if scalar[column].notna().any()]
    methods = list(dict.fromkeys(scalar["method"]))
    width = 0.8 / len(methods)
    figure = Figure(figsize=(6, 4))
    axes = figure.subplots()
    for index, method in enumerate(methods):
        group = scalar[scalar["method"] == method]
        means, stds = group[columns].mean(), group[columns].std(ddof=1).fillna(0.0)
        gamma = group["mix_gamma"].mean() if "mix_gamma" in group else np.nan
        label = method if pd.isna(gamma) else f"{method} (γ={gamma:.2f})"
        positions = np.arange(len(columns)) + (index - (len(methods) - 1) / 2) * width
        axes.bar(positions, means, width, yerr=stds if len(group) > 1 else None, capsize=3, label=label)
    axes.axhline(1 / len(columns), color="grey", linestyle="--", linewidth=1, label="uniform (average)")
    axes.set_xticks(np.arange(len(columns)), [column.rsplit("_", 1)[1] for column in columns])
    axes.set(
        xlabel="layer (0 = token embedding)",
        ylabel="softmax weight",
        title=f"Learned scalar-mix weights ({seed_text(scalar, ['method'])})",
    )
    legend_outside(axes)
    return _save(figure, path)


def _accuracy_by_layer(runs: pd.DataFrame, path: Path, task: Task = CLASSES) -> Path | None:
    mix, kind, encoder = text_column(runs, "mix"), text_column(runs, "kind"), text_column(runs, "encoder")
    layer = pd.Series(
        [single_layer(value, depth) for value, depth in zip(mix, encoder_layers(runs))], index=runs.index, dtype=object
    )
    keep = layer.notna() & (train_fractions(runs) == 1.0) & kind.isin(["pretrained", "random"])
    single = runs.assign(mix=mix, kind=kind, encoder=encoder, layer=layer)[keep]
    encoders = list(dict.fromkeys(single.loc[single["kind"] == "pretrained", "encoder"]))
    if not encoders:
        return None
    twins = controls(runs)
    figure = Figure(figsize=(5 * len(encoders), 4))
    all_axes = figure.subplots(1, len(encoders), squeeze=False)
    for axes, name in zip(all_axes[0], encoders):
        mine = single[(single["kind"] == "pretrained") & (single["encoder"] == name)]
        control_methods = {twins.get(method) for method in mine["method"]}
        rows = pd.concat(
            [
                mine,
                single[
                    (single["kind"] == "random")
                    & (single["method"].isin(control_methods) | (single["encoder"] == name))
                ],
            ]
        )
        rows = rows.assign(layer=rows["layer"].astype(int), score=rows[main_test_metric(task)].astype(float) * 100)
        rows["head"] = text_column(rows, "head")
        for (kind_name, head), group in rows.groupby(["kind", "head"], sort=False):
            _errorbar(axes, group, "layer", f"{kind_name} {head}" if rows["head"].nunique() > 1 else kind_name)
        ticks, tops = sorted(rows["layer"].unique()), set(rows.loc[rows["mix"] == "top", "layer"])
        axes.set_xticks(ticks, [f"{tick} (top)" if tick in tops else str(tick) for tick in ticks])
        axes.set(
            xlabel="layer (0 = token embedding)",
            ylabel=axis_label(task),
            title=f"{name}: single layers ({seed_text(rows, ['kind', 'head', 'layer'])})",
        )
        _accuracy_axis(axes, runs, task)
        legend_outside(axes)
    return _save(figure, path)


def _errorbar(axes, group: pd.DataFrame, x: str, label: str) -> None:
    """One line of the main test score × 100 (``score``), mean ± std over the runs at each ``x``."""
    stats = group.groupby(x)["score"].agg(["mean", "std"]).fillna(0.0)
    axes.errorbar(stats.index, stats["mean"], yerr=stats["std"], marker="o", capsize=3, label=label)


def seed_text(rows: pd.DataFrame, point: list[str]) -> str:
    """How many runs each plotted point averages: ``1 seed`` (no error bar), ``mean ± std over 3
    seeds``, or ``mean ± std over 2–3 seeds`` when points differ."""
    counts = rows.groupby([column for column in point if column in rows], dropna=False).size()
    low, high = (int(counts.min()), int(counts.max())) if len(counts) else (1, 1)
    if high == 1:
        return "1 seed"
    return f"mean ± std over {low} seeds" if low == high else f"mean ± std over {low}–{high} seeds"


LINE_STYLES = (":", "-.")  # a task's baselines in the order it lists them: the untrained one, the fitted one
CHANCE = {"classes": 50.0, "graded": 0.0}  # a binary coin flip, no correlation: the axis never starts above it
LOWEST = {"classes": 0.0, "graded": -100.0}  # the lowest score × 100 a task has
MARGIN = 15.0  # points below the majority rate the axis may start at


def axis_label(task: Task) -> str:
    """``test accuracy (%)``, ``test Pearson r (× 100)``."""
    metric = main_test_metric(task)
    return f"{metric_title(metric)} ({unit(metric)})"


def baseline_lines(task: Task = CLASSES) -> list[tuple[str, str, str]]:
    """``(method, title, line style)`` of the task's baselines: majority class and TF-IDF + LR for classes."""
    from downstream.run.baselines import BASELINES  # sklearn only where figures are drawn

    return [(name, BASELINES[name].title, style) for name, style in zip(task.baselines, LINE_STYLES)]


def baseline_accuracies(runs: pd.DataFrame, task: Task = CLASSES) -> dict[str, float]:
    """Mean main test score × 100 of the task's baselines the benchmark ran, by title."""
    found = {}
    for method, label, _ in baseline_lines(task):
        values = pd.to_numeric(runs.loc[runs["method"] == method, main_test_metric(task)], errors="coerce").dropna()
        if len(values):
            found[label] = 100 * float(values.mean())
    return found


def _accuracy_axis(axes, runs: pd.DataFrame, task: Task = CLASSES) -> None:
    """The baselines as horizontal lines; the y-axis from a floor of min(chance, majority −
    margin, the lowest error bar), to the highest error bar or line, in steps of 5."""
    low, high = axes.get_ylim()  # autoscaled to the plotted points and error bars
    lines = baseline_accuracies(runs, task)
    for (_, label, style), color in zip(baseline_lines(task), ("grey", "black")):
        if label in lines:
            axes.axhline(
                lines[label], color=color, linestyle=style, linewidth=1.2, label=f"{label} ({lines[label]:.1f})"
            )
    majority = lines.get("majority class")
    floor = min([CHANCE[task.target], low] + ([majority - MARGIN] if majority is not None else []))
    top = max([high, *lines.values()]) + 1
    axes.set_ylim(max(LOWEST[task.target], 5 * math.floor(floor / 5)), min(100.0, 5 * math.ceil(top / 5)))


def legend_outside(axes, fontsize: int = 8) -> None:
    """The legend right of the axes, off the data: inside, it covered points and error bars."""
    axes.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def _save(figure: Figure, path: Path) -> Path:
    figure.tight_layout()  # the axes shrink to leave room for the legends beside them
    figure.savefig(path, dpi=120, bbox_inches="tight")
    return path


PLOTS = {"learning_curve": _learning_curve, "mix_weights": _mix_weights, "accuracy_by_layer": _accuracy_by_layer}


def write_figures(runs: pd.DataFrame, directory: Path, data_name: str = "MRPC", task: Task = CLASSES) -> list[Path]:
    """Draw every figure the runs have data for as ``directory/<name>.png``; remove stale ones.
    ``data_name`` names the data set on axes; scores are the task's main test metric's.

    Returns:
        The written paths.
    """
    written = []
    for name, plot in PLOTS.items():
        path = directory / f"{name}.png"
        path.unlink(missing_ok=True)  # a figure skipped now must not survive from an earlier write
        if plot is _learning_curve:
            drawn = plot(runs, path, data_name, task)
        elif plot is _accuracy_by_layer:
            drawn = plot(runs, path, task)
        else:
            drawn = plot(runs, path)
        written += [path] if drawn else []
    return written
