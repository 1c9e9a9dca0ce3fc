import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.report.outputs import write_outputs
from benchmarks.report.results_table import build_results
from benchmarks.stats.controls import CONTROL_COLUMNS, CONTROL_OK_COLUMN, CONTROL_REASON_COLUMN
from benchmarks.stats.gaps import METRICS, NO_SEED_REPLICATION, PVALUE_COLUMN
from benchmarks.stats.multiplicity import holm
from benchmarks.stats.paired_seeds import SEEDS_T_COLUMNS
from benchmarks.stats.results_columns import TFIDF_REFERENCE_COLUMN

N_ITEMS = 300
LABELS = (np.random.default_rng(0).random(N_ITEMS) < 0.665).astype(int)
COLUMNS = [
    "method",
    "seed",
    "encoder",
    "kind",
    "mix",
    "head",
    "train_fraction",
    "control",
    "dev_acc",
    "dev_f1",
    "test_acc",
    "test_f1",
    "mix_weight_0",
    "mix_weight_1",
    "mix_weight_2",
    "mix_gamma",
]


def predictions(accuracy: float, seed: int, collapsed: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pred = np.ones(N_ITEMS, dtype=int) if collapsed else np.where(rng.random(N_ITEMS) < accuracy, LABELS, 1 - LABELS)
    return pd.DataFrame(
        {
            "id1": np.arange(N_ITEMS),
            "id2": np.arange(N_ITEMS) + 10000,
            "label": LABELS,
            "prob": pred * 0.8 + 0.1,
            "pred": pred,
        }
    )


def f1(frame: pd.DataFrame) -> float:
    true_positive = int(((frame["pred"] == 1) & (frame["label"] == 1)).sum())
    return 2 * true_positive / max(1, int(frame["pred"].sum()) + int(frame["label"].sum()))


# method, encoder, kind, mix, fraction, control, test accuracy, seeds
CELLS = [
    ("elmo-scalar-pool-mlp", "elmo", "pretrained", "scalar", 1.0, "random-scalar-pool-mlp", 0.88, 3),
    ("random-scalar-pool-mlp", "elmo", "random", "scalar", 1.0, "", 0.66, 3),
    ("elmo-layer:0-pool-mlp", "elmo", "pretrained", "layer:0", 1.0, "random-layer:0-pool-mlp", 0.60, 3),
    ("random-layer:0-pool-mlp", "elmo", "random", "layer:0", 1.0, "", 0.75, 3),
    ("elmo-layer:1-pool-mlp", "elmo", "pretrained", "layer:1", 1.0, "random-layer:1-pool-mlp", 0.80, 2),
    ("random-layer:1-pool-mlp", "elmo", "random", "layer:1", 1.0, "", 0.70, 2),
    ("elmo-top-pool-mlp", "elmo", "pretrained", "top", 1.0, "random-top-pool-mlp", 0.80, 2),
    ("random-top-pool-mlp", "elmo", "random", "top", 1.0, "", 0.70, 2),
    ("elmo-average-pool-mlp", "elmo", "pretrained", "average", 1.0, "random-average-pool-mlp", 0.70, 3),
    ("random-average-pool-mlp", "elmo", "random", "average", 1.0, "", 0.70, 3),
    ("elmo-scalar-pool-mlp@0.1", "elmo", "pretrained", "scalar", 0.1, "random-scalar-pool-mlp@0.1", 0.75, 3),
    ("random-scalar-pool-mlp@0.1", "elmo", "random", "scalar", 0.1, "", 0.66, 3),
    ("majority", "", "baseline", "", 1.0, "", None, 1),
    ("tfidf-lr", "", "baseline", "", 1.0, "", 0.72, 1),
]


def make_benchmark(cells=CELLS):
    rows, preds = [], {}
    for cell_index, (method, encoder, kind, mix, fraction, control, accuracy, seeds) in enumerate(cells):
        for seed in range(seeds):
            run_id = f"{method}/{seed}"
            collapsed = accuracy is None or (method == "elmo-layer:1-pool-mlp" and seed == 1)
            preds[run_id] = predictions(accuracy or 0.0, 100 * cell_index + seed, collapsed=collapsed)
            weights = [0.2 + 0.1 * seed, 0.3, 0.5 - 0.1 * seed, 1.1] if mix == "scalar" else [math.nan] * 4
            test_acc = float((preds[run_id]["pred"] == LABELS).mean())
            rows.append(
                [
                    method,
                    seed,
                    encoder,
                    kind,
                    mix,
                    "pool-mlp" if kind != "baseline" else "",
                    fraction,
                    control,
                    test_acc + 0.01 * seed,
                    0.8,
                    test_acc,
                    f1(preds[run_id]),
                    *weights,
                ]
            )
    runs = pd.DataFrame(rows, columns=COLUMNS)
    runs.insert(0, "run_id", [f"{method}/{seed}" for method, seed in zip(runs["method"], runs["seed"])])
    return runs, preds


@pytest.fixture(scope="module")
def benchmark():
    runs, preds = make_benchmark()
    return runs, preds, build_results(runs, preds)


def accuracy(frame: pd.DataFrame) -> float:
    return float((frame["pred"] == frame["label"]).mean())


GAP_COLUMNS = [
    "gap_vs_random",
    "gap_ci_low",
    "gap_ci_high",
    "mde_vs_random",
    "paired_seeds",
    "paired_items",
    "gap_test",
]
NEW_COLUMNS = [
    "p_adjusted",
    "gap_vs_tfidf",
    "gap_vs_tfidf_ci_low",
    "gap_vs_tfidf_ci_high",
    "p_vs_tfidf",
    "p_vs_tfidf_adjusted",
]


def test_build_results_columns_and_method_order(benchmark):
    runs, _, results = benchmark
    statistics = ("mean", "std", "min", "max")
    expected = ["method", "n_seeds"] + [f"{metric}_{stat}" for metric in METRICS for stat in statistics]
    assert list(results.columns) == expected + [
        PVALUE_COLUMN,
        "collapsed_runs",
        *GAP_COLUMNS,
        *NEW_COLUMNS,
        *CONTROL_COLUMNS,
        TFIDF_REFERENCE_COLUMN,
        "n_pretrainings",
        *SEEDS_T_COLUMNS,
    ]
    assert list(results["method"]) == list(dict.fromkeys(runs["method"]))


def test_build_results_aggregates_over_seeds(benchmark):
    runs, _, results = benchmark
    row = results.set_index("method").loc["elmo-scalar-pool-mlp"]
    values = runs.loc[runs["method"] == "elmo-scalar-pool-mlp", "test_acc"]
    assert row["n_seeds"] == 3
    assert row["test_acc_mean"] == pytest.approx(values.mean())
    assert row["test_acc_std"] == pytest.approx(values.std(ddof=1))
    assert row["dev_acc_max"] == pytest.approx(runs.loc[runs["method"] == "elmo-scalar-pool-mlp", "dev_acc"].max())


def test_gap_is_the_paired_accuracy_difference_with_a_ci(benchmark):
    _, preds, results = benchmark
    table = results.set_index("method")
    better = table.loc["elmo-scalar-pool-mlp"]  # 88% against 66%, 3 seeds
    expected = np.mean(
        [
            accuracy(preds[f"elmo-scalar-pool-mlp/{seed}"]) - accuracy(preds[f"random-scalar-pool-mlp/{seed}"])
            for seed in range(3)
        ]
    )
    assert better["gap_vs_random"] == pytest.approx(expected, abs=1e-12)
    assert 0 < better["gap_ci_low"] < better["gap_vs_random"] < better["gap_ci_high"]
    assert better[PVALUE_COLUMN] < 0.05 and (better["paired_seeds"], better["paired_items"]) == (3, N_ITEMS)
    accuracies = [[accuracy(preds[f"{arm}-scalar-pool-mlp/{seed}"]) for seed in range(3)] for arm in ("elmo", "random")]
    seeds_t = stats.ttest_rel(*accuracies)  # the sensitivity reading: a paired t over the seed pairs
    assert better["seeds_t_p"] == pytest.approx(seeds_t.pvalue)
    assert [better["seeds_t_ci_low"], better["seeds_t_ci_high"]] == pytest.approx(list(seeds_t.confidence_interval()))
    worse = table.loc["elmo-layer:0-pool-mlp"]  # 60% against 75% over 3 seeds: the twin is better
    assert worse["gap_ci_high"] < 0 and worse[PVALUE_COLUMN] < 0.05
    for method in ("random-scalar-pool-mlp", "majority", "tfidf-lr"):
        assert math.isnan(table.loc[method, PVALUE_COLUMN]) and math.isnan(table.loc[method, "gap_vs_random"])


def test_holm_over_the_twin_comparisons_and_every_method_against_tfidf(benchmark):
    _, preds, results = benchmark
    table = results.set_index("method")
    tested = table[PVALUE_COLUMN].notna()
    assert tested.sum() == 6  # the pretrained methods; no twin or baseline has a twin comparison
    assert table.loc[tested, "p_adjusted"].to_numpy() == pytest.approx(holm(table.loc[tested, PVALUE_COLUMN]))
    learned = [method for method in table.index if method not in ("majority", "tfidf-lr")]
    for method in learned:  # twins included: each learned method against the deterministic baseline
        seeds = int(table.loc[method, "n_seeds"])
        expected = np.mean([accuracy(preds[f"{method}/{seed}"]) for seed in range(seeds)]) - accuracy(
            preds["tfidf-lr/0"]
        )
        assert table.loc[method, "gap_vs_tfidf"] == pytest.approx(expected, abs=1e-12), method
        assert table.loc[method, "gap_vs_tfidf_ci_low"] < table.loc[method, "gap_vs_tfidf_ci_high"]
        assert 0 <= table.loc[method, "p_vs_tfidf"] <= 1
    assert table.loc["elmo-scalar-pool-mlp", "gap_vs_tfidf_ci_low"] > 0  # 88% against 72%
    for baseline in ("majority", "tfidf-lr"):
        assert table.loc[baseline, NEW_COLUMNS].isna().all()


def test_gap_pairs_seeds_by_value_with_a_missing_seed():
    """The twin lacks seed 0: method seeds 1 and 2 pair with twin seeds 1 and 2. By position, method
    seed 0 would meet twin seed 1 and the perfect method seed 2 would be left out."""
    runs, preds = make_benchmark()
    preds["elmo-scalar-pool-mlp/2"] = preds["elmo-scalar-pool-mlp/2"].assign(pred=LABELS)  # 100% right
    runs = runs[runs["run_id"] != "random-scalar-pool-mlp/0"].iloc[::-1].reset_index(drop=True)
    row = build_results(runs, preds).set_index("method").loc["elmo-scalar-pool-mlp"]
    method = {seed: accuracy(preds[f"elmo-scalar-pool-mlp/{seed}"]) for seed in range(3)}
    twin = {seed: accuracy(preds[f"random-scalar-pool-mlp/{seed}"]) for seed in (1, 2)}
    by_value = np.mean([method[1] - twin[1], method[2] - twin[2]])
    by_position = np.mean([method[0] - twin[1], method[1] - twin[2]])
    assert row["paired_seeds"] == 2
    assert row["gap_vs_random"] == pytest.approx(by_value, abs=1e-12)
    assert abs(by_value - by_position) > 0.03


def test_no_gap_when_the_twin_is_missing():
    runs, preds = make_benchmark()
    without = runs[runs["method"] != "random-top-pool-mlp"]
    row = build_results(without, preds).set_index("method").loc["elmo-top-pool-mlp"]
    assert math.isnan(row[PVALUE_COLUMN]) and math.isnan(row["gap_vs_random"]) and row["paired_seeds"] == 0


def test_collapsed_runs_counted(benchmark):
    _, _, results = benchmark
    collapsed = results.set_index("method")["collapsed_runs"]
    assert collapsed["majority"] == 1
    assert collapsed["elmo-layer:1-pool-mlp"] == 1
    assert collapsed["elmo-scalar-pool-mlp"] == 0


CONTEXT = {
    "name": "unit",
    "parent_run_id": "parent123",
    "wall_seconds": 125.0,
    "settings": {"seeds": 3},
    "encoders": [
        {"name": "elmo", "run_id": "pre1", "val_ppl": 123.4, "train_tokens": 160000, "config": {"hidden_size": 64}}
    ],
    "throughput": [
        {
            "name": "seed-full",
            "softmax": "full",
            "batch_size": 16,
            "real_tokens_per_s": 5000.0,
            "model_gflops_per_s": 3.2,
            "matmul_peak_gflops_per_s": 100.0,
            "peak_rss_mb": 900.0,
        }
    ],
}


def test_write_outputs_tables_report_and_figures(benchmark, tmp_path):
    runs, _, results = benchmark
    written = write_outputs(tmp_path, results, runs, CONTEXT)
    assert all(path.exists() for path in written)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "results.csv"), results, check_dtype=False)
    assert len(pd.read_csv(tmp_path / "runs.csv")) == len(runs)
    for name in ("learning_curve", "mix_weights", "accuracy_by_layer"):
        path = tmp_path / "figures" / f"{name}.png"
        assert path in written and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 1000
    report = (tmp_path / "report.md").read_text()
    row = results.set_index("method").loc["elmo-scalar-pool-mlp"]
    cell = f"{100 * row['test_acc_mean']:.1f} ± {100 * row['test_acc_std']:.1f}"
    gap = f"{100 * row['gap_vs_random']:+.1f} ({100 * row['gap_ci_low']:+.1f}, {100 * row['gap_ci_high']:+.1f})"
    assert any(
        line.startswith("| `elmo-scalar-pool-mlp` | 3 |") and cell in line and gap in line
        for line in report.splitlines()
    )
    assert "parent123" in report and "pre1" in report and "seed-full" in report
    assert "vs `tfidf-lr`" in report and "`majority` (1/1)" in report
    assert "Learning curve `elmo-scalar-pool-mlp`" in report
    curve = next(line for line in report.splitlines() if "Learning curve `elmo-scalar-pool-mlp`" in line)
    gaps = [
        f"{100 * results.set_index('method').loc[method, 'gap_vs_random']:+.1f}"
        for method in ("elmo-scalar-pool-mlp@0.1", "elmo-scalar-pool-mlp")
    ]  # the signed gaps, in order
    assert f"moves from {gaps[0]} to {gaps[1]} points" in curve or gaps[0] == gaps[1], curve
    assert "66.5" in report and "Wang et al. 2019" in report and "figures/learning_curve.png" in report


def remark(report: str, method: str) -> str:
    (line,) = [
        line for line in report.splitlines() if line.startswith("- ") and f"`{method}`" in line and "twin" in line
    ]
    return line


def test_remarks_follow_the_ci(benchmark, tmp_path):
    runs, _, results = benchmark
    write_outputs(tmp_path, results, runs, CONTEXT)
    report = (tmp_path / "report.md").read_text()
    table = results.set_index("method")
    assert "significant" not in report.lower()
    assert "`elmo-scalar-pool-mlp` beats its random twin `random-scalar-pool-mlp`" in report
    assert "the CI excludes 0, and it holds after Holm's adjustment" in remark(report, "elmo-scalar-pool-mlp")
    assert "**The random twin `random-layer:0-pool-mlp` beats `elmo-layer:0-pool-mlp`**" in report
    same = table.loc["elmo-average-pool-mlp"]  # 70% against 70%
    assert same["gap_ci_low"] < 0 < same["gap_ci_high"]
    text = remark(report, "elmo-average-pool-mlp")
    assert f"no gap detected (MDE {100 * same['mde_vs_random']:.1f} points" in text and "the CI spans 0" in text
    assert "beats" not in text
    effects = 100 * table["mde_vs_random"].dropna()
    assert f"Minimum detectable gap (MDE; α = 0.05, power 0.8) with 2–3 seed pair(s) × {N_ITEMS} test items" in report
    assert f"{effects.median():.1f} points (median of 6 comparisons" in report
    excluding = int(((table["gap_ci_low"] > 0) | (table["gap_ci_high"] < 0)).sum())
    assert f"Gaps to the random twin: {excluding} of 6 CIs exclude 0; chance alone gives about 0.3" in report


def test_how_to_read_documents_the_procedure(benchmark, tmp_path):
    runs, _, results = benchmark
    write_outputs(tmp_path, results, runs, {})
    how = (tmp_path / "report.md").read_text().split("## How to read", 1)[1]
    for phrase in (
        "same seed value",
        "id columns",
        "seed luck",
        "Clark 1973",
        "Satterthwaite",
        "95% CI",
        "excludes 0 exactly when p < 0.05",
        "MDE",
        "median of per-seed p-values",
        "47%",
    ):
        assert phrase in how, phrase


def test_split_sizes_and_dataset_come_from_the_data(benchmark, tmp_path):
    runs, _, results = benchmark
    runs = runs.drop(columns=["mix", "train_fraction"])  # nothing to plot: the text alone
    write_outputs(tmp_path / "plain", results, runs, {})
    plain = (tmp_path / "plain" / "report.md").read_text()
    assert f"test = test split ({N_ITEMS} pairs)" in plain and "408" not in plain and "1725" not in plain
    sized = runs.assign(dev_pairs=120, test_pairs=N_ITEMS)
    write_outputs(tmp_path / "runs", results, sized, {"dataset": "MRPC"})
    assert (
        "dev = MRPC dev split (120 pairs), test = MRPC test split (300 pairs)"
        in (tmp_path / "runs" / "report.md").read_text()
    )
    write_outputs(tmp_path / "sick", results, runs, {"dataset": "SICK", "split_sizes": {"dev": 500, "test": 4906}})
    sick = (tmp_path / "sick" / "report.md").read_text()
    assert "dev = SICK dev split (500 pairs), test = SICK test split (4906 pairs)" in sick
    assert "Published anchors" not in sick  # MRPC's anchors only beside MRPC


def test_mrpcs_anchors_show_gpts_f1_and_a_dash_where_no_accuracy_was_published(benchmark, tmp_path):
    runs, _, results = benchmark
    write_outputs(tmp_path, results, runs, {"dataset": "MRPC"})
    report = (tmp_path / "report.md").read_text()
    assert "| OpenAI GPT (12 × 768), fine-tuned | — | 82.3 | Radford et al. 2018, GLUE test |" in report
    assert "None" not in report.split("## Published anchors", 1)[1].split("##", 1)[0]


def test_write_outputs_skips_learning_curve_without_fractions(tmp_path):
    cells = [cell for cell in CELLS if cell[4] == 1.0]
    runs, preds = make_benchmark(cells)
    written = write_outputs(tmp_path, build_results(runs, preds), runs, {})
    assert not (tmp_path / "figures" / "learning_curve.png").exists()
    assert (tmp_path / "figures" / "mix_weights.png") in written
    report = (tmp_path / "report.md").read_text()
    assert "learning_curve" not in report and "Learning curve" not in report


ONE_SEED = [
    ("elmo-dense-one", "elmo", "pretrained", "scalar", 1.0, "random-dense-one", 0.8, 1),
    ("random-dense-one", "elmo", "random", "scalar", 1.0, "", 0.7, 1),
]


def test_suite_shaped_inputs_one_seed_baselines_and_plain_context(tmp_path):
    # Runs of older benchmarks gave baselines a random method as control; encoder configs come as paths.
    cells = [cell if cell[2] != "baseline" else (*cell[:5], "random-scalar-pool-mlp", *cell[6:]) for cell in CELLS]
    runs, preds = make_benchmark(cells + ONE_SEED)
    results = build_results(runs, preds).set_index("method")
    for baseline in ("majority", "tfidf-lr"):  # baselines get no gap to a twin, whatever their control
        assert math.isnan(results.loc[baseline, "gap_vs_random"]) and results.loc[baseline, "paired_seeds"] == 0
    one = results.loc["elmo-dense-one"]  # one seed pair: the gap, without a test
    assert one["gap_test"] == NO_SEED_REPLICATION and one["paired_seeds"] == 1
    assert one["gap_vs_random"] == pytest.approx(
        accuracy(preds["elmo-dense-one/0"]) - accuracy(preds["random-dense-one/0"]), abs=1e-12
    )
    assert results.loc["elmo-dense-one", [PVALUE_COLUMN, "gap_ci_low", "mde_vs_random", "p_adjusted"]].isna().all()
    encoder = {"name": "elmo", "run_id": "pre1", "num_layers": 3, "config": "configs/pretrain/elmo.yaml"}
    context = {"encoders": [encoder], "settings": {"output": tmp_path, "seeds": [0, 1, 2]}, "throughput": None}
    write_outputs(tmp_path, results.reset_index(), runs, context)
    report = (tmp_path / "report.md").read_text()
    assert "`configs/pretrain/elmo.yaml`" in report and str(tmp_path) in report
    assert any(
        line.startswith("| `elmo-dense-one` |") and f"({NO_SEED_REPLICATION})" in line for line in report.splitlines()
    )
    assert "no seed replication, so no CI or p" in remark(report, "elmo-dense-one")
    assert "beats `majority`" not in report and "beats `tfidf-lr`" not in report  # remarks compare pretrained only


def test_a_ci_that_excludes_0_without_holm_is_a_lead_not_a_finding(benchmark, tmp_path):
    runs, _, results = benchmark
    table = results.set_index("method")
    assert table.loc["elmo-scalar-pool-mlp", "gap_ci_low"] > 0
    lost = results.assign(p_adjusted=np.where(results["method"] == "elmo-scalar-pool-mlp", 0.2, results["p_adjusted"]))
    write_outputs(tmp_path, lost, runs, CONTEXT)
    text = remark((tmp_path / "report.md").read_text(), "elmo-scalar-pool-mlp")
    assert "beats its random twin" not in text and "Holm-adjusted 0.2" in text
    assert "the CI excludes 0, but not after Holm's adjustment" in text and "not a finding" in text


@pytest.mark.slow  # importing the suite loads Lightning and MLflow
def test_print_summary_shows_gap_ci_and_p(capsys, tmp_path):
    from benchmarks.suite import print_summary

    runs, preds = make_benchmark(CELLS + ONE_SEED)
    results = build_results(runs, preds)
    print_summary(results, {"name": "unit", "experiment": "mrpc"}, "parent1", tmp_path, 60.0)
    lines = capsys.readouterr().out.splitlines()
    row = results.set_index("method").loc["elmo-scalar-pool-mlp"]
    (line,) = [line for line in lines if line.strip().startswith("elmo-scalar-pool-mlp ")]
    gap = f"{100 * row['gap_vs_random']:+.1f} ({100 * row['gap_ci_low']:+.1f}, {100 * row['gap_ci_high']:+.1f})"
    tfidf = (
        f"{100 * row['gap_vs_tfidf']:+.1f} ({100 * row['gap_vs_tfidf_ci_low']:+.1f}, "
        f"{100 * row['gap_vs_tfidf_ci_high']:+.1f})"
    )
    p_values = f"{row['p_value_vs_random']:.3g} +{row['p_adjusted']:.3g}"
    assert re.search(rf"{re.escape(gap)} +{p_values} +{re.escape(tfidf)}$", line), line
    (twin,) = [line for line in lines if line.strip().startswith("random-scalar-pool-mlp ")]
    assert re.search(r"— +— +— +[+-]\d", twin), twin  # no twin of its own, but a gap to TF-IDF
    (one,) = [line for line in lines if line.strip().startswith("elmo-dense-one")]
    assert re.search(r"† +— +— ", one), one  # one seed pair: no p, no adjusted p
    (baseline,) = [line for line in lines if line.strip().startswith("tfidf-lr ")]
    assert baseline.endswith("—")
    assert any(line.strip().startswith("† one seed pair") for line in lines)


@pytest.mark.slow  # importing the suite loads Lightning and MLflow
def test_print_summary_marks_a_gap_whose_control_failed_and_says_why(capsys, tmp_path):
    from benchmarks.suite import print_summary

    runs, preds = make_benchmark(CELLS + ONE_SEED)
    results = build_results(runs, preds)
    failed = results["method"] == "elmo-scalar-pool-mlp"
    reason = "`random-scalar-pool-mlp`: one class in 3/3 runs"
    results[CONTROL_OK_COLUMN] = np.where(failed, False, results[CONTROL_OK_COLUMN])
    results[CONTROL_REASON_COLUMN] = np.where(failed, reason, "")
    print_summary(results, {"name": "unit", "experiment": "mrpc"}, "parent1", tmp_path, 60.0)
    lines = capsys.readouterr().out.splitlines()
    (line,) = [line for line in lines if line.strip().startswith("elmo-scalar-pool-mlp ")]
    assert re.search(r"\) ✗ +[\d.e-]+ ", line), line  # the gap is shown, marked
    (note,) = [line for line in lines if line.strip().startswith("✗ control failed")]
    assert "never counted" in note and f"`elmo-scalar-pool-mlp` — {reason}" in note
    (passed,) = [line for line in lines if line.strip().startswith("elmo-top-pool-mlp ")]
    assert "✗" not in passed


def test_the_report_sums_each_methods_cell_times(benchmark, tmp_path):
    runs, _, results = benchmark
    learned = runs["kind"] != "baseline"
    timed = runs.assign(
        time_total_s=np.where(learned, 30.0 + runs["seed"], np.nan),
        time_fit_s=np.where(learned, 26.0, np.nan),
        time_eval_s=np.where(learned, 2.0, np.nan),
    )
    write_outputs(tmp_path, results, timed, CONTEXT)
    report = (tmp_path / "report.md").read_text()
    section = report.split("## Where the cells' time went")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if line.startswith("| `elmo-scalar-pool-mlp` |"))
    # 3 seeds: totals 30 + 31 + 32 s = 1.55 min, fit 3 × 26 s = 1.3 min, eval 0.1 min; median overhead 5 s
    assert [cell.strip() for cell in row.split("|")[2:-1]] == ["3", "1.6", "1.3", "0.1", "5.0"]
    assert "`majority`" not in section  # baselines have no time metrics
    untimed = tmp_path / "untimed"
    write_outputs(untimed, results, runs, CONTEXT)
    assert "Where the cells' time went" not in (untimed / "report.md").read_text()


def remarks_of(report: str) -> list[str]:
    return [
        line for line in report.split("## Remarks", 1)[1].split("\n## ", 1)[0].splitlines() if line.startswith("- ")
    ]


def tfidf_remark(report: str) -> str:
    (line,) = [line for line in remarks_of(report) if line.startswith("- Against TF-IDF + LR")]
    return line


def tfidf_groups(line: str) -> dict[str, str]:
    """The TF-IDF remark's groups: ``{"above it": "…", "below it": "…", …}``."""
    groups = {}
    for piece in line.split(" — ", 1)[1].split(". No method")[0].rstrip(".").split("; "):
        label, _, names = piece.partition(": ")
        groups[label.split(" (")[0].split(",")[0]] = names
    return groups


def test_the_tfidf_remark_follows_the_ci_not_the_means(benchmark, tmp_path):
    runs, _, results = benchmark
    write_outputs(tmp_path, results, runs, CONTEXT)
    report = (tmp_path / "report.md").read_text()
    table = results.set_index("method")
    tfidf = table.loc["tfidf-lr", "test_acc_mean"]
    ahead_by_mean = table[(table["test_acc_mean"] > tfidf) & (table["gap_vs_tfidf_ci_low"] < 0)]
    above = table[table["gap_vs_tfidf_ci_low"] > 0]
    assert len(ahead_by_mean) and len(above)  # the fixture has both kinds
    groups = tfidf_groups(tfidf_remark(report))
    for method in above.index:
        assert f"`{method}`" in groups["above it"], method
    for method in ahead_by_mean.index:  # a higher mean whose CI includes 0 is not "better"
        assert f"`{method}`" not in groups["above it"] and f"`{method}`" in groups["no gap detected"]
    row = above.iloc[0]
    assert (
        f"`{above.index[0]}` {100 * row['gap_vs_tfidf']:+.1f} (CI {100 * row['gap_vs_tfidf_ci_low']:+.1f} to "
        f"{100 * row['gap_vs_tfidf_ci_high']:+.1f})"
    ) in groups["above it"]
    for baseline in ("majority", "tfidf-lr"):
        assert f"`{baseline}`" not in tfidf_remark(report).split(" — ", 1)[1]
    excluding = int(((table["gap_vs_tfidf_ci_low"] > 0) | (table["gap_vs_tfidf_ci_high"] < 0)).sum())
    tested = int(table["gap_vs_tfidf_ci_low"].notna().sum())
    assert f"Gaps to TF-IDF + LR: {excluding} of {tested} CIs against TF-IDF exclude 0" in report
    holding = int((table["p_vs_tfidf_adjusted"] < 0.05).sum())  # Holm within the TF-IDF family
    assert (
        f"{holding} of them stay below p = 0.05 after Holm's adjustment for the {tested} comparisons "
        "(`p_vs_tfidf_adjusted`)"
    ) in report


def test_tfidf_ahead_by_mean_is_no_claim_that_nothing_beats_it(tmp_path):
    """TF-IDF has the best mean; a method a little below it has a CI across 0: neither "beats" nor
    "does not beat" is said from the means."""
    cells = [cell if cell[0] != "tfidf-lr" else (*cell[:6], 0.90, 1) for cell in CELLS]
    cells = [cell if cell[0] != "elmo-scalar-pool-mlp" else (*cell[:6], 0.89, 3) for cell in cells]
    runs, preds = make_benchmark(cells)
    results = build_results(runs, preds)
    write_outputs(tmp_path, results, runs, {})
    report = (tmp_path / "report.md").read_text()
    table = results.set_index("method")
    assert table["test_acc_mean"].idxmax() == "tfidf-lr"
    close = table.loc["elmo-scalar-pool-mlp"]
    assert close["gap_vs_tfidf"] < 0 < close["gap_vs_tfidf_ci_high"]
    assert "No learned representation beats" not in report
    line = tfidf_remark(report)
    assert "`elmo-scalar-pool-mlp`" in tfidf_groups(line)["no gap detected"]
    assert "above it" not in tfidf_groups(line)
    assert "No method is measurably above TF-IDF + LR (a CI that includes 0 is not evidence of no gap)" in line


def test_the_best_method_is_a_learned_one_never_a_baseline(tmp_path):
    """TF-IDF + LR ahead of every learned method: the best method is the best learned one, below
    TF-IDF; with only a published encoder's methods (a reference benchmark) none is ranked."""
    cells = [cell if cell[0] != "tfidf-lr" else (*cell[:6], 0.95, 1) for cell in CELLS]
    runs, preds = make_benchmark(cells)
    results = build_results(runs, preds)
    write_outputs(tmp_path, results, runs, {})
    line = next(line for line in (tmp_path / "report.md").read_text().splitlines() if "Best method" in line)
    assert (
        "`elmo-scalar-pool-mlp`" in line
        and "points vs `tfidf-lr`" in line
        and "Best method by mean test accuracy: `tfidf-lr`" not in line
    )
    published = {"encoders": [{"name": "elmo", "published": True}]}
    write_outputs(tmp_path / "reference", results, runs, published)
    line = next(
        line for line in (tmp_path / "reference" / "report.md").read_text().splitlines() if "Best method" in line
    )
    assert "none of an encoder pretrained here" in line and "`tfidf-lr`" not in line


def test_the_table_shows_p_adjusted_and_the_gap_vs_tfidf(benchmark, tmp_path):
    runs, _, results = benchmark
    write_outputs(tmp_path, results, runs, CONTEXT)
    lines = (tmp_path / "report.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| method |"))

    def cells(line):
        return [cell.strip() for cell in line.split("|")[1:-1]]

    columns = cells(header)
    assert columns[columns.index("p") + 1] == "p_adjusted" and "gap vs TF-IDF (95% CI)" in columns
    row = results.set_index("method").loc["elmo-scalar-pool-mlp"]
    values = dict(zip(columns, cells(next(line for line in lines if line.startswith("| `elmo-scalar-pool-mlp` |")))))
    assert values["p_adjusted"] == f"{row['p_adjusted']:.3g}"
    low, high = 100 * row["gap_vs_tfidf_ci_low"], 100 * row["gap_vs_tfidf_ci_high"]
    assert values["gap vs TF-IDF (95% CI)"] == f"{100 * row['gap_vs_tfidf']:+.1f} ({low:+.1f}, {high:+.1f})"
    baseline = dict(zip(columns, cells(next(line for line in lines if line.startswith("| `tfidf-lr` |")))))
    assert baseline["gap vs TF-IDF (95% CI)"] == "—" and baseline["p_adjusted"] == "—"


def test_an_older_table_renders_without_the_new_columns(benchmark, tmp_path):
    runs, _, results = benchmark
    write_outputs(
        tmp_path, results.drop(columns=[*NEW_COLUMNS, *CONTROL_COLUMNS, TFIDF_REFERENCE_COLUMN]), runs, CONTEXT
    )
    report = (tmp_path / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| method |"))
    assert header == (
        "| method | seeds | dev acc | dev F1 | test acc | test F1 | gap vs random (95% CI) | p | MDE | collapsed |"
    )
    shown = report.split("## How to read")[0]
    assert "Against TF-IDF + LR" not in shown and "p_adjusted" not in shown and "gap vs TF-IDF" not in shown
    assert "vs `tfidf-lr`" in shown  # the best-method line keeps its difference of means, named as such


def test_no_tfidf_remark_or_column_without_a_tfidf_run(tmp_path):
    runs, preds = make_benchmark([cell for cell in CELLS if cell[0] != "tfidf-lr"])
    write_outputs(tmp_path, build_results(runs, preds), runs, {})
    shown = (tmp_path / "report.md").read_text().split("## How to read")[0]
    assert "Against TF-IDF + LR" not in shown and "gap vs TF-IDF" not in shown


def test_one_seed_rows_get_no_tfidf_verdict(tmp_path):
    runs, preds = make_benchmark(CELLS + ONE_SEED)
    write_outputs(tmp_path, build_results(runs, preds), runs, {})
    groups = tfidf_groups(tfidf_remark((tmp_path / "report.md").read_text()))
    assert groups[NO_SEED_REPLICATION] == "`elmo-dense-one`, `random-dense-one`"
    assert all("`elmo-dense-one`" not in names for label, names in groups.items() if label != NO_SEED_REPLICATION)


def test_steps_per_method_in_results_and_the_table(benchmark, tmp_path):
    runs, preds, _ = benchmark
    learned = runs["kind"] != "baseline"
    stepped = runs.assign(train_steps=np.where(learned, 100.0 + 10 * runs["seed"], np.nan))
    results = build_results(stepped, preds)
    table = results.set_index("method")
    assert table.loc["elmo-scalar-pool-mlp", "train_steps_mean"] == pytest.approx(110.0)  # seeds 0, 1, 2
    assert pd.isna(table.loc["majority", "train_steps_mean"])
    assert list(results.columns[:-1]) == list(build_results(runs, preds).columns)  # a column added at the end
    write_outputs(tmp_path, results, stepped, CONTEXT)
    lines = (tmp_path / "report.md").read_text().splitlines()
    columns = [cell.strip() for cell in next(line for line in lines if line.startswith("| method |")).split("|")[1:-1]]
    row = next(line for line in lines if line.startswith("| `elmo-scalar-pool-mlp` |"))
    values = dict(zip(columns, [cell.strip() for cell in row.split("|")[1:-1]]))
    assert values["steps"] == "110" and columns[-2:] == ["steps", "collapsed"]


def test_the_learned_mix_weights_beside_the_uniform(benchmark, tmp_path):
    runs, _, results = benchmark
    write_outputs(tmp_path, results, runs, CONTEXT)
    section = (tmp_path / "report.md").read_text().split("## Learned scalar mixes")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if line.startswith("| `elmo-scalar-pool-mlp` |"))
    # seeds 0, 1, 2 logged [0.2, 0.3, 0.5], [0.3, 0.3, 0.4], [0.4, 0.3, 0.3] and gamma 1.1
    assert [cell.strip() for cell in row.split("|")[2:-1]] == ["3", "0.30 0.30 0.40", "0.33", "0.07", "1.10"]
    assert "`elmo-top-pool-mlp`" not in section  # a fixed mix has no weights to learn
    unmixed = runs.drop(columns=[column for column in runs if column.startswith("mix_")])
    write_outputs(tmp_path / "none", results, unmixed, CONTEXT)
    assert "Learned scalar mixes" not in (tmp_path / "none" / "report.md").read_text()
