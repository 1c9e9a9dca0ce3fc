import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.report import build_results, write_outputs
from benchmarks.stats import METRICS, PVALUE_COLUMN

N_ITEMS = 300
LABELS = (np.random.default_rng(0).random(N_ITEMS) < 0.665).astype(int)
COLUMNS = [
    "method", "seed", "encoder", "kind", "mix", "head", "train_fraction", "control",
    "dev_acc", "dev_f1", "test_acc", "test_f1", "mix_weight_0", "mix_weight_1", "mix_weight_2", "mix_gamma",
]


def predictions(accuracy: float, seed: int, collapsed: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pred = np.ones(N_ITEMS, dtype=int) if collapsed else np.where(rng.random(N_ITEMS) < accuracy, LABELS, 1 - LABELS)
    return pd.DataFrame({"id1": np.arange(N_ITEMS), "id2": np.arange(N_ITEMS) + 10000, "label": LABELS,
                         "prob": pred * 0.8 + 0.1, "pred": pred})


def f1(frame: pd.DataFrame) -> float:
    true_positive = int(((frame["pred"] == 1) & (frame["label"] == 1)).sum())
    return 2 * true_positive / max(1, int(frame["pred"].sum()) + int(frame["label"].sum()))


# method, encoder, kind, mix, fraction, control, test accuracy, seeds
CELLS = [
    ("elmo-scalar-pool-mlp", "elmo", "pretrained", "scalar", 1.0, "random-scalar-pool-mlp", 0.88, 3),
    ("random-scalar-pool-mlp", "elmo", "random", "scalar", 1.0, "", 0.66, 3),
    ("elmo-layer:0-pool-mlp", "elmo", "pretrained", "layer:0", 1.0, "random-layer:0-pool-mlp", 0.60, 2),
    ("random-layer:0-pool-mlp", "elmo", "random", "layer:0", 1.0, "", 0.75, 2),
    ("elmo-layer:1-pool-mlp", "elmo", "pretrained", "layer:1", 1.0, "random-layer:1-pool-mlp", 0.80, 2),
    ("random-layer:1-pool-mlp", "elmo", "random", "layer:1", 1.0, "", 0.70, 2),
    ("elmo-top-pool-mlp", "elmo", "pretrained", "top", 1.0, "random-top-pool-mlp", 0.80, 2),
    ("random-top-pool-mlp", "elmo", "random", "top", 1.0, "", 0.70, 2),
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
            rows.append([method, seed, encoder, kind, mix, "pool-mlp" if kind != "baseline" else "", fraction,
                         control, test_acc + 0.01 * seed, 0.8, test_acc, f1(preds[run_id]), *weights])
    runs = pd.DataFrame(rows, columns=COLUMNS)
    runs.insert(0, "run_id", [f"{method}/{seed}" for method, seed in zip(runs["method"], runs["seed"])])
    return runs, preds


@pytest.fixture(scope="module")
def benchmark():
    runs, preds = make_benchmark()
    return runs, preds, build_results(runs, preds)


def test_build_results_columns_and_method_order(benchmark):
    runs, _, results = benchmark
    statistics = ("mean", "std", "min", "max")
    expected = ["method", "n_seeds"] + [f"{metric}_{stat}" for metric in METRICS for stat in statistics]
    assert list(results.columns) == expected + [PVALUE_COLUMN, "collapsed_runs"]
    assert list(results["method"]) == list(dict.fromkeys(runs["method"]))


def test_build_results_aggregates_over_seeds(benchmark):
    runs, _, results = benchmark
    row = results.set_index("method").loc["elmo-scalar-pool-mlp"]
    values = runs.loc[runs["method"] == "elmo-scalar-pool-mlp", "test_acc"]
    assert row["n_seeds"] == 3
    assert row["test_acc_mean"] == pytest.approx(values.mean())
    assert row["test_acc_std"] == pytest.approx(values.std(ddof=1))
    assert row["dev_acc_max"] == pytest.approx(runs.loc[runs["method"] == "elmo-scalar-pool-mlp", "dev_acc"].max())


def test_pvalue_small_for_better_method_and_nan_without_control(benchmark):
    _, _, results = benchmark
    pvalues = results.set_index("method")[PVALUE_COLUMN]
    assert pvalues["elmo-scalar-pool-mlp"] < 1e-6
    assert pvalues["elmo-layer:0-pool-mlp"] < 0.05  # significant, but the control is the better one
    for method in ("random-scalar-pool-mlp", "majority", "tfidf-lr"):
        assert math.isnan(pvalues[method])


def test_pvalue_pairs_seeds_by_value_and_nan_when_control_missing():
    runs, preds = make_benchmark()
    shuffled = build_results(runs.iloc[::-1].reset_index(drop=True), preds).set_index("method")
    ordered = build_results(runs, preds).set_index("method")
    assert shuffled.loc["elmo-scalar-pool-mlp", PVALUE_COLUMN] == ordered.loc["elmo-scalar-pool-mlp", PVALUE_COLUMN]
    without_control = runs[runs["method"] != "random-top-pool-mlp"]
    assert math.isnan(build_results(without_control, preds).set_index("method").loc["elmo-top-pool-mlp", PVALUE_COLUMN])


def test_collapsed_runs_counted(benchmark):
    _, _, results = benchmark
    collapsed = results.set_index("method")["collapsed_runs"]
    assert collapsed["majority"] == 1
    assert collapsed["elmo-layer:1-pool-mlp"] == 1
    assert collapsed["elmo-scalar-pool-mlp"] == 0


def test_write_outputs_tables_report_and_figures(benchmark, tmp_path):
    runs, _, results = benchmark
    context = {"name": "unit", "parent_run_id": "parent123", "wall_seconds": 125.0, "settings": {"seeds": 3},
               "encoders": [{"name": "elmo", "run_id": "pre1", "val_ppl": 123.4, "train_tokens": 160000,
                             "config": {"hidden_size": 64}}],
               "throughput": [{"name": "seed-full", "softmax": "full", "batch_size": 16, "real_tokens_per_s": 5000.0,
                               "model_gflops_per_s": 3.2, "matmul_peak_gflops_per_s": 100.0, "peak_rss_mb": 900.0}]}
    written = write_outputs(tmp_path, results, runs, context)
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
    assert any(line.startswith("| `elmo-scalar-pool-mlp` | 3 |") and cell in line for line in report.splitlines())
    assert "parent123" in report and "pre1" in report and "seed-full" in report
    assert "The random control `random-layer:0-pool-mlp` beats `elmo-layer:0-pool-mlp`" in report
    assert "`elmo-scalar-pool-mlp` beats its random control `random-scalar-pool-mlp`" in report
    assert "vs `tfidf-lr`" in report and "`majority` (1/1)" in report
    assert "Learning curve `elmo-scalar-pool-mlp`" in report
    assert "66.5" in report and "Wang et al. 2019" in report
    assert "figures/learning_curve.png" in report and "McNemar" in report


def test_write_outputs_skips_learning_curve_without_fractions(tmp_path):
    cells = [cell for cell in CELLS if cell[4] == 1.0]
    runs, preds = make_benchmark(cells)
    written = write_outputs(tmp_path, build_results(runs, preds), runs, {})
    assert not (tmp_path / "figures" / "learning_curve.png").exists()
    assert (tmp_path / "figures" / "mix_weights.png") in written
    report = (tmp_path / "report.md").read_text()
    assert "learning_curve" not in report and "Learning curve" not in report


def test_suite_shaped_inputs_baseline_controls_and_plain_context(tmp_path):
    # The suite gives baselines the first random method as control and passes encoder configs as paths.
    cells = [cell if cell[2] != "baseline" else (*cell[:5], "random-scalar-pool-mlp", *cell[6:]) for cell in CELLS]
    runs, preds = make_benchmark(cells)
    results = build_results(runs, preds).set_index("method")
    assert results.loc["tfidf-lr", PVALUE_COLUMN] < 1  # seed 0 against control seed 0
    encoder = {"name": "elmo", "run_id": "pre1", "num_layers": 3, "config": "configs/pretrain/elmo.yaml"}
    context = {"encoders": [encoder],
               "settings": {"output": tmp_path, "seeds": [0, 1, 2]}, "throughput": None}
    write_outputs(tmp_path, results.reset_index(), runs, context)
    report = (tmp_path / "report.md").read_text()
    assert "`configs/pretrain/elmo.yaml`" in report and str(tmp_path) in report
    assert "beats `majority`" not in report and "beats `tfidf-lr`" not in report  # remarks compare pretrained only
