"""A statistic added from this module alone, as a contributor adds one: its function and one
declared column (``benchmarks.stats.results_columns``). It reaches ``results.csv``, the report's
results table and the parent run's summary metrics with nothing else touched; and every column
``results.csv`` writes is declared once, with a type and a meaning."""

import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.plan.lr_selection import CHOSEN_COLUMN
from benchmarks.report.outputs import write_outputs
from benchmarks.report.parent_view import summary_metrics
from benchmarks.report.results_table import build_results
from benchmarks.stats import results_columns
from benchmarks.stats.controls import CONTROL_COLUMNS
from benchmarks.stats.preregistration import PREREGISTERED_COLUMN
from benchmarks.stats.pretraining_runs import CHECKPOINTS_COLUMNS, N_PRETRAININGS_COLUMN
from benchmarks.stats.results_columns import (
    COLLAPSED_COLUMN,
    COLUMNS,
    STEPS_COLUMN,
    TFIDF_REFERENCE_COLUMN,
    Column,
    Evidence,
    register,
)

ITEMS = 200
LABELS = np.random.default_rng(0).integers(0, 2, ITEMS)


# ── the statistic: its function and its declaration ─────────────────────────────────────────────


def gap_half_width(evidence: Evidence) -> float:
    """Half the width of the twin gap's 95% CI (NaN without a CI)."""
    gap = evidence.gap
    return np.nan if gap is None else (gap.ci_high - gap.ci_low) / 2


HALF_WIDTH = Column(
    "gap_half_width",
    float,
    "half the width of the gap's 95% CI (fraction)",
    gap_half_width,
    shown="half-width",
    shown_format=".3f",
    summary=True,
)


@pytest.fixture
def declared():
    register(HALF_WIDTH)
    yield
    COLUMNS.remove(HALF_WIDTH)  # the declaration as it was, for the other tests


# ── a tiny benchmark: a method, its twin and TF-IDF + LR ───────────────────────────────────────


def predictions(accuracy: float, seed: int) -> pd.DataFrame:
    right = np.random.default_rng(seed).random(ITEMS) < accuracy
    predicted = np.where(right, LABELS, 1 - LABELS)
    return pd.DataFrame(
        {
            "id1": np.arange(ITEMS),
            "id2": np.arange(ITEMS) + 1000,
            "label": LABELS,
            "prob": predicted * 0.8 + 0.1,
            "pred": predicted,
        }
    )


def tiny_benchmark() -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    rows, preds = [], {}
    for method, kind, control, accuracy, seeds in (
        ("elmo-top-attn", "pretrained", "random-top-attn", 0.85, 3),
        ("random-top-attn", "random", "", 0.7, 3),
        ("tfidf-lr", "baseline", "", 0.72, 1),
    ):
        for seed in range(seeds):
            run_id = f"{method}/{seed}"
            preds[run_id] = predictions(accuracy, hash((method, seed)) % 1000)
            test_acc = float((preds[run_id]["pred"] == LABELS).mean())
            rows.append(
                {
                    "run_id": run_id,
                    "method": method,
                    "seed": seed,
                    "kind": kind,
                    "control": control,
                    "train_fraction": 1.0,
                    "dev_acc": test_acc,
                    "dev_f1": 0.5,
                    "test_acc": test_acc,
                    "test_f1": 0.5,
                }
            )
    return pd.DataFrame(rows), preds


def test_a_new_statistic_reaches_the_csv_the_report_table_and_the_parent_run(declared, tmp_path):
    runs, preds = tiny_benchmark()
    results = build_results(runs, preds)
    table = results.set_index("method")
    method = table.loc["elmo-top-attn"]
    assert method["gap_half_width"] == pytest.approx((method["gap_ci_high"] - method["gap_ci_low"]) / 2)
    assert math.isnan(table.loc["random-top-attn", "gap_half_width"])
    write_outputs(tmp_path, results, runs, {})
    written = pd.read_csv(tmp_path / "results.csv").set_index("method")
    assert written.loc["elmo-top-attn", "gap_half_width"] == pytest.approx(method["gap_half_width"])
    lines = (tmp_path / "report.md").read_text().splitlines()
    header = [cell.strip() for cell in next(line for line in lines if line.startswith("| method |")).split("|")]
    row = [cell.strip() for cell in next(line for line in lines if line.startswith("| `elmo-top-attn` |")).split("|")]
    assert dict(zip(header, row))["half-width"] == f"{method['gap_half_width']:.3f}"
    assert summary_metrics(results)["elmo-top-attn/gap_half_width"] == pytest.approx(method["gap_half_width"])


def test_without_it_the_table_has_no_such_column():
    runs, preds = tiny_benchmark()
    assert "gap_half_width" not in build_results(runs, preds)


def test_a_column_is_declared_once():
    with pytest.raises(ValueError, match="declared already"):
        register(Column("gap_vs_random", float, "again"))


def test_every_column_the_code_names_is_declared_with_a_type_and_a_meaning():
    named = [
        COLLAPSED_COLUMN,
        STEPS_COLUMN,
        TFIDF_REFERENCE_COLUMN,
        CHOSEN_COLUMN,
        *CONTROL_COLUMNS,
        *CHECKPOINTS_COLUMNS,
        N_PRETRAININGS_COLUMN,
        PREREGISTERED_COLUMN,
    ]
    assert set(named) <= set(results_columns.names())
    assert len(set(results_columns.names())) == len(COLUMNS)
    for column in COLUMNS:
        assert column.type in (int, float, str, bool) and column.meaning, column.name


def test_the_committed_study_writes_its_columns_in_declared_order():
    written = list(pd.read_csv("docs/study-report/results.csv", nrows=0).columns)
    declared = results_columns.names()
    assert written == [name for name in declared if name in written]
