"""A pretrained arm against every reference: its twin, the twin's linear probe at the arm's own
fraction (``gap_vs_twin_probe``, read as the twin gap is), and TF-IDF; and the report's table of
which references each pre-registered comparison beats."""

import numpy as np
import pandas as pd

from benchmarks.report.references_section import beats, console_summary, references_section, verdict
from benchmarks.report.results_table import build_results
from benchmarks.stats.gaps import compare_with_twin
from benchmarks.stats.preregistration import adjust_registered

ITEMS = 400


def benchmark() -> tuple[pd.DataFrame, dict]:
    """An arm at 100% and at 10% of the labels beside its twin and the twin's probes at both fractions."""
    rng = np.random.default_rng(0)
    labels = (rng.random(ITEMS) < 0.66).astype(int)
    rows, predictions = [], {}

    def add(method, kind, seed, accuracy, fraction=1.0, control="", probe_of=""):
        pred = np.where(rng.random(ITEMS) < accuracy, labels, 1 - labels)
        run_id = f"{method}/{seed}"
        predictions[run_id] = pd.DataFrame(
            {"id1": np.arange(ITEMS), "id2": np.arange(ITEMS), "label": labels, "prob": 0.5, "pred": pred}
        )
        rows.append(
            {
                "run_id": run_id,
                "method": method,
                "seed": seed,
                "encoder": "elmo",
                "kind": kind,
                "control": control,
                "probe_of": probe_of,
                "train_fraction": fraction,
                "dev_acc": 0.7,
                "dev_f1": 0.8,
                "test_acc": float((pred == labels).mean()),
                "test_f1": 0.8,
                "test_pairs": ITEMS,
            }
        )

    for seed in range(4):
        add("elmo-attn", "pretrained", seed, 0.92, control="random-attn")
        add("random-attn", "random", seed, 0.70)
        add("elmo-attn@0.1", "pretrained", seed, 0.72, 0.1, control="random-attn@0.1")
        add("random-attn@0.1", "random", seed, 0.71, 0.1)
        add("random-linear-probe", "probe", seed, 0.72, probe_of="random")
        add("random-linear-probe@0.1", "probe", seed, 0.70, 0.1, probe_of="random")
        add("elmo-linear-probe", "probe", seed, 0.84, probe_of="pretrained")
    return pd.DataFrame(rows), predictions


def by_seed(runs: pd.DataFrame, predictions: dict, method: str) -> dict:
    chosen = runs[runs["method"] == method]
    return {seed: predictions[run] for seed, run in zip(chosen["seed"], chosen["run_id"])}


def test_each_arm_is_compared_with_the_twins_probe_at_its_own_fraction():
    runs, predictions = benchmark()
    table = build_results(runs, predictions).set_index("method")
    for method, probe in (("elmo-attn", "random-linear-probe"), ("elmo-attn@0.1", "random-linear-probe@0.1")):
        expected = compare_with_twin(by_seed(runs, predictions, method), by_seed(runs, predictions, probe))
        assert table.loc[method, "twin_probe"] == probe
        row = table.loc[method, ["gap_vs_twin_probe", "gap_vs_twin_probe_ci_low", "p_vs_twin_probe"]]
        assert row.tolist() == [expected.gap, expected.ci_low, expected.p_value]
    assert pd.isna(table.loc["random-attn", "gap_vs_twin_probe"])  # a twin is a reference, not a claim
    assert pd.isna(table.loc["elmo-linear-probe", "gap_vs_twin_probe"])


def test_the_twins_probe_is_adjusted_over_the_registered_comparisons_and_the_table_says_what_each_beats():
    runs, predictions = benchmark()
    results, _ = adjust_registered(build_results(runs, predictions), ("elmo-attn", "elmo-attn@0.1", "not-run"))
    table = results.set_index("method")
    assert table.loc["elmo-attn", "p_vs_twin_probe_adjusted"] >= 3 * table.loc["elmo-attn", "p_vs_twin_probe"] - 1e-12
    assert beats(table.loc["elmo-attn"]) == {"twin": True, "twin's probe": True, "TF-IDF": False}  # no TF-IDF here
    assert verdict(table.loc["elmo-attn"]) == "twin, twin's probe only"
    assert verdict(table.loc["elmo-attn@0.1"]) == "none"
    lines = references_section(results)
    assert lines[1] == "## Against every reference"
    (row,) = [line for line in lines if line.startswith("| `elmo-attn` |")]
    assert "(`random-linear-probe`)" in row and row.endswith("| twin, twin's probe only |")
    assert [line.split("`")[1] for line in lines if line.startswith("| `")] == ["elmo-attn", "elmo-attn@0.1"]
    only_one, _ = adjust_registered(build_results(runs, predictions), ("elmo-attn",))
    assert [line.split("`")[1] for line in references_section(only_one) if line.startswith("| `")] == ["elmo-attn"]


def test_a_failed_control_never_beats_the_twin_and_all_three_is_said_once_all_hold():
    row = pd.Series(
        {
            "gap_vs_random": 0.04,
            "p_adjusted": 0.001,
            "gap_vs_twin_probe": 0.05,
            "p_vs_twin_probe_adjusted": 0.01,
            "gap_vs_tfidf": 0.02,
            "p_vs_tfidf_registered_adjusted": 0.03,
            "control_ok": True,
        }
    )
    assert verdict(row) == "**all three**"
    assert verdict(row.replace({True: False})) == "✗ control failed; twin's probe, TF-IDF only"
    assert verdict(row.replace({0.02: -0.02})) == "twin, twin's probe only"  # below TF-IDF, however small p


def test_no_table_without_a_registered_family():
    runs, predictions = benchmark()
    assert references_section(build_results(runs, predictions)) == []


def test_the_console_summary_gives_each_registered_gap_its_verdict_and_names_what_has_not_run():
    runs, predictions = benchmark()
    results, family = adjust_registered(build_results(runs, predictions), ("elmo-attn", "elmo-attn@0.1", "not-run"))
    lines = console_summary(results, family)
    assert lines[0].startswith("── pre-registered comparisons: 2 of 3 with a gap; not yet run: not-run ")
    (row,) = [line for line in lines if line.startswith("  elmo-attn ")]
    accuracy = results.set_index("method").loc["elmo-attn", "test_acc_mean"]
    assert row.endswith("twin, twin's probe only") and row.split()[1] == f"{100 * accuracy:.1f}"
    assert console_summary(build_results(runs, predictions), None) == []
