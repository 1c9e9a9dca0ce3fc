"""A benchmark's outputs written: ``results.csv`` (``benchmarks.report.results_table``), ``runs.csv`` (the
per-run table the suite builds, ``benchmarks.cell.run_table``), figures and ``report.md`` — its
tables, the remarks (``benchmarks.report.remarks``), anchors, context and how to read it.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks.plan.lr_selection import lr_grid_section
from benchmarks.plan.pretraining_runs import entry_name
from benchmarks.report.answer import answer_section
from benchmarks.report.control_rule import control_cell
from benchmarks.report.figures import write_figures
from benchmarks.report.mix_weights import mix_section
from benchmarks.report.probe_checks import probe_methods, probe_remarks, probe_section
from benchmarks.report.recipe_section import recipe_section
from benchmarks.report.references_section import references_section
from benchmarks.report.remarks import baseline_title, mde, number, points, remarks
from benchmarks.report.results_table import tfidf_baseline
from benchmarks.report.seen_pairs import seen_pairs_remarks
from benchmarks.report.study_table import study_figures, study_remarks, study_rows, study_tables
from benchmarks.stats.controls import CONTROL_OK_COLUMN, RULE_TEXT, rule_text
from benchmarks.stats.gaps import NO_SEED_REPLICATION, PVALUE_COLUMN
from benchmarks.stats.preregistration import PREREGISTERED_COLUMN, family_text, missing_note
from benchmarks.stats.pretraining_runs import STATISTICS_VERSION
from benchmarks.stats.results_columns import COLLAPSED_COLUMN, STEPS_COLUMN, shown_columns
from harness.datasets.metric_text import main_test_metric, metric_title, metrics_sentence, short_title
from harness.datasets.registry import published_anchors
from harness.datasets.task import CLASSES, Task

PUBLISHED_NOTE = (
    "Encoders pretrained elsewhere (`hf:` folders, `reference:` packages such as all-MiniLM-L6-v2), on "
    "far more text and, for a reference, with supervised sentence-pair training: a ceiling for this "
    "protocol — what the same heads and fine-tuning reach when the encoder has transfer — not a peer "
    "of the encoders pretrained here. Their random-init twins go through the same code."
)


GRADED_READING = {  # a graded task's How to read: each sentence of the classes' reading said for correlations
    "scores d = 1 (only the method right), −1 (only the twin right) or 0.": (
        "scores d = the method's jackknife pseudo-value of its test correlation minus the twin's (n r − (n − 1) "
        "r₍₋ᵢ₎, centred so a run's scores average to its correlation; docs/statistics.md, Graded tasks)."
    ),
    "*seed luck* moves a run's accuracy by itself": "*seed luck* moves a run's correlation by itself",
    "accuracy points": "correlation points (× 100)",
    "- `collapsed`: runs whose test predictions are all one class.": (
        "- `collapsed`: runs whose test predictions are (near) constant, so their correlation is undefined."
    ),
    "against `tfidf-lr`'s one deterministic prediction per item (its correctness is an item property;": (
        "against `tfidf-ridge`'s one deterministic prediction per item (its pseudo-value is an item property;"
    ),
    "- **TF-IDF + LR at the same labels.** Below 100% of the labels a method is compared with "
    "`tfidf-lr@<fraction>`: TF-IDF + LR (and `majority@<fraction>`)": (
        "- **TF-IDF + ridge at the same labels.** Below 100% of the labels a method is compared with "
        "`tfidf-ridge@<fraction>`: TF-IDF + ridge"
    ),
}


def with_tfidf_of(text: str, task: Task) -> str:
    """``text`` (said of TF-IDF + LR, ``tfidf-lr``) said of the task's own TF-IDF baseline."""
    classes, own = tfidf_baseline(CLASSES), tfidf_baseline(task)
    return text.replace(f"`{classes}", f"`{own}").replace(baseline_title(classes), baseline_title(own))


def how_to_read(task: Task = CLASSES) -> list[str]:
    """The report's How to read: the classes' text, its sentences said for correlations where the
    task is graded (its control rule and TF-IDF baseline the task's own)."""
    lines = [line.replace(RULE_TEXT, rule_text(task)) for line in HOW_TO_READ]
    if not task.graded:
        return lines
    for old, new in GRADED_READING.items():
        lines = [line.replace(old, new) for line in lines]
    return [with_tfidf_of(line, task) for line in lines]


def published_methods(runs: pd.DataFrame, context: dict) -> set[str]:
    """Methods (pretrained and twin) whose encoder is a published one (the context's encoders)."""
    names = {encoder["name"] for encoder in context.get("encoders") or [] if encoder.get("published")}
    if not names or "encoder" not in runs:
        return set()
    return set(runs.loc[runs["encoder"].isin(names), "method"])


def _percent(row: pd.Series, metric: str) -> str:
    mean, std, low, high = (100 * row.get(f"{metric}_{stat}", np.nan) for stat in ("mean", "std", "min", "max"))
    return "—" if pd.isna(mean) else f"{mean:.1f} ± {std:.1f} ({low:.1f}–{high:.1f})"


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


SMOKE_NOTE = (
    "smoke test: tiny pretraining, so these numbers test the pipeline, not transfer "
    "(a pretrained arm below its twin, or a random method on top, says nothing about pretraining)"
)


def title_line(name: str, smoke: bool) -> str:
    """The report's first line: the benchmark's name and, for a smoke matrix, that it is one."""
    return f"# Benchmark report: {name}" + (f" — {SMOKE_NOTE}" if smoke else "")


RUN_ROWS = " An encoder pretrained several times (`pretraining_runs`) has a row per run, `<encoder>+run<r>`."
TWIN_GAP = ("gap_vs_random", "gap_ci_low", "gap_ci_high")
TFIDF_GAP = ("gap_vs_tfidf", "gap_vs_tfidf_ci_low", "gap_vs_tfidf_ci_high")


def gap_cell(row: pd.Series, columns: tuple[str, str, str] = TWIN_GAP, alone: str = f"({NO_SEED_REPLICATION})") -> str:
    """``+5.0 (+1.2, +8.8)`` in points; ``+5.0 (no seed replication)`` (``alone``) with one seed pair;
    — without a comparison. ``columns``: the gap and its CI ends (``TWIN_GAP`` or ``TFIDF_GAP``)."""
    gap, low, high = (row.get(column, np.nan) for column in columns)
    if pd.isna(gap):
        return "—"
    if pd.isna(low):
        return f"{points(gap)} {alone}"
    return f"{points(gap)} ({points(low)}, {points(high)})"


def _config(config) -> str:
    if isinstance(config, dict):
        return ", ".join(f"{key}={value}" for key, value in config.items()) or "—"
    return f"`{config}`" if config else "—"


def adjusted_cell(row: pd.Series, registered_family: bool) -> str:
    """The ``p_adjusted`` column: the adjusted p, or "exploratory" for a tested gap outside the
    pre-registered family."""
    if registered_family and not row.get(PREREGISTERED_COLUMN, False) and pd.notna(row.get(PVALUE_COLUMN)):
        return "exploratory"
    return number(row["p_adjusted"], ".3g")


def _context_sections(context: dict) -> list[str]:
    lines = []
    if context.get("encoders"):
        lines += [
            "",
            "## Encoders",
            "",
            "Corpus, tokens and words over all pretraining stages (a later stage "
            "continues the one before it: `general → task`); the perplexity is the last stage's."
            + (
                RUN_ROWS
                if any(entry_name(encoder["name"]) != encoder["name"] for encoder in context["encoders"])
                else ""
            ),
            "",
        ] + _table(
            ["encoder", "pretrain run / source", "corpus", "val ppl", "train tokens", "train words", "config"],
            [
                [
                    encoder.get("name", "—") + (" (reference)" if encoder.get("reference") else ""),
                    f"`{encoder.get('run_id', '—')}`",
                    encoder.get("corpus") or "—",
                    number(encoder.get("val_ppl"), ".1f"),
                    number(encoder.get("train_tokens"), ","),
                    number(encoder.get("train_words"), ","),
                    _config(encoder.get("config")),
                ]
                for encoder in context["encoders"]
            ],
        )
    if context.get("throughput"):
        header = ["row", "softmax", "batch", "real tokens/s", "model GFLOP/s", "matmul peak GFLOP/s", "peak RSS MB"]
        keys = [
            ("real_tokens_per_s", ".0f"),
            ("model_gflops_per_s", ".2f"),
            ("matmul_peak_gflops_per_s", ".1f"),
            ("peak_rss_mb", ".0f"),
        ]
        lines += ["", "## Pretraining throughput", ""] + _table(
            header,
            [
                [row.get("name"), row.get("softmax"), row.get("batch_size")]
                + [number(row.get(key), spec) for key, spec in keys]
                for row in context["throughput"]
            ],
        )
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
    rows = [
        [
            f"`{method}`",
            len(group),
            *[f"{group[name].sum() / 60:.1f}" for name in TIMES],
            f"{group['overhead'].median():.1f}",
        ]
        for method, group in grouped
    ]
    rows.append(
        [
            "all cells",
            len(timed),
            *[f"{timed[name].sum() / 60:.1f}" for name in TIMES],
            f"{timed['overhead'].median():.1f}",
        ]
    )
    return [
        "",
        "## Where the cells' time went",
        "",
        "Sums over each method's cells in minutes (cells run side by side, so they add up to more than the "
        "wall time); overhead = total − fit, a cell's median in seconds.",
        "",
    ] + _table(["method", "cells", "total min", "fit min", "eval min", "median overhead s"], rows)


HOW_TO_READ = [
    "- **What is paired.** A method's run at seed s is paired with its random-init twin's run at the same seed "
    "value s (same architecture, mix and training data; seeds only one of them has are left out). Where each arm "
    "chose its recipe on dev, the learning rate and head may differ too: the study section names them per "
    "comparison. Their test predictions are matched item by item on the id columns, and each item "
    "scores d = 1 (only the method right), −1 (only the twin right) or 0.",
    "- **What varies.** Two things are random samples, and the gap must hold beyond both: the training seeds "
    "(initialisation and data order: *seed luck* moves a run's accuracy by itself) and the test items (drawn from "
    "all the pairs the data set could have held). Treating the items as fixed, or the seeds as fixed, is the "
    "“language-as-fixed-effect fallacy” (Clark 1973).",
    "- **What does not.** Where an encoder is pretrained once, the gap is that one pretrained encoder's against twins "
    "drawn afresh at every seed. Pretraining again with the same settings (another seed, other hardware) gives "
    "other weights, a sample of the family that this CI does not cover. Where a method's cells come from several "
    "pretraining runs (`n_pretrainings` in results.csv, each run with seeds of its own), its gap is read over them "
    "(“this recipe”: runs, seeds within runs and items random; the degrees of freedom come from the runs), "
    "and “these checkpoints” (runs fixed, comparable with a study that pretrained once) is given beside it.",
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
    "- **Many comparisons.** `p_adjusted` (results.csv) is Holm's adjustment of `p` over the report's twin "
    "comparisons: below 0.05, the claim holds with a family-wise error rate of 5%. Where the matrix lists "
    "`comparisons:` (pre-registered before the cells ran; a chunked study registers the union of its chunks' "
    "lists), Holm goes over exactly those, a registered comparison not yet run counting as p = 1, and every other "
    "gap is exploratory (`preregistered` false in results.csv): its CI and raw p, no claim. About 1 in 20 CIs "
    "excludes 0 by chance alone; the remarks count them.",
    "- **Against TF-IDF + LR.** `gap_vs_tfidf` (results.csv, with its CI and `p_vs_tfidf`) is the same crossed test "
    "of each method's seeds × items against `tfidf-lr`'s one deterministic prediction per item (its correctness is "
    "an item property; the seed part is the method's luck alone); below 100% of the labels, against TF-IDF + LR at "
    "the same labels (next point). Baselines get no gap to a twin.",
    "- **MDE.** The smallest true gap this design (its seed pairs and test items, with the variance components it "
    "measured) detects 4 times out of 5 at α = 0.05 (two-sided).",
    "- **Why not the median of per-seed p-values** (this column's former meaning): a median of p-values is not a "
    "p-value and has no error rate; each per-seed McNemar test sees only item noise, so seed luck makes seed pairs "
    "look different even when method and twin are the same process. In simulation (5 seeds, 1,000 items, "
    "accuracy std over seeds ≈ 2.7 points) it rejected a true null about 47% of the time at 0.05, an items-only "
    "test on seed-averaged items 51%, this test 5%; without seed luck the median was far too cautious (< 1%).",
    "- `collapsed`: runs whose test predictions are all one class.",
    f"- **A control that fails does not count** (`control`; `control_ok` and `control_reason` in results.csv): "
    f"pre-registered, {RULE_TEXT}. A gap over a twin that learned nothing measures the recipe's failure on the twin, "
    "not pretraining: such a comparison is shown and named, never counted among the gaps that hold, and the "
    "study's headline counts only comparisons whose arms both learned. Holm's adjustment still goes over every "
    "registered comparison.",
    "- **TF-IDF + LR at the same labels.** Below 100% of the labels a method is compared with `tfidf-lr@<fraction>`: "
    "TF-IDF + LR (and `majority@<fraction>`) fitted on exactly the labelled subset each seed's cells train on, "
    "paired by seed like a twin (`tfidf_reference` in results.csv names the row used).",
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
    parts = [
        f"{split} = {dataset + ' ' if dataset else ''}{split} split"
        + (f" ({sizes[split]} pairs)" if split in sizes else "")
        for split in ("dev", "test")
    ]
    return ", ".join(parts)


def task_of_context(context: dict) -> Task:
    """The task a report is about: the context's (a suite's data set, the folders'), else a task of
    classes (a report of older folders)."""
    return context.get("task") or CLASSES


def _f1_kind(context: dict) -> str:
    """How F1 is computed, from the context's ``labels`` and ``positive_label`` (nothing when absent)."""
    labels = context.get("labels")
    if not labels:
        return ""
    if len(labels) == 2:
        return f"; F1 = binary F1 of the positive label `{context.get('positive_label', labels[-1])}`"
    return f"; F1 = macro F1 over the {len(labels)} labels"


def _markdown(
    results: pd.DataFrame, runs: pd.DataFrame, context: dict, figures: list[Path], study: pd.DataFrame | None = None
) -> str:
    wall = context.get("wall_seconds")
    adjusted = "p_adjusted" in results  # older tables lack it and the TF-IDF gap
    family = context.get("family")  # the pre-registered comparisons (``comparisons:``), or None
    against_tfidf = "gap_vs_tfidf" in results and results["gap_vs_tfidf"].notna().any()  # not without tfidf-lr
    stepped = STEPS_COLUMN in results and results[STEPS_COLUMN].notna().any()  # cells that logged train_steps
    plain = shown_columns(results)  # declared plain columns with a value (steps, the grid's chosen rate)
    checked = CONTROL_OK_COLUMN in results and results[CONTROL_OK_COLUMN].notna().any()  # twin comparisons
    task = task_of_context(context)
    lines = [
        title_line(context.get("name", "benchmark"), bool(context.get("smoke"))),
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- parent run: `{context.get('parent_run_id', '—')}`",
        *([f"- wall time: {wall / 60:.1f} min ({wall:.0f} s)"] if wall is not None else []),  # folders keep none
        *(
            [f"- built from results folders: {', '.join(f'`{source}`' for source in context['sources'])}"]
            if context.get("sources")
            else []
        ),
        f"- statistics: {STATISTICS_VERSION} (`benchmarks.stats.pretraining_runs`; docs/statistics.md)",
        *(f"- seal of {line}" for line in context.get("seals") or ()),  # who sealed each folder, at what
        *answer_section(results),
        "",
        "## Results",
        "",
        f"{metrics_sentence(task)}, mean ± std (min–max) over seeds; "
        f"{_split_sizes(results, runs, context)}{_f1_kind(context)}. Gap vs the random-init twin on "
        f"{metric_title(main_test_metric(task))} in points, with its 95% CI (see How to read)"
        + (
            (
                f"; `p_adjusted`: {family_text(family)} (every other gap is exploratory: its CI and raw `p`, "
                "no adjustment)"
                if family
                else "; `p_adjusted`: Holm's adjustment of `p` over the report's twin comparisons"
            )
            if adjusted
            else ""
        )
        + (
            "; control: whether both arms learned (a failed one is shown, never counted; see How to read)"
            if checked
            else ""
        )
        + (
            with_tfidf_of(
                "; gap vs TF-IDF: each method against TF-IDF + LR at its own labelled fraction (`tfidf-lr@<fraction>`, "
                "fitted on each seed's labelled subset, where it ran; else `tfidf-lr` on the whole train split), in "
                "points, with its 95% CI",
                task,
            )
            if against_tfidf
            else ""
        )
        + (
            "; steps: the optimiser steps of a run's fit, mean over seeds (with `--data.equal_steps` a "
            "fraction trains about the full training set's number)"
            if stepped
            else ""
        )
        + ".",
        "",
    ]
    published = published_methods(runs, context)
    rows = [
        [
            f"`{row['method']}`",
            int(row["n_seeds"]),
            *[_percent(row, metric) for metric in task.run_metrics()],
            gap_cell(row),
            *([control_cell(row.get(CONTROL_OK_COLUMN))] if checked else []),
            number(row.get(PVALUE_COLUMN), ".3g"),
            *([adjusted_cell(row, family is not None)] if adjusted else []),
            mde(row.get("mde_vs_random", np.nan)),
            *([gap_cell(row, TFIDF_GAP)] if against_tfidf else []),
            *[number(row.get(column.name), column.shown_format) for column in plain],
            f"⚠ {int(row[COLLAPSED_COLUMN])}/{int(row['n_seeds'])}" if row.get(COLLAPSED_COLUMN, 0) > 0 else "no",
        ]
        for _, row in results.iterrows()
    ]
    header = [
        "method",
        "seeds",
        *map(short_title, task.run_metrics()),
        "gap vs random (95% CI)",
        *(["control"] if checked else []),
        "p",
        *(["p_adjusted"] if adjusted else []),
        "MDE",
        *(["gap vs TF-IDF (95% CI)"] if against_tfidf else []),
        *[column.shown for column in plain],
        "collapsed",
    ]
    probes = set(probe_methods(runs))  # shown apart, as checks
    own = [row for row, method in zip(rows, results["method"]) if method not in published | probes]
    lines += _table(header, own) if own else ["(no encoder pretrained here in this benchmark)"]
    if published - probes:
        lines += ["", "## Published and reference encoders (shown apart)", "", PUBLISHED_NOTE, ""]
        lines += _table(header, [row for row, method in zip(rows, results["method"]) if method in published - probes])
    lines += probe_section(results, runs, task)
    lines += lr_grid_section(context.get("lr_grid", pd.DataFrame()), task)
    lines += recipe_section(context.get("recipes", pd.DataFrame()), results, task)
    studied = study is not None and len(study) > 0
    if studied:
        lines += [""] + study_tables(study, family, task)
    lines += references_section(results, task)
    comparisons = int(results["p_adjusted"].notna().sum()) if "p_adjusted" in results else None
    said = missing_note(family)
    said += (study_remarks(study, comparisons, family) if studied else []) + remarks(
        results, runs, published, family, task
    )
    said += probe_remarks(results, runs)
    said += seen_pairs_remarks(runs, task)
    said += list(context.get("notes") or [])  # e.g. one encoder name over several checkpoints (chunks)
    lines += ["", "## Remarks", ""] + [f"- {remark}" for remark in said]
    anchors = context["anchors"] if "anchors" in context else published_anchors(context.get("dataset"))
    if anchors:
        lines += ["", f"## Published anchors ({anchors.split}, for context; not produced by this run)", ""]
        lines += _table(
            ["system", *anchors.column_titles(), "source"],
            [
                [system, *(number(figure, ".1f") for figure in figures), source]
                for system, *figures, source in anchors.rows
            ],
        )
        lines += ["", anchors.note] if anchors.note else []
    lines += mix_section(runs)
    lines += _context_sections(context)
    lines += time_section(runs)
    lines += ["", "## How to read", ""] + how_to_read(task)
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
    figures = write_figures(runs, figures_dir, str(context.get("dataset") or "MRPC"), task_of_context(context))
    study = study_rows(results, runs, context.get("encoders") or [], task_of_context(context))
    if len(study):
        figures += study_figures(study, figures_dir)
    report = directory / "report.md"
    report.write_text(_markdown(results, runs, context, figures, study), encoding="utf-8")
    return written + figures + [report]
