"""Aggregation over seeds and the crossed (seeds x items) gap test, against hand-computed answers and
simulations with known truth: calibration under the null, power, CI coverage, and why the old
median-of-McNemar and an items-only test were not valid."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.stats import (
    CROSSED,
    ITEMS_ONLY,
    METRICS,
    aggregate_runs,
    compare_with_twin,
    correctness,
    crossed_gap,
    id_columns,
    is_collapsed,
    minimum_detectable_effect,
    paired_correctness,
    results_table,
    runs_table,
)


def make_runs() -> pd.DataFrame:
    rows = [
        ("elmo", 0, 0.6, 0.70, 0.65, 0.75),
        ("elmo", 1, 0.7, 0.80, 0.70, 0.80),
        ("elmo", 2, 0.8, 0.90, 0.75, 0.85),
        ("random", 0, 0.684, 0.812, 0.665, 0.799),
    ]
    return pd.DataFrame(rows, columns=["method", "seed"] + METRICS)


# ── aggregation ────────────────────────────────────────────────────────────────────────────────

def test_aggregate_runs_mean_std_min_max_of_distinct_values():
    runs = make_runs()
    runs.loc[1, "test_acc"] = 0.9  # elmo test_acc: 0.65, 0.9, 0.75 — mean, median and midrange all differ
    table = aggregate_runs(runs)
    assert list(table["method"]) == ["elmo", "random"]
    elmo = table.set_index("method").loc["elmo"]
    assert elmo["n_seeds"] == 3
    assert (elmo["dev_acc_mean"], elmo["dev_acc_std"]) == (pytest.approx(0.7), pytest.approx(0.1))
    assert (elmo["dev_acc_min"], elmo["dev_acc_max"]) == (pytest.approx(0.6), pytest.approx(0.8))
    assert elmo["test_acc_mean"] == pytest.approx(2.3 / 3)
    assert elmo["test_acc_std"] == pytest.approx(math.sqrt(((0.65 - 2.3 / 3) ** 2 + (0.9 - 2.3 / 3) ** 2
                                                            + (0.75 - 2.3 / 3) ** 2) / 2))
    assert (elmo["test_acc_min"], elmo["test_acc_max"]) == (pytest.approx(0.65), pytest.approx(0.9))
    assert (elmo["test_f1_mean"], elmo["test_f1_std"]) == (pytest.approx(0.8), pytest.approx(0.05))


def test_aggregate_runs_single_seed_has_zero_std_and_first_appearance_order():
    table = aggregate_runs(make_runs().iloc[::-1].reset_index(drop=True))
    assert list(table["method"]) == ["random", "elmo"]
    single = table.set_index("method").loc["random"]
    assert single["n_seeds"] == 1
    for metric in METRICS:
        assert single[f"{metric}_std"] == 0.0
        assert single[f"{metric}_min"] == single[f"{metric}_max"] == single[f"{metric}_mean"]


def test_runs_table_renames_mlflow_columns():
    raw = make_runs().rename(columns={"method": "tags.method", "seed": "tags.seed"})
    raw = raw.rename(columns={metric: f"metrics.{metric}" for metric in METRICS})
    raw["tags.seed"] = raw["tags.seed"].astype(str)
    raw["run_id"] = [f"run{index}" for index in range(len(raw))]
    raw = pd.concat([raw, pd.DataFrame([{"run_id": "parent", "tags.method": None}])], ignore_index=True)
    table = runs_table(raw)
    assert list(table.columns) == ["run_id", "method", "seed"] + METRICS
    assert table["seed"].tolist() == [0, 1, 2, 0]
    assert table["dev_acc"].tolist() == pytest.approx([0.6, 0.7, 0.8, 0.684])
    pd.testing.assert_frame_equal(aggregate_runs(raw), aggregate_runs(make_runs()))


def test_is_collapsed():
    assert is_collapsed(np.ones(10, dtype=int)) and is_collapsed(pd.DataFrame({"pred": [0, 0, 0]}))
    assert not is_collapsed([0, 1, 1]) and not is_collapsed(pd.DataFrame({"pred": [1, 0]}))


# ── items, correctness and pairing ────────────────────────────────────────────────────────────

def frame(correct, ids=None, labels=None) -> pd.DataFrame:
    """Binary predictions right exactly where ``correct`` is true, one ``id`` column."""
    correct = np.asarray(correct, bool)
    labels = np.arange(len(correct)) % 2 if labels is None else np.asarray(labels)
    ids = [f"item{index}" for index in range(len(correct))] if ids is None else ids
    pred = np.where(correct, labels, 1 - labels)
    return pd.DataFrame({"id": ids, "label": labels, "prob": pred * 0.9, "pred": pred})


def test_id_columns_are_everything_but_labels_predictions_and_probabilities():
    mrpc = pd.DataFrame(columns=["id1", "id2", "label", "prob", "pred"])
    generic = pd.DataFrame(columns=["id", "label", "prob_neutral", "prob_entailment", "pred"])
    assert id_columns(mrpc) == ["id1", "id2"]
    assert id_columns(generic) == ["id"]


def test_three_class_correctness_and_gap():
    labels = ["entailment", "neutral", "contradiction", "neutral", "entailment", "contradiction"]
    method = pd.DataFrame({"id": range(6), "label": labels, "prob_entailment": 0.3,
                           "pred": ["entailment", "neutral", "neutral", "neutral", "contradiction", "contradiction"]})
    twin = method.assign(pred=["neutral"] * 6)
    assert correctness(method).tolist() == [True, True, False, True, False, True]
    assert correctness(twin).tolist() == [False, True, False, True, False, False]
    numeric = pd.DataFrame({"label": [0, 1, 2, 2], "pred": [0.0, 2.0, 2.0, 1.0]})  # floats read back from CSV
    assert correctness(numeric).tolist() == [True, False, True, False]
    gap = compare_with_twin({7: method}, {7: twin})
    assert gap.gap == pytest.approx(2 / 6)  # 4 of 6 right against 2 of 6
    assert gap.procedure == ITEMS_ONLY and gap.seeds == 1 and gap.items == 6


def test_pairs_by_seed_value_not_by_position():
    """Method seeds {0, 1, 2}, twin seeds {1, 2, 5}: only 1 and 2 pair, and they are identical.
    Pairing by position (0↔1, 1↔2, 2↔5) would see a gap of 1/3."""
    correct = {0: np.ones(20), 1: np.arange(20) < 10, 2: np.arange(20) < 15, 5: np.zeros(20)}
    method_runs = {seed: frame(correct[seed]) for seed in (2, 0, 1)}
    twin_runs = {seed: frame(correct[seed]) for seed in (5, 1, 2)}
    seeds, correct_method, correct_twin = paired_correctness(method_runs, twin_runs)
    assert seeds == [1, 2] and correct_method.shape == (2, 20)
    gap = compare_with_twin(method_runs, twin_runs)
    assert gap.seeds == 2 and gap.gap == 0.0 and gap.p_value == pytest.approx(1.0)
    by_position = {index: twin_runs[seed] for index, seed in enumerate(sorted(twin_runs))}  # 0↔1, 1↔2, 2↔5
    assert compare_with_twin(method_runs, by_position).gap == pytest.approx((0.5 - 0.25 + 0.75) / 3)
    assert compare_with_twin({0: frame(correct[0])}, {1: frame(correct[1])}) is None


def test_items_align_on_ids_whatever_the_row_order():
    labels = np.arange(30) % 2
    ids = [f"pair{index}" for index in range(30)]
    method = frame(np.arange(30) < 25, ids, labels)
    twin = frame(np.arange(30) < 15, ids, labels)
    shuffled = twin.sample(frac=1.0, random_state=0).reset_index(drop=True)
    assert compare_with_twin({0: method}, {0: shuffled}).gap == pytest.approx(10 / 30)
    as_text = shuffled.assign(label=shuffled["label"].astype(str), pred=shuffled["pred"].astype(float))  # CSV-ish
    assert compare_with_twin({0: method}, {0: as_text}).gap == pytest.approx(10 / 30)


def test_pairing_refuses_other_items_labels_or_duplicates():
    method = frame(np.ones(6, bool))
    with pytest.raises(ValueError, match="other items"):
        compare_with_twin({0: method}, {0: frame(np.ones(6, bool), ids=[f"x{index}" for index in range(6)])})
    with pytest.raises(ValueError, match="other items"):
        compare_with_twin({0: method}, {0: frame(np.ones(5, bool))})
    with pytest.raises(ValueError, match="gold labels"):
        compare_with_twin({0: method}, {0: frame(np.ones(6, bool), labels=np.ones(6, int))})
    with pytest.raises(ValueError, match="duplicate"):
        compare_with_twin({0: pd.concat([method, method.iloc[:1]])}, {0: method})


# ── the crossed estimate on hand-computed cases ──────────────────────────────────────────────

def test_crossed_gap_matches_the_hand_computed_anova():
    differences = np.array([[1, 0, 1, 0], [0, 0, 1, -1]])
    # mean 0.25; seed means 0.5, 0; item means 0.5, 0, 1, -0.5; residuals all ±0.25
    # MS_seed = 4 * 0.125 = 0.5, MS_item = 2 * 1.25 / 3 = 5/6, MS_res = 8 * 0.0625 / 3 = 1/6
    combined = 0.5 + 5 / 6 - 1 / 6
    df = combined**2 / (0.5**2 / 1 + (5 / 6) ** 2 / 3 + (1 / 6) ** 2 / 3)
    error = math.sqrt(combined / 8)
    gap = crossed_gap(differences)
    assert gap.procedure == CROSSED and (gap.seeds, gap.items) == (2, 4)
    assert gap.gap == 0.25
    assert gap.standard_error == pytest.approx(error)
    assert gap.degrees_of_freedom == pytest.approx(df) and df == pytest.approx(2.7736, abs=1e-4)
    assert gap.p_value == pytest.approx(2 * stats.t.sf(0.25 / error, df))
    assert (gap.ci_low, gap.ci_high) == (-1.0, 1.0)  # 0.25 ± 1.27, clipped to the possible gaps
    half = crossed_gap(differences, confidence=0.5)
    width = stats.t.ppf(0.75, df) * error
    assert (half.ci_low, half.ci_high) == (pytest.approx(0.25 - width), pytest.approx(0.25 + width))
    assert (gap.seed_variance, gap.item_variance, gap.residual_variance) == (
        pytest.approx((0.5 - 1 / 6) / 4), pytest.approx((5 / 6 - 1 / 6) / 2), pytest.approx(1 / 6))


def test_one_seed_falls_back_to_the_paired_t_test_over_items():
    generator = np.random.default_rng(3)
    differences = generator.integers(-1, 2, size=(1, 200)).astype(float)
    gap = crossed_gap(differences)
    reference = stats.ttest_1samp(differences[0], 0.0)
    interval = reference.confidence_interval(0.95)
    assert gap.procedure == ITEMS_ONLY and math.isnan(gap.seed_variance)
    assert gap.p_value == pytest.approx(reference.pvalue)
    assert (gap.ci_low, gap.ci_high) == (pytest.approx(interval.low), pytest.approx(interval.high))


def test_degenerate_differences():
    identical = crossed_gap(np.zeros((3, 50)))  # e.g. method and twin both collapsed to one class
    assert identical.gap == 0.0 and identical.p_value == 1.0
    assert identical.standard_error == pytest.approx(1 / 150)  # floored at the gap's resolution, 1 / (S N)
    effect = minimum_detectable_effect(identical.seed_variance, identical.item_variance, identical.residual_variance,
                                       3, 50)
    assert effect > 3 / 150  # the same floor: no design detects a gap finer than a few items
    always_better = crossed_gap(np.ones((3, 50)))  # method always right, twin always wrong
    assert always_better.gap == 1.0 and always_better.p_value < 1e-3 and always_better.ci_low > 0.9
    with pytest.raises(ValueError):
        crossed_gap(np.ones((2, 1)))


# ── simulations with known truth ─────────────────────────────────────────────────────────────

def simulate(seed: int, replicates: int, seeds: int, items: int, seed_luck: float, shift: float = 0.0):
    """Correctness (R, S, N) of a method and its twin: latent = ability + item difficulty (shared by
    both) + run luck (one per run) + per-item-per-run noise; right when the latent is > 0."""
    generator = np.random.default_rng(seed)
    difficulty = generator.normal(0.0, 1.5, (replicates, 1, items))

    def runs(ability: float) -> np.ndarray:
        luck = generator.normal(0.0, seed_luck, (replicates, seeds, 1))
        return ability + difficulty + luck + generator.normal(0.0, 1.0, (replicates, seeds, items)) > 0

    return runs(1.0 + shift), runs(1.0)


def true_gap(seed_luck: float, shift: float) -> float:
    """Population accuracy gap of ``simulate``: E Phi((a + X) / sqrt(1 + luck^2)), X ~ N(0, 1.5^2)."""
    scale = math.sqrt(1.0 + seed_luck**2 + 1.5**2)
    return stats.norm.cdf((1.0 + shift) / scale) - stats.norm.cdf(1.0 / scale)


def old_median_mcnemar(method: np.ndarray, twin: np.ndarray) -> np.ndarray:
    """The former p_value_vs_random: exact McNemar per seed pair, median over seeds. Returns (R,)."""
    only_method, only_twin = (method & ~twin).sum(-1), (~method & twin).sum(-1)  # (R, S)
    per_seed = np.minimum(1.0, 2 * stats.binom.cdf(np.minimum(only_method, only_twin), only_method + only_twin, 0.5))
    return np.median(per_seed, axis=-1)


def items_only(differences: np.ndarray) -> np.ndarray:
    """A naive test: paired t over items of the seed-averaged differences, seeds ignored. Returns (R,)."""
    per_item = differences.mean(axis=-2)  # (R, N)
    return stats.ttest_1samp(per_item, 0.0, axis=-1).pvalue


@pytest.mark.parametrize("seeds, seed_luck", [(3, 0.0), (3, 0.15), (5, 0.15), (5, 0.4)])
def test_null_rejects_at_the_nominal_rate_and_the_ci_covers_zero(seeds, seed_luck):
    method, twin = simulate(seeds * 10 + int(seed_luck * 100), 1000, seeds, 1000, seed_luck)
    gap = crossed_gap(method.astype(float) - twin)  # fields (R,)
    rejected = np.mean(gap.p_value < 0.05)
    assert 0.03 <= rejected <= 0.08, rejected
    covered = np.mean((gap.ci_low <= 0) & (gap.ci_high >= 0))
    assert covered == pytest.approx(1 - rejected)  # the CI and the p-value are one procedure
    assert 0.92 <= covered <= 0.97


def test_median_of_mcnemar_and_items_only_are_miscalibrated_under_seed_luck():
    # seed luck 0.15: accuracy std over seeds ≈ 2.7 points (≈ 1.3 of it is item sampling noise)
    lucky_method, lucky_twin = simulate(11, 1000, 5, 1000, seed_luck=0.15)
    lucky = lucky_method.astype(float) - lucky_twin
    assert np.mean(old_median_mcnemar(lucky_method, lucky_twin) < 0.05) > 0.15
    assert np.mean(items_only(lucky) < 0.05) > 0.25
    assert np.mean(crossed_gap(lucky).p_value < 0.05) < 0.08
    steady_method, steady_twin = simulate(12, 1000, 5, 1000, seed_luck=0.0)
    assert np.mean(old_median_mcnemar(steady_method, steady_twin) < 0.05) < 0.01  # and far too cautious without


def test_clear_gap_is_detected_and_covered():
    shift, luck = 0.6, 0.15
    method, twin = simulate(21, 500, 5, 1000, luck, shift=shift)
    gap = crossed_gap(method.astype(float) - twin)
    truth = true_gap(luck, shift)
    assert 0.08 < truth < 0.12
    assert np.mean(gap.p_value < 0.05) > 0.95
    assert np.mean(gap.gap) == pytest.approx(truth, abs=0.005)
    assert 0.90 <= np.mean((gap.ci_low <= truth) & (gap.ci_high >= truth)) <= 0.99


def test_minimum_detectable_effect_has_the_promised_power():
    seeds, items, luck = 5, 1000, 0.15
    method, twin = simulate(31, 200, seeds, items, luck)
    null = crossed_gap(method.astype(float) - twin)
    components = [float(np.mean(values)) for values in (null.seed_variance, null.item_variance, null.residual_variance)]
    effect = minimum_detectable_effect(*components, seeds, items)
    shift = next(value for value in np.arange(0.0, 1.0, 0.002) if true_gap(luck, value) >= effect)
    method, twin = simulate(32, 1000, seeds, items, luck, shift=shift)
    power = np.mean(crossed_gap(method.astype(float) - twin).p_value < 0.05)
    assert 0.72 <= power <= 0.92, (effect, power)
    assert minimum_detectable_effect(*components, 10, items) < effect < minimum_detectable_effect(*components, 3, items)
    assert minimum_detectable_effect(*components, seeds, 4 * items) < effect


def test_minimum_detectable_effect_of_one_seed_is_the_paired_t_design():
    # items-only: (t_{0.975} + t_{0.8}) * sqrt(v / N) to within the noncentral-t correction
    effect = minimum_detectable_effect(float("nan"), 0.2, 0.0, 1, 1725)
    assert effect == pytest.approx((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * math.sqrt(0.2 / 1725), rel=0.01)
    with pytest.raises(ValueError, match="seed variance"):
        minimum_detectable_effect(float("nan"), 0.2, 0.0, 3, 1725)


# ── the results table ────────────────────────────────────────────────────────────────────────

def test_results_table_columns_and_gap_fields():
    correct = {seed: np.arange(40) < 30 + seed for seed in range(3)}
    gap = compare_with_twin({seed: frame(correct[seed]) for seed in range(3)},
                            {seed: frame(np.arange(40) < 20) for seed in range(3)})
    table = results_table(make_runs(), {"elmo": gap})
    expected = ["method", "n_seeds"] + [f"{metric}_{statistic}" for metric in METRICS
                                        for statistic in ("mean", "std", "min", "max")]
    assert list(table.columns) == expected + ["p_value_vs_random", "gap_vs_random", "gap_ci_low", "gap_ci_high",
                                              "mde_vs_random", "paired_seeds", "paired_items",
                                              "gap_test"]
    elmo, random = table.set_index("method").loc["elmo"], table.set_index("method").loc["random"]
    assert elmo["gap_vs_random"] == pytest.approx(11 / 40)  # (30, 31, 32) right against 20, of 40
    assert elmo["gap_ci_low"] < elmo["gap_vs_random"] < elmo["gap_ci_high"]
    assert elmo["p_value_vs_random"] == gap.p_value and elmo["paired_seeds"] == 3 and elmo["gap_test"] == CROSSED
    assert elmo["mde_vs_random"] > 0
    assert math.isnan(random["p_value_vs_random"]) and math.isnan(random["gap_vs_random"])
    assert elmo["paired_items"] == 40
    assert random["paired_seeds"] == random["paired_items"] == 0 and pd.isna(random["gap_test"])
