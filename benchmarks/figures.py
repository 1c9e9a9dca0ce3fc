"""The benchmark's figures, drawn from the per-run table: learning curve, learned scalar-mix
weights, and test accuracy by single layer (each pretrained encoder beside its random twin).

Also the small readers of that table that the report shares (text columns, train fractions, the
method → random-twin map)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure  # no pyplot: figures render with Agg and hold no global state


def text_column(runs: pd.DataFrame, column: str) -> pd.Series:
    """A column as strings, "" where missing (an all-"" column when absent)."""
    return runs[column].fillna("").astype(str) if column in runs else pd.Series("", index=runs.index)


def train_fractions(runs: pd.DataFrame) -> pd.Series:
    """The ``train_fraction`` column as numbers, 1.0 where missing or absent."""
    values = runs["train_fraction"] if "train_fraction" in runs else pd.Series(1.0, index=runs.index)
    return pd.to_numeric(values, errors="coerce").fillna(1.0)


def _weight_columns(frame: pd.DataFrame) -> list[str]:
    columns = [column for column in frame.columns if re.fullmatch(r"mix_weight_\d+", str(column))]
    return sorted(columns, key=lambda column: int(column.rsplit("_", 1)[1]))


def controls(runs: pd.DataFrame) -> dict[str, str]:
    """``{method: control method}`` from the first non-empty ``control`` among a method's runs."""
    table = pd.DataFrame({"method": runs["method"], "control": text_column(runs, "control")})
    table = table[table["control"] != ""]
    return dict(table.groupby("method", sort=False)["control"].first())


def _learning_curve(runs: pd.DataFrame, path: Path, data_name: str = "MRPC") -> Path | None:
    fractions = train_fractions(runs)
    if not (fractions < 1).any():
        return None
    keys = ["encoder", "kind", "mix", "head"]
    table = pd.DataFrame({key: text_column(runs, key) for key in keys}).assign(
        method=runs["method"], fraction=fractions, test_acc=runs["test_acc"].astype(float) * 100)
    curve_keys = set(map(tuple, table.loc[table["fraction"] < 1, keys].values))
    table = table[[tuple(row) in curve_keys for row in table[keys].values]]
    figure = Figure(figsize=(6, 4))
    axes = figure.subplots()
    for _, group in table.groupby(keys, sort=False):
        _errorbar(axes, group, "fraction", group["method"].iloc[0].split("@")[0])
    ticks = sorted(table["fraction"].unique())
    axes.set_xscale("log")
    axes.set_xticks(ticks, [f"{tick:g}" for tick in ticks])
    axes.set(xlabel=f"fraction of {data_name} train", ylabel="test accuracy (%)", title="Learning curve (mean ± std, seeds)")
    axes.legend(fontsize=8)
    return _save(figure, path)


def _mix_weights(runs: pd.DataFrame, path: Path) -> Path | None:
    columns = _weight_columns(runs)
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
        axes.bar(positions, means, width, yerr=stds, capsize=3, label=label)
    axes.axhline(1 / len(columns), color="grey", linestyle="--", linewidth=1, label="uniform (average)")
    axes.set_xticks(np.arange(len(columns)), [column.rsplit("_", 1)[1] for column in columns])
    axes.set(xlabel="layer (0 = token embedding)", ylabel="softmax weight", title="Learned scalar-mix weights")
    axes.legend(fontsize=8)
    return _save(figure, path)


def _layer_index(run: pd.Series, weights: list[str], depth: int, taken: set[int]) -> float:
    """x position of a single-layer run: K for layer:K; top at L-1 (or after the layers if taken)."""
    if run["mix"].startswith("layer:"):
        return int(run["mix"].split(":", 1)[1])
    present = int(run[weights].notna().sum()) if weights else 0
    last = (present or depth) - 1
    return last if last >= 0 and last not in taken else depth


def _accuracy_by_layer(runs: pd.DataFrame, path: Path) -> Path | None:
    mix, kind, encoder = text_column(runs, "mix"), text_column(runs, "kind"), text_column(runs, "encoder")
    single = runs[(mix.str.startswith("layer:") | (mix == "top")) & (train_fractions(runs) == 1.0)
                  & kind.isin(["pretrained", "random"])].assign(mix=mix, kind=kind, encoder=encoder)
    encoders = list(dict.fromkeys(single.loc[single["kind"] == "pretrained", "encoder"]))
    if not encoders:
        return None
    twins, weights = controls(runs), _weight_columns(runs)
    figure = Figure(figsize=(5 * len(encoders), 4))
    all_axes = figure.subplots(1, len(encoders), squeeze=False)
    for axes, name in zip(all_axes[0], encoders):
        mine = single[(single["kind"] == "pretrained") & (single["encoder"] == name)]
        control_methods = {twins.get(method) for method in mine["method"]}
        rows = pd.concat([mine, single[(single["kind"] == "random")
                                       & (single["method"].isin(control_methods) | (single["encoder"] == name))]])
        layers = {int(value.split(":", 1)[1]) for value in rows["mix"] if value.startswith("layer:")}
        scalar_depth = int(runs.loc[encoder == name, weights].notna().sum(axis=1).max()) if weights else 0
        depth = max(scalar_depth, max(layers, default=-1) + 1, 1)
        rows = rows.assign(layer=[_layer_index(row, weights, depth, layers) for _, row in rows.iterrows()],
                           test_acc=rows["test_acc"].astype(float) * 100)
        rows["head"] = text_column(rows, "head")
        for (kind_name, head), group in rows.groupby(["kind", "head"], sort=False):
            _errorbar(axes, group, "layer", f"{kind_name} {head}" if rows["head"].nunique() > 1 else kind_name)
        ticks, tops = sorted(rows["layer"].unique()), set(rows.loc[rows["mix"] == "top", "layer"])
        labels = [("top" if tick >= depth else f"{tick} (top)" if tick in tops else str(tick)) for tick in ticks]
        axes.set_xticks(ticks, labels)
        axes.set(xlabel="layer (0 = token embedding)", ylabel="test accuracy (%)", title=f"{name}: single layers")
        axes.legend(fontsize=8)
    return _save(figure, path)


def _errorbar(axes, group: pd.DataFrame, x: str, label: str) -> None:
    """One line of test accuracy (%), mean ± std over the runs at each ``x``."""
    stats = group.groupby(x)["test_acc"].agg(["mean", "std"]).fillna(0.0)
    axes.errorbar(stats.index, stats["mean"], yerr=stats["std"], marker="o", capsize=3, label=label)


def _save(figure: Figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


PLOTS = {"learning_curve": _learning_curve, "mix_weights": _mix_weights, "accuracy_by_layer": _accuracy_by_layer}


def write_figures(runs: pd.DataFrame, directory: Path, data_name: str = "MRPC") -> list[Path]:
    """Draw every figure the runs have data for as ``directory/<name>.png``; remove stale ones.
    ``data_name`` names the data set on axes.

    Returns:
        The written paths.
    """
    written = []
    for name, plot in PLOTS.items():
        path = directory / f"{name}.png"
        path.unlink(missing_ok=True)  # a figure skipped now must not survive from an earlier write
        drawn = plot(runs, path, data_name) if plot is _learning_curve else plot(runs, path)
        written += [path] if drawn else []
    return written
