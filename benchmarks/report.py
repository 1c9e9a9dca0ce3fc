"""A benchmark's outputs: ``results.csv`` (a row per method), ``runs.csv``, ``report.md`` and figures.

The suite builds the per-run table (``run_id, method, seed, encoder, kind, mix, head,
train_fraction, control, dev_acc, dev_f1, test_acc, test_f1`` and optional ``mix_weight_<k>``,
``mix_gamma``) and the test predictions of each run; this module only aggregates and writes.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from matplotlib.figure import Figure  # no pyplot: figures render with Agg and hold no global state

from benchmarks.stats import METRICS, PVALUE_COLUMN, is_collapsed, pvalues_vs_control, results_table

COLLAPSED_COLUMN = "collapsed_runs"
ANCHORS = [  # (system, test acc, test F1, source) — MSR test, from docs/reference-systems.md
    ("majority (always paraphrase)", 66.5, 79.9, "MSR test label distribution"),
    ("TF-IDF cosine + LR", 71.7, 80.7, "reference-systems.md (an earlier measurement on this machine)"),
    ("GLUE single-task BiLSTM + ELMo", 69.0, 80.8, "Wang et al. 2019, GLUE"),
    ("CBoW (frozen)", 73.4, 81.5, "Wang et al. 2019, GLUE"),
    ("InferSent (frozen)", 74.1, 81.2, "Wang et al. 2019, GLUE"),
]


def _text(runs: pd.DataFrame, column: str) -> pd.Series:
    return runs[column].fillna("").astype(str) if column in runs else pd.Series("", index=runs.index)


def _fractions(runs: pd.DataFrame) -> pd.Series:
    values = runs["train_fraction"] if "train_fraction" in runs else pd.Series(1.0, index=runs.index)
    return pd.to_numeric(values, errors="coerce").fillna(1.0)


def _weight_columns(frame: pd.DataFrame) -> list[str]:
    columns = [column for column in frame.columns if re.fullmatch(r"mix_weight_\d+", str(column))]
    return sorted(columns, key=lambda column: int(column.rsplit("_", 1)[1]))


def _controls(runs: pd.DataFrame) -> dict[str, str]:
    """``{method: control method}`` from the first non-empty ``control`` among a method's runs."""
    table = pd.DataFrame({"method": runs["method"], "control": _text(runs, "control")})
    table = table[table["control"] != ""]
    return dict(table.groupby("method", sort=False)["control"].first())


def build_results(
    runs: pd.DataFrame, test_predictions: dict[str, pd.DataFrame], test: str = "mcnemar"
) -> pd.DataFrame:
    """The benchmark's ``results.csv`` table.

    p_value_vs_random pairs a method's run at seed s with its control's run at seed s (seeds both
    have, with predictions) and takes the median per-seed p-value (``stats.pvalues_vs_control``).

    Returns:
        DataFrame, one row per method (first-appearance order): ``method, n_seeds,
        {dev,test}_{acc,f1}_{mean,std,min,max}, p_value_vs_random, collapsed_runs``.
    """
    predicted = runs[runs["run_id"].isin(list(test_predictions))]
    by_seed = {method: dict(zip(group["seed"], group["run_id"])) for method, group in predicted.groupby("method")}
    pvalues = {}
    for method, control in _controls(runs).items():
        seeds = sorted(set(by_seed.get(method, {})) & set(by_seed.get(control, {})))
        if not seeds or control == method:
            continue
        pairs = {name: [test_predictions[by_seed[name][seed]] for seed in seeds] for name in (method, control)}
        pvalues[method] = pvalues_vs_control(pairs, control, test=test)[method]
    table = results_table(runs, pvalues)
    collapsed = predicted.assign(collapsed=[is_collapsed(test_predictions[run]) for run in predicted["run_id"]])
    counts = collapsed.groupby("method")["collapsed"].sum()
    table[COLLAPSED_COLUMN] = [int(counts.get(method, 0)) for method in table["method"]]
    return table


def _data_names(context: dict) -> tuple[str, str, str]:
    """(data set, dev split, test split) as the report names them; MRPC's: MRPC, GLUE dev, MSR test."""
    name = (context.get("dataset") or {}).get("name", "mrpc")
    return ("MRPC", "GLUE dev", "MSR test") if name == "mrpc" else (name, f"{name} dev", f"{name} test")


def _learning_curve(runs: pd.DataFrame, path: Path, data_name: str = "MRPC") -> Path | None:
    fractions = _fractions(runs)
    if not (fractions < 1).any():
        return None
    keys = ["encoder", "kind", "mix", "head"]
    table = pd.DataFrame({key: _text(runs, key) for key in keys}).assign(
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
    scalar = runs[(_text(runs, "mix") == "scalar") & (_fractions(runs) == 1.0)]
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
    mix, kind, encoder = _text(runs, "mix"), _text(runs, "kind"), _text(runs, "encoder")
    single = runs[(mix.str.startswith("layer:") | (mix == "top")) & (_fractions(runs) == 1.0)
                  & kind.isin(["pretrained", "random"])].assign(mix=mix, kind=kind, encoder=encoder)
    encoders = list(dict.fromkeys(single.loc[single["kind"] == "pretrained", "encoder"]))
    if not encoders:
        return None
    controls, weights = _controls(runs), _weight_columns(runs)
    figure = Figure(figsize=(5 * len(encoders), 4))
    all_axes = figure.subplots(1, len(encoders), squeeze=False)
    for axes, name in zip(all_axes[0], encoders):
        mine = single[(single["kind"] == "pretrained") & (single["encoder"] == name)]
        control_methods = {controls.get(method) for method in mine["method"]}
        rows = pd.concat([mine, single[(single["kind"] == "random")
                                       & (single["method"].isin(control_methods) | (single["encoder"] == name))]])
        layers = {int(value.split(":", 1)[1]) for value in rows["mix"] if value.startswith("layer:")}
        scalar_depth = int(runs.loc[encoder == name, weights].notna().sum(axis=1).max()) if weights else 0
        depth = max(scalar_depth, max(layers, default=-1) + 1, 1)
        rows = rows.assign(layer=[_layer_index(row, weights, depth, layers) for _, row in rows.iterrows()],
                           test_acc=rows["test_acc"].astype(float) * 100)
        rows["head"] = _text(rows, "head")
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


def _number(value, spec: str) -> str:
    """``value`` formatted with ``spec``, or "—" when it is missing."""
    return "—" if value is None or pd.isna(value) else format(value, spec)


def _percent(row: pd.Series, metric: str) -> str:
    mean, std, low, high = (100 * row.get(f"{metric}_{stat}", np.nan) for stat in ("mean", "std", "min", "max"))
    return "—" if pd.isna(mean) else f"{mean:.1f} ± {std:.1f} ({low:.1f}–{high:.1f})"


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def _control_remark(method: str, control: str, accuracy: pd.Series, p: float) -> str:
    gap = round(accuracy[method] - accuracy[control], 1)
    verdict = "not significant" if pd.isna(p) or p >= 0.05 else "significant"
    numbers = f"{accuracy[method]:.1f}% vs {accuracy[control]:.1f}%; p = {_number(p, '.3g')}, {verdict} at 0.05"
    if gap > 0:
        return f"`{method}` beats its random control `{control}` on test accuracy by {gap:.1f} points ({numbers})."
    if gap == 0:
        return (f"**The random control `{control}` matches `{method}`** on test accuracy ({numbers}): "
                "no measurable gain from pretraining.")
    return (f"**The random control `{control}` beats `{method}`** on test accuracy by {-gap:.1f} points "
            f"({numbers}): pretraining did not help here.")


def _remarks(results: pd.DataFrame, runs: pd.DataFrame, data_name: str = "MRPC") -> list[str]:
    table = results.set_index("method")
    accuracy = table["test_acc_mean"] * 100
    remarks = []
    pretrained = set(runs.loc[_text(runs, "kind") == "pretrained", "method"])
    for method, control in _controls(runs).items():
        if method not in table.index or method not in pretrained or "@" in method:  # "@": see _curve_remarks
            continue
        if control not in table.index:
            remarks.append(f"`{method}`: its random control `{control}` has no results, so no comparison.")
        elif pd.notna(accuracy[method]) and pd.notna(accuracy[control]):
            remarks.append(_control_remark(method, control, accuracy, table.at[method, PVALUE_COLUMN]))
    full = [method for method in table.index if "@" not in method and pd.notna(accuracy[method])]
    if full:
        best = max(full, key=lambda method: accuracy[method])
        line = f"Best method by mean test accuracy: `{best}` ({accuracy[best]:.1f}%)."
        for baseline in ("tfidf-lr", "majority"):
            if baseline in table.index and baseline != best:
                gap = accuracy[best] - accuracy[baseline]
                line += f" {gap:+.1f} points vs `{baseline}` ({accuracy[baseline]:.1f}%)."
        if best == "tfidf-lr":
            line += " No learned representation beats the TF-IDF baseline."
        remarks.append(line)
    if COLLAPSED_COLUMN in table and table[COLLAPSED_COLUMN].sum() > 0:
        flagged = [f"`{method}` ({int(row[COLLAPSED_COLUMN])}/{int(row['n_seeds'])})"
                   for method, row in table.iterrows() if row[COLLAPSED_COLUMN] > 0]
        remarks.append("Collapsed runs (every test prediction one class: the majority rate or its complement): "
                       + ", ".join(flagged) + ". Expected for `majority`; for another method the run learned nothing.")
    if len(table):
        remarks.append(f"Seeds per method: {table['n_seeds'].min()}–{table['n_seeds'].max()}. {data_name} is small and "
                       "seed-sensitive (restarts move accuracy by several points): treat gaps within one std as noise.")
    return remarks + _curve_remarks(runs, accuracy)


def _curve_remarks(runs: pd.DataFrame, accuracy: pd.Series) -> list[str]:
    controls, remarks = _controls(runs), []
    curve = runs.assign(fraction=_fractions(runs), kind=_text(runs, "kind"))
    curve = curve[(curve["fraction"] < 1) & (curve["kind"] == "pretrained")]
    for base, group in curve.groupby(curve["method"].str.split("@").str[0], sort=False):
        smallest = group.loc[group["fraction"].idxmin()]
        pieces, gaps = [], []
        for fraction, method in ((smallest["fraction"], smallest["method"]), (1.0, base)):
            control = controls.get(method)
            if method in accuracy and control in accuracy:
                gaps.append(accuracy[method] - accuracy[control])
                pieces.append(f"{gaps[-1]:+.1f} points vs `{control}` at {fraction:g} of the training data")
            elif method in accuracy:
                pieces.append(f"{accuracy[method]:.1f}% at {fraction:g} of the training data (no control)")
        trend = ""
        if len(gaps) == 2:
            trend = f" — the gap {'shrinks' if abs(gaps[0]) > abs(gaps[1]) else 'grows'} with more training data"
        remarks.append(f"Learning curve `{base}`: " + "; ".join(pieces) + trend + ".")
    return remarks


def _config(config) -> str:
    if isinstance(config, dict):
        return ", ".join(f"{key}={value}" for key, value in config.items()) or "—"
    return f"`{config}`" if config else "—"


def _context_sections(context: dict) -> list[str]:
    lines = []
    if context.get("encoders"):
        lines += ["", "## Encoders", ""] + _table(["encoder", "pretrain run", "val ppl", "train tokens", "config"], [
            [encoder.get("name", "—"), f"`{encoder.get('run_id', '—')}`", _number(encoder.get("val_ppl"), ".1f"),
             _number(encoder.get("train_tokens"), ","),
             _config(encoder.get("config"))]
            for encoder in context["encoders"]])
    if context.get("throughput"):
        header = ["row", "softmax", "batch", "real tokens/s", "model GFLOP/s", "matmul peak GFLOP/s", "peak RSS MB"]
        keys = [("real_tokens_per_s", ".0f"), ("model_gflops_per_s", ".2f"), ("matmul_peak_gflops_per_s", ".1f"),
                ("peak_rss_mb", ".0f")]
        lines += ["", "## Pretraining throughput", ""] + _table(header, [
            [row.get("name"), row.get("softmax"), row.get("batch_size")]
            + [_number(row.get(key), spec) for key, spec in keys] for row in context["throughput"]])
    if context.get("settings"):
        plain = json.loads(json.dumps(context["settings"], default=str))  # paths etc. become strings
        settings = yaml.safe_dump(plain, sort_keys=False, allow_unicode=True).rstrip()
        lines += ["", "## Settings", "", "```yaml", settings, "```"]
    return lines


def _split_sizes(context: dict) -> str:
    """The sentence naming the evaluation splits, their sizes and the F1 kind, from the data set."""
    dataset = context.get("dataset") or {"dev_pairs": 408, "test_pairs": 1725}  # MRPC's, when not given
    _, dev, test = _data_names(context)
    text = f"dev = {dev} ({dataset['dev_pairs']} pairs), test = {test} ({dataset['test_pairs']} pairs)"
    if dataset.get("f1_average") == "macro":
        text += f"; F1 = macro F1 over the {len(dataset['labels'])} labels ({', '.join(dataset['labels'])})"
    return text


def _dataset_line(context: dict) -> list[str]:
    dataset = context.get("dataset")
    if not dataset:
        return []
    sizes = "/".join(str(dataset[f"{split}_pairs"]) for split in ("train", "dev", "test"))
    return [f"- data set: `{dataset['name']}`, labels {', '.join(dataset['labels'])}; train/dev/test {sizes} pairs"]


def _markdown(results: pd.DataFrame, runs: pd.DataFrame, context: dict, figures: list[Path]) -> str:
    wall = context.get("wall_seconds")
    lines = [f"# Benchmark report: {context.get('name', 'benchmark')}", "",
             f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
             f"- parent run: `{context.get('parent_run_id', '—')}`",
             f"- wall time: {'—' if wall is None else f'{wall / 60:.1f} min ({wall:.0f} s)'}",
             *_dataset_line(context),
             "", "## Results", "",
             f"Accuracy and F1 in %, mean ± std (min–max) over seeds; {_split_sizes(context)}.", ""]
    rows = [[f"`{row['method']}`", int(row["n_seeds"]), *[_percent(row, metric) for metric in METRICS],
             _number(row.get(PVALUE_COLUMN), ".3g"),
             f"⚠ {int(row[COLLAPSED_COLUMN])}/{int(row['n_seeds'])}" if row.get(COLLAPSED_COLUMN, 0) > 0 else "no"]
            for _, row in results.iterrows()]
    lines += _table(["method", "seeds", "dev acc", "dev F1", "test acc", "test F1", "p vs random", "collapsed"], rows)
    lines += ["", "## Remarks", ""] + [f"- {remark}" for remark in _remarks(results, runs, _data_names(context)[0])]
    if context.get("anchors", True):
        lines += ["", "## Published anchors (MSR test, for context; not produced by this run)", ""]
        lines += _table(["system", "test acc", "test F1", "source"], [list(anchor) for anchor in ANCHORS])
        lines += ["", "GLUE rows come from other encoders, corpora and training budgets: context, not targets."]
    lines += _context_sections(context)
    test = "exact McNemar test" if context.get("test", "mcnemar") == "mcnemar" else "paired bootstrap test"
    lines += ["", "## How to read", "",
              f"- `p vs random`: {test} on the {_data_names(context)[2]} predictions of a method against its "
              "random-init control "
              "(same architecture, mix and head): seed i against control seed i, median p over seeds. It asks whether "
              "the two make different errors, not how large the gap is; — = no control.",
              "- `collapsed`: runs whose test predictions are all one class.",
              "- Per-run numbers are in `runs.csv`; this table is `results.csv`."]
    if figures:
        lines += ["", "## Figures"]
        lines += [line for path in figures for line in ("", f"![{path.stem}](figures/{path.name})")]
    return "\n".join(lines) + "\n"


def write_outputs(directory: Path, results: pd.DataFrame, runs: pd.DataFrame, context: dict) -> list[Path]:
    """Write ``results.csv``, ``runs.csv``, ``report.md`` and ``figures/*.png`` under ``directory``.

    Returns:
        The written paths (figures without data to plot are skipped).
    """
    directory, context = Path(directory), context or {}
    figures_dir = directory / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    written = [directory / "results.csv", directory / "runs.csv"]
    results.to_csv(written[0], index=False)
    runs.to_csv(written[1], index=False)
    data_name = _data_names(context)[0]
    plots = {"learning_curve": lambda runs, path: _learning_curve(runs, path, data_name), "mix_weights": _mix_weights,
             "accuracy_by_layer": _accuracy_by_layer}
    figures = []
    for name, plot in plots.items():
        path = figures_dir / f"{name}.png"
        path.unlink(missing_ok=True)  # a figure skipped now must not survive from an earlier write
        figures += [path] if plot(runs, path) else []
    report = directory / "report.md"
    report.write_text(_markdown(results, runs, context, figures), encoding="utf-8")
    return written + figures + [report]
