"""The transfer study's remarks: which gap "pays most" holds after Holm's adjustment over the
report's comparisons, and the CI rule for tables without ``p_adjusted``."""

import numpy as np
import pandas as pd

from benchmarks.report.study_table import study_remarks, study_rows, study_tables

COLUMNS = [
    "family",
    "encoder",
    "corpus",
    "words",
    "transfer",
    "head",
    "fraction",
    "method",
    "seeds",
    "test_acc",
    "test_f1",
    "gap",
    "low",
    "high",
    "mde",
    "p",
    "p_adjusted",
]


def rows(*cells) -> pd.DataFrame:
    """Study rows of family ``gpt`` from ``(method, gap, low, high, p, p_adjusted)`` (points)."""
    return pd.DataFrame(
        [
            [
                "gpt",
                "gpt-enc",
                "mrpc",
                1e5,
                "frozen",
                head,
                1.0,
                method,
                3,
                70.0,
                80.0,
                gap,
                low,
                high,
                6.0,
                p,
                p_adjusted,
            ]
            for head, (method, gap, low, high, p, p_adjusted) in zip(("attn", "cls", "pool-mlp", "dense"), cells)
        ],
        columns=COLUMNS,
    )


def test_pays_most_is_not_claimed_when_holm_lifts_p_above_005():
    study = rows(("gpt-attn", 6.0, 1.0, 11.0, 0.01, 0.08), ("gpt-cls", 1.0, -2.0, 4.0, 0.4, 1.0))
    (remark,) = study_remarks(study, comparisons=8)
    assert "pays most" not in remark
    assert remark.startswith(
        "gpt: no gap over the twin holds (p_adjusted < 0.05, Holm over the report's 8 twin "
        "comparisons; 2 tested; 1 had a CI above 0 before Holm's adjustment"
    )


def test_pays_most_is_the_largest_gap_that_holds_and_says_among_how_many():
    study = rows(
        ("gpt-attn", 6.0, 1.0, 11.0, 0.01, 0.08),
        ("gpt-cls", 4.0, 2.0, 6.0, 0.001, 0.004),
        ("gpt-pool-mlp", 1.0, -2.0, 4.0, 0.4, 1.0),
    )
    (remark,) = study_remarks(study)
    assert remark.startswith("gpt: pretraining pays most with `gpt-cls`: +4.0 (+2.0, +6.0)")
    assert "p=0.001 p_adj=0.004" in remark  # the larger raw gap of gpt-attn does not hold after Holm
    assert (
        "the only gap that holds (p_adjusted < 0.05, Holm over the report's 3 twin comparisons) "
        "among the family's 3 tested comparisons"
    ) in remark
    study.loc[0, "p_adjusted"] = 0.03  # now both hold: the larger is chosen, among 2
    (remark,) = study_remarks(study)
    assert "pays most with `gpt-attn`" in remark and "the largest of the 2 gaps that hold" in remark


def test_the_twin_ahead_needs_holm_too():
    study = rows(("gpt-attn", -6.0, -11.0, -1.0, 0.01, 0.03), ("gpt-cls", -5.0, -9.0, -1.0, 0.02, 0.06))
    remarks = study_remarks(study)
    (ahead,) = [remark for remark in remarks if "the random twin is ahead" in remark]
    assert "`gpt-attn`" in ahead and "`gpt-cls`" not in ahead


def test_without_p_adjusted_the_ci_decides_and_says_it_is_not_adjusted():
    study = rows(("gpt-attn", 6.0, 1.0, 11.0, 0.01, np.nan), ("gpt-cls", 4.0, 2.0, 6.0, 0.001, np.nan))
    (remark,) = study_remarks(study.drop(columns="p_adjusted"))
    assert "pays most with `gpt-attn`" in remark and "CI above 0, not adjusted for the number of comparisons" in remark
    assert "p_adj" not in remark


def test_study_rows_carry_p_adjusted_into_the_table():
    runs = pd.DataFrame(
        {
            "method": ["gpt-attn", "random-attn"],
            "family": ["gpt", "gpt"],
            "encoder": ["g", "rg"],
            "transfer": ["frozen", "frozen"],
            "head": ["attn", "attn"],
            "kind": ["pretrained", "random"],
            "train_fraction": [1.0, 1.0],
        }
    )
    results = pd.DataFrame(
        {
            "method": ["gpt-attn", "random-attn"],
            "n_seeds": [3, 3],
            "test_acc_mean": [0.75, 0.7],
            "test_f1_mean": [0.8, 0.78],
            "gap_vs_random": [0.05, np.nan],
            "gap_ci_low": [0.01, np.nan],
            "gap_ci_high": [0.09, np.nan],
            "mde_vs_random": [0.06, np.nan],
            "p_value_vs_random": [0.013, np.nan],
            "p_adjusted": [0.039, np.nan],
        }
    )
    study = study_rows(results, runs, [{"name": "g", "corpus": "mrpc"}])
    assert study.loc[0, "p_adjusted"] == 0.039
    assert any("+5.0 (+1.0, +9.0) p=0.013 p_adj=0.039" in line for line in study_tables(study))
    older = study_rows(results.drop(columns="p_adjusted"), runs, [{"name": "g", "corpus": "mrpc"}])
    runs_of_g = [{"name": f"g+run{run}", "corpus": "mrpc", "train_words": 9} for run in (0, 1)]
    assert study_rows(results, runs, runs_of_g).loc[0, ["corpus", "words"]].tolist() == ["mrpc", 9]
    assert "p_adjusted" not in older and any("+5.0 (+1.0, +9.0) p=0.013 |" in line for line in study_tables(older))
