"""A benchmark's outputs: ``results.csv`` (a row per method), ``runs.csv``, ``report.md`` and figures.

The suite builds the per-run table (``run_id, method, seed, encoder, kind, mix, head,
train_fraction, control, dev_acc, dev_f1, test_acc, test_f1`` and optional ``mix_weight_<k>``,
``mix_gamma``) and the test predictions of each run; this module only aggregates and writes.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks.figures import controls, text_column, train_fractions, write_figures
from benchmarks.study import study_figures, study_remarks, study_rows, study_tables
from benchmarks.multiplicity import chance_remark
from benchmarks.stats import (METRICS, NO_SEED_REPLICATION, PVALUE_COLUMN, compare_with_baseline, compare_with_twin,
                             is_collapsed, results_table)

COLLAPSED_COLUMN = "collapsed_runs"
TFIDF_BASELINE = "tfidf-lr"  # every learned method is also tested against it (``gap_vs_tfidf``)
ANCHORS = [  # (system, test acc, test F1, source) — MSR test, from docs/reference-systems.md
    ("majority (always paraphrase)", 66.5, 79.9, "MSR test label distribution"),
    ("TF-IDF cosine + LR", 71.7, 80.7, "reference-systems.md (an earlier measurement on this machine)"),
    ("GLUE single-task BiLSTM + ELMo", 69.0, 80.8, "Wang et al. 2019, GLUE"),
    ("CBoW (frozen)", 73.4, 81.5, "Wang et al. 2019, GLUE"),
    ("InferSent (frozen)", 74.1, 81.2, "Wang et al. 2019, GLUE"),
    ("InferSent (frozen) + LR", 76.2, 83.1, "Conneau et al. 2017, SentEval"),
    ("BERT-Small (4 × 512), fine-tuned", 76.2, 83.4, "Turc et al. 2019, GLUE test"),
    ("BERT-Medium (8 × 512), fine-tuned", 81.6, 86.6, "Turc et al. 2019, GLUE test"),
]


PUBLISHED_NOTE = ("Encoders pretrained elsewhere (`hf:` folders, `reference:` packages such as all-MiniLM-L6-v2), on "
                  "far more text and, for a reference, with supervised sentence-pair training: a ceiling for this "
                  "protocol — what the same heads and fine-tuning reach when the encoder has transfer — not a peer "
                  "of the encoders pretrained here. Their random-init twins go through the same code.")


def published_methods(runs: pd.DataFrame, context: dict) -> set[str]:
    """Methods (pretrained and twin) whose encoder is a published one (the context's encoders)."""
    names = {encoder["name"] for encoder in context.get("encoders") or [] if encoder.get("published")}
    if not names or "encoder" not in runs:
        return set()
    return set(runs.loc[runs["encoder"].isin(names), "method"])


def build_results(runs: pd.DataFrame, test_predictions: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The benchmark's ``results.csv`` table.

    A method with a ``control`` is compared with that random-init twin: runs paired by seed value
    (seeds both have, with predictions), items by their id columns, the accuracy gap tested across
    seeds and items (``stats.compare_with_twin``). Every method but the baselines is also compared
    with the deterministic ``tfidf-lr`` baseline (``stats.compare_with_baseline``); baselines get
    no gap to a twin.

    Returns:
        DataFrame, one row per method (first-appearance order): ``method, n_seeds,
        {dev,test}_{acc,f1}_{mean,std,min,max}, p_value_vs_random, collapsed_runs, gap_vs_random,
        gap_ci_low, gap_ci_high, mde_vs_random, paired_seeds, paired_items, gap_test, p_adjusted,
        gap_vs_tfidf, gap_vs_tfidf_ci_low, gap_vs_tfidf_ci_high, p_vs_tfidf``.
    """
    predicted = runs[runs["run_id"].isin(list(test_predictions))]
    by_seed = {method: {seed: test_predictions[run_id] for seed, run_id in zip(group["seed"], group["run_id"])}
               for method, group in predicted.groupby("method")}
    baselines = set(runs.loc[text_column(runs, "kind") == "baseline", "method"])
    gaps, baseline_gaps = {}, {}
    for method, control in controls(runs).items():
        if control != method and method in by_seed and control in by_seed and method not in baselines:
            gap = compare_with_twin(by_seed[method], by_seed[control], method)
            if gap is not None:
                gaps[method] = gap
    if TFIDF_BASELINE in by_seed:
        tfidf = by_seed[TFIDF_BASELINE][min(by_seed[TFIDF_BASELINE])]  # deterministic: one run is all of it
        for method in sorted(set(by_seed) - baselines):
            gap = compare_with_baseline(by_seed[method], tfidf, method)
            if gap is not None:
                baseline_gaps[method] = gap
    table = results_table(runs, gaps, baseline_gaps)
    collapsed = predicted.assign(collapsed=[is_collapsed(test_predictions[run]) for run in predicted["run_id"]])
    counts = collapsed.groupby("method")["collapsed"].sum()
    table.insert(table.columns.get_loc(PVALUE_COLUMN) + 1, COLLAPSED_COLUMN,  # the old columns keep their places
                 [int(counts.get(method, 0)) for method in table["method"]])
    return table


def _number(value, spec: str) -> str:
    """``value`` formatted with ``spec``, or "—" when it is missing."""
    return "—" if value is None or pd.isna(value) else format(value, spec)


def _percent(row: pd.Series, metric: str) -> str:
    mean, std, low, high = (100 * row.get(f"{metric}_{stat}", np.nan) for stat in ("mean", "std", "min", "max"))
    return "—" if pd.isna(mean) else f"{mean:.1f} ± {std:.1f} ({low:.1f}–{high:.1f})"


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def _gap_cell(row: pd.Series) -> str:
    """``+5.0 (+1.2, +8.8)`` in points; ``+5.0 (no seed replication)`` with one seed pair; — without a twin."""
    if pd.isna(row.get("gap_vs_random", np.nan)):
        return "—"
    if pd.isna(row.get("gap_ci_low", np.nan)):
        return f"{_points(row['gap_vs_random'])} ({NO_SEED_REPLICATION})"
    return f"{_points(row['gap_vs_random'])} ({_points(row['gap_ci_low'])}, {_points(row['gap_ci_high'])})"


def _mde(value: float) -> str:
    """The MDE in points; "> 100" when no possible gap is detected with the planned power."""
    return "> 100" if pd.notna(value) and value > 1 else _number(100 * value, ".1f")


def _verdict(row: pd.Series) -> str:
    if pd.isna(row["gap_ci_low"]):
        return NO_SEED_REPLICATION
    return "excludes 0" if row["gap_ci_low"] > 0 or row["gap_ci_high"] < 0 else "includes 0"


def _control_remark(method: str, control: str, row: pd.Series, accuracy: pd.Series) -> str:
    if pd.isna(row.get("gap_vs_random", np.nan)):
        return f"`{method}`: no seed with test predictions in common with its random twin `{control}`, so no test."
    if pd.isna(row.get(PVALUE_COLUMN, np.nan)):
        return (f"`{method}` against its random twin `{control}`: {accuracy[method]:.1f}% vs {accuracy[control]:.1f}% "
                f"mean test accuracy, paired gap {_points(row['gap_vs_random'])} points over "
                f"{int(row['paired_items'])} test items of one seed pair: no seed replication, so no CI or p "
                "(seed luck alone moves a run's accuracy); run more seeds before concluding.")
    numbers = (f"{accuracy[method]:.1f}% vs {accuracy[control]:.1f}% mean test accuracy; paired gap "
               f"{_points(row['gap_vs_random'])} points, 95% CI {_points(row['gap_ci_low'])} to "
               f"{_points(row['gap_ci_high'])}, p = {row[PVALUE_COLUMN]:.3g}; {int(row['paired_seeds'])} seed "
               f"pair(s) × {int(row['paired_items'])} test items")
    if row["gap_ci_low"] > 0:
        return f"`{method}` beats its random twin `{control}` ({numbers}): the CI excludes 0."
    if row["gap_ci_high"] < 0:
        return (f"**The random twin `{control}` beats `{method}`** ({numbers}): the CI excludes 0; "
                f"pretraining hurt here.")
    return (f"`{method}` against its random twin `{control}`: the CI includes 0 ({numbers}). This design detects "
            f"gaps of about {_mde(row['mde_vs_random'])} points (MDE); a smaller one may go unseen.")


def _remarks(results: pd.DataFrame, runs: pd.DataFrame, published: set[str] = frozenset()) -> list[str]:
    table = results.set_index("method")
    accuracy = table["test_acc_mean"] * 100
    remarks = []
    pretrained = set(runs.loc[text_column(runs, "kind") == "pretrained", "method"])
    for method, control in controls(runs).items():
        if method not in table.index or method not in pretrained or "@" in method:  # "@": see _curve_remarks
            continue
        if control not in table.index:
            remarks.append(f"`{method}`: its random twin `{control}` has no results, so no comparison.")
        elif pd.notna(accuracy[method]) and pd.notna(accuracy[control]):
            remarks.append(_control_remark(method, control, table.loc[method], accuracy))
    full = [method for method in table.index if "@" not in method and pd.notna(accuracy[method])
            and method not in published]  # published encoders are a ceiling, not candidates
    if full:
        best = max(full, key=lambda method: accuracy[method])
        line = f"Best method by mean test accuracy: `{best}` ({accuracy[best]:.1f}%)"
        line += " (published and reference encoders left out)." if published else "."
        for baseline in ("tfidf-lr", "majority"):
            if baseline in table.index and baseline != best:
                gap = accuracy[best] - accuracy[baseline]
                line += f" {gap:+.1f} points vs `{baseline}` ({accuracy[baseline]:.1f}%)."
        if best == "tfidf-lr":
            line += " No learned representation beats the TF-IDF baseline."
        remarks.append(line)
    many = chance_remark(table["gap_ci_low"], table["gap_ci_high"], table.get("p_adjusted"))
    if many:
        remarks.append(f"Gaps to the random twin: {many}")
    if COLLAPSED_COLUMN in table and table[COLLAPSED_COLUMN].sum() > 0:
        flagged = [f"`{method}` ({int(row[COLLAPSED_COLUMN])}/{int(row['n_seeds'])})"
                   for method, row in table.iterrows() if row[COLLAPSED_COLUMN] > 0]
        remarks.append("Collapsed runs (every test prediction one class: the majority rate or its complement): "
                       + ", ".join(flagged) + ". Expected for `majority`; for another method the run learned nothing.")
    if len(table):
        remarks.append(f"Seeds per method: {table['n_seeds'].min()}–{table['n_seeds'].max()}. Restarts move accuracy "
                       "by themselves (seed luck): compare methods by the paired gap and its CI, not by the means.")
    tested = table[table["mde_vs_random"].notna()] if "mde_vs_random" in table else table.iloc[:0]
    if len(tested):
        effects = tested["mde_vs_random"]
        remarks.append(f"Minimum detectable gap (MDE; α = 0.05, power 0.8) with {_design(tested)}, from the variance "
                       f"components measured here: {_mde(effects.median())} points (median of {len(tested)} "
                       f"comparisons; {_mde(effects.min())}–{_mde(effects.max())}). A smaller gap can hide in a CI "
                       "that includes 0; `benchmarks.stats.minimum_detectable_effect` gives the MDE of a planned "
                       "number of seeds and test items.")
    return remarks + _curve_remarks(runs, table, accuracy)


def _span(values: pd.Series) -> str:
    low, high = int(values.min()), int(values.max())
    return f"{low}" if low == high else f"{low}–{high}"


def _design(tested: pd.DataFrame) -> str:
    return f"{_span(tested['paired_seeds'])} seed pair(s) × {_span(tested['paired_items'])} test items"


def _curve_remarks(runs: pd.DataFrame, table: pd.DataFrame, accuracy: pd.Series) -> list[str]:
    twins, remarks = controls(runs), []
    curve = runs.assign(fraction=train_fractions(runs), kind=text_column(runs, "kind"))
    curve = curve[(curve["fraction"] < 1) & (curve["kind"] == "pretrained")]
    for base, group in curve.groupby(curve["method"].str.split("@").str[0], sort=False):
        smallest = group.loc[group["fraction"].idxmin()]
        pieces, gaps = [], []
        for fraction, method in ((smallest["fraction"], smallest["method"]), (1.0, base)):
            control = twins.get(method)
            row = table.loc[method] if method in table.index else None
            if row is not None and pd.notna(row.get("gap_vs_random", np.nan)):
                gaps.append(row["gap_vs_random"])
                interval = f"CI {_points(row['gap_ci_low'])} to {_points(row['gap_ci_high'])}, " \
                    if pd.notna(row["gap_ci_low"]) else ""
                pieces.append(f"{_points(gaps[-1])} points vs `{control}` at {fraction:g} of the training data "
                              f"({interval}{_verdict(row)})")
            elif method in accuracy:
                pieces.append(f"{accuracy[method]:.1f}% at {fraction:g} of the training data (no paired twin)")
        trend = ""
        if len(gaps) == 2:  # the signed values: "grows" would not say in whose favour
            trend = (f" — the point estimate moves from {_points(gaps[0])} to {_points(gaps[1])} points with more "
                     "training data (read the CIs before calling it a trend)") if gaps[0] != gaps[1] \
                else " — the same point estimate at both"
        remarks.append(f"Learning curve `{base}`: " + "; ".join(pieces) + trend + ".")
    return remarks


def _config(config) -> str:
    if isinstance(config, dict):
        return ", ".join(f"{key}={value}" for key, value in config.items()) or "—"
    return f"`{config}`" if config else "—"


def _context_sections(context: dict) -> list[str]:
    lines = []
    if context.get("encoders"):
        lines += ["", "## Encoders", ""] + _table(["encoder", "pretrain run / source", "val ppl", "train tokens",
                                                   "config"], [
            [encoder.get("name", "—") + (" (reference)" if encoder.get("reference") else ""),
             f"`{encoder.get('run_id', '—')}`", _number(encoder.get("val_ppl"), ".1f"),
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


TIMES = ["time_total_s", "time_fit_s", "time_eval_s"]


def time_section(runs: pd.DataFrame) -> list[str]:
    """Where the cells' time went, per method: the sums of their runs' ``time_total_s`` (start to
    end of the run), ``time_fit_s`` (Lightning's fit loop) and ``time_eval_s`` (evaluation and
    outputs), and the median overhead (total − fit) of a cell; [] for runs without them."""
    if "time_total_s" not in runs or runs["time_total_s"].isna().all():
        return []
    timed = runs.dropna(subset=TIMES).assign(overhead=lambda r: r["time_total_s"] - r["time_fit_s"])
    grouped = timed.groupby("method", sort=False)
    rows = [[f"`{method}`", len(group), *[f"{group[name].sum() / 60:.1f}" for name in TIMES],
             f"{group['overhead'].median():.1f}"] for method, group in grouped]
    rows.append(["all cells", len(timed), *[f"{timed[name].sum() / 60:.1f}" for name in TIMES],
                 f"{timed['overhead'].median():.1f}"])
    return ["", "## Where the cells' time went", "",
            "Sums over each method's cells in minutes (cells run side by side, so they add up to more than the "
            "wall time); overhead = total − fit, a cell's median in seconds.", ""] + _table(
        ["method", "cells", "total min", "fit min", "eval min", "median overhead s"], rows)


HOW_TO_READ = [
    "- **What is paired.** A method's run at seed s is paired with its random-init twin's run at the same seed "
    "value s (same architecture, mix, head and training data; only the encoder's weights differ; seeds only one of "
    "them has are left out). Their test predictions are matched item by item on the id columns, and each item "
    "scores d = 1 (only the method right), −1 (only the twin right) or 0.",
    "- **What varies.** Two things are random samples, and the gap must hold beyond both: the training seeds "
    "(initialisation and data order: *seed luck* moves a run's accuracy by itself) and the test items (drawn from "
    "all the pairs the data set could have held). Treating the items as fixed, or the seeds as fixed, is the "
    "“language-as-fixed-effect fallacy” (Clark 1973).",
    "- **The test.** The seed pairs × items table of d is split, as a two-way crossed random-effects design, into "
    "a seed part, an item part and a residual (mean squares MS). `gap vs random` = mean d (method minus twin, in "
    "accuracy points); its variance is (max(MS_seed, MS_res) + max(MS_item, MS_res) − MS_res) / (seeds × items): "
    "a negative seed or item component is set to 0, so seeds whose gaps happen to tie cannot shrink the standard "
    "error below the residual noise. Degrees of freedom: each mean square's df weighted by its share of that "
    "variance (Satterthwaite's formula squares the shares, and with 3 seeds rejected a true null up to 8.6% of the "
    "time in simulation); the t distribution gives the 95% CI and the two-sided `p`. The CI excludes 0 exactly "
    "when p < 0.05. With 2 seed pairs the test is approximate (a true null rejected up to 8.3% of the time in "
    "simulation); 3 or more are better (6.2%), 5 or more best (5.1%).",
    "- **What the CI means.** Repeat the study with new seeds and new test items from the same source: 95% of such "
    "intervals contain the true gap (simulated coverage under a true null with seed luck, 3–5 seeds, 1,000 items: "
    "94–99%, the higher figures where seeds barely vary). A CI that includes 0 is not evidence of no gap: compare "
    "its width, and the MDE, with the gap you care about.",
    "- **One seed pair: no seed replication.** Seed luck cannot be estimated from one seed pair, so the row gives the "
    "gap without a CI, p or MDE; a paired test over items would pass seed luck off as a gap. Run more seeds.",
    "- **Many comparisons.** `p_adjusted` (results.csv) is Holm's adjustment of `p` over all of the report's twin "
    "comparisons: below 0.05, the claim holds with a family-wise error rate of 5%. About 1 in 20 CIs excludes 0 "
    "by chance alone; the remarks count them.",
    "- **Against TF-IDF + LR.** `gap_vs_tfidf` (results.csv, with its CI and `p_vs_tfidf`) is the same crossed test "
    "of each method's seeds × items against `tfidf-lr`'s one deterministic prediction per item (its correctness is "
    "an item property; the seed part is the method's luck alone). Baselines get no gap to a twin.",
    "- **MDE.** The smallest true gap this design (its seed pairs and test items, with the variance components it "
    "measured) detects 4 times out of 5 at α = 0.05 (two-sided).",
    "- **Why not the median of per-seed p-values** (this column's former meaning): a median of p-values is not a "
    "p-value and has no error rate; each per-seed McNemar test sees only item noise, so seed luck makes seed pairs "
    "look different even when method and twin are the same process. In simulation (5 seeds, 1,000 items, "
    "accuracy std over seeds ≈ 2.7 points) it rejected a true null about 47% of the time at 0.05, an items-only "
    "test on seed-averaged items 51%, this test 5%; without seed luck the median was far too cautious (< 1%).",
    "- `collapsed`: runs whose test predictions are all one class.",
    "- Per-run numbers are in `runs.csv`; this table is `results.csv` (gaps there as fractions).",
]


def _split_sizes(results: pd.DataFrame, runs: pd.DataFrame, context: dict) -> str:
    """Dev and test sizes for the report, from the context, the runs' ``{dev,test}_pairs`` or the test predictions."""
    dataset = context.get("dataset")
    sizes = dict(context.get("split_sizes") or {})
    for split in ("dev", "test"):
        if split not in sizes and f"{split}_pairs" in runs:
            counts = pd.to_numeric(runs[f"{split}_pairs"], errors="coerce").dropna().astype(int)
            if len(counts):
                sizes[split] = counts.max() if counts.min() == counts.max() else f"{counts.min()}–{counts.max()}"
    if "test" not in sizes and "paired_items" in results and (results["paired_items"] > 0).any():
        sizes["test"] = int(results["paired_items"].max())
    parts = [f"{split} = {dataset + ' ' if dataset else ''}{split} split" + (f" ({sizes[split]} pairs)"
                                                                          if split in sizes else "")
             for split in ("dev", "test")]
    return ", ".join(parts)


def _f1_kind(context: dict) -> str:
    """How F1 is computed, from the context's ``labels`` and ``positive_label`` (nothing when absent)."""
    labels = context.get("labels")
    if not labels:
        return ""
    if len(labels) == 2:
        return f"; F1 = binary F1 of the positive label `{context.get('positive_label', labels[-1])}`"
    return f"; F1 = macro F1 over the {len(labels)} labels"


def _markdown(results: pd.DataFrame, runs: pd.DataFrame, context: dict, figures: list[Path],
              study: pd.DataFrame | None = None) -> str:
    wall = context.get("wall_seconds")
    lines = [f"# Benchmark report: {context.get('name', 'benchmark')}", "",
             f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
             f"- parent run: `{context.get('parent_run_id', '—')}`",
             f"- wall time: {'—' if wall is None else f'{wall / 60:.1f} min ({wall:.0f} s)'}",
             "", "## Results", "", "Accuracy and F1 in %, mean ± std (min–max) over seeds; "
             f"{_split_sizes(results, runs, context)}{_f1_kind(context)}. Gap vs the random-init twin on test "
             "accuracy in points, with its 95% CI (see How to read).", ""]
    published = published_methods(runs, context)
    rows = [[f"`{row['method']}`", int(row["n_seeds"]), *[_percent(row, metric) for metric in METRICS],
             _gap_cell(row), _number(row.get(PVALUE_COLUMN), ".3g"), _mde(row.get("mde_vs_random", np.nan)),
             f"⚠ {int(row[COLLAPSED_COLUMN])}/{int(row['n_seeds'])}" if row.get(COLLAPSED_COLUMN, 0) > 0 else "no"]
            for _, row in results.iterrows()]
    header = ["method", "seeds", "dev acc", "dev F1", "test acc", "test F1", "gap vs random (95% CI)", "p", "MDE",
              "collapsed"]
    own = [row for row, method in zip(rows, results["method"]) if method not in published]
    lines += _table(header, own) if own else ["(no encoder pretrained here in this benchmark)"]
    if published:
        lines += ["", "## Published and reference encoders (shown apart)", "", PUBLISHED_NOTE, ""]
        lines += _table(header, [row for row, method in zip(rows, results["method"]) if method in published])
    studied = study is not None and len(study) > 0
    if studied:
        lines += [""] + study_tables(study)
    remarks = (study_remarks(study) if studied else []) + _remarks(results, runs, published)
    lines += ["", "## Remarks", ""] + [f"- {remark}" for remark in remarks]
    dataset = str(context.get("dataset") or "MRPC")
    if context.get("anchors", True) and dataset.upper() == "MRPC":
        lines += ["", "## Published anchors (MSR test, for context; not produced by this run)", ""]
        lines += _table(["system", "test acc", "test F1", "source"], [list(anchor) for anchor in ANCHORS])
        lines += ["", "GLUE rows come from other encoders, corpora and training budgets: context, not targets."]
    lines += _context_sections(context)
    lines += time_section(runs)
    lines += ["", "## How to read", ""] + HOW_TO_READ
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
    figures = write_figures(runs, figures_dir, str(context.get("dataset") or "MRPC"))
    study = study_rows(results, runs, context.get("encoders") or [])
    if len(study):
        figures += study_figures(study, figures_dir)
    report = directory / "report.md"
    report.write_text(_markdown(results, runs, context, figures, study), encoding="utf-8")
    return written + figures + [report]
