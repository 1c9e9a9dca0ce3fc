"""The crossed (seeds x items) gap test against hand-computed answers, a direct ANOVA, statsmodels'
mixed model and simulations with known truth: calibration under the null (seed luck, item effects,
tied seeds), power at the MDE, CI coverage, the comparison with a deterministic baseline, the results
table, and why the old median-of-McNemar and an items-only test were not valid. Simulations are
seeded and vectorised over replicates."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.stats.aggregate import aggregate_runs
from benchmarks.stats.gaps import (
    CROSSED,
    METRICS,
    NO_SEED_REPLICATION,
    compare_with_baseline,
    compare_with_twin,
    crossed_gap,
    minimum_detectable_effect,
    rejection_probability,
)
from benchmarks.stats.multiplicity import holm
from benchmarks.stats.results_columns import Evidence, results_frame
from tests.benchmarks.stats_inputs import frame, make_runs

# ── the crossed estimate on hand-computed cases and against independent computations ──────────


def test_crossed_gap_matches_the_hand_computed_anova():
    differences = np.array([[1, 0, 1, 0], [0, 0, 1, -1]])
    # mean 0.25; seed means 0.5, 0; item means 0.5, 0, 1, -0.5; residuals all ±0.25
    # MS_seed = 4 * 0.125 = 0.5, MS_item = 2 * 1.25 / 3 = 5/6, MS_res = 8 * 0.0625 / 3 = 1/6
    combined = 0.5 + 5 / 6 - 1 / 6
    df = combined / (0.5 / 1 + (5 / 6) / 3 + (1 / 6) / 3)  # each mean square's df, weighted by its share
    error = math.sqrt(combined / 8)
    gap = crossed_gap(differences)
    assert gap.procedure == CROSSED and (gap.seeds, gap.items) == (2, 4)
    assert gap.gap == 0.25
    assert gap.standard_error == pytest.approx(error)
    assert gap.degrees_of_freedom == pytest.approx(df) and df == pytest.approx(1.4)
    assert gap.p_value == pytest.approx(2 * stats.t.sf(0.25 / error, df))
    assert (gap.ci_low, gap.ci_high) == (-1.0, 1.0)  # 0.25 ± 2.2, clipped to the possible gaps
    half = crossed_gap(differences, confidence=0.5)
    width = stats.t.ppf(0.75, df) * error
    assert (half.ci_low, half.ci_high) == (pytest.approx(0.25 - width), pytest.approx(0.25 + width))
    assert (gap.seed_variance, gap.item_variance, gap.residual_variance) == (
        pytest.approx((0.5 - 1 / 6) / 4),
        pytest.approx((5 / 6 - 1 / 6) / 2),
        pytest.approx(1 / 6),
    )


def test_negative_components_are_truncated_at_zero():
    differences = np.array([[1, 0, -1, 1], [0, 1, 1, -1]])
    # seed means tie (1/4, 1/4): MS_seed = 0; item means 0.5, 0.5, 0, 0: MS_item = 1/6; MS_res = 5/3.
    # Both components are negative: the variance is the residual's alone, 5/3 / 8, not 0.
    gap = crossed_gap(differences)
    assert (gap.seed_variance, gap.item_variance, gap.residual_variance) == (0.0, 0.0, pytest.approx(5 / 3))
    assert gap.standard_error == pytest.approx(math.sqrt(5 / 3 / 8))
    assert gap.degrees_of_freedom == pytest.approx((5 / 3) / (0 / 1 + (1 / 6) / 3 + (5 / 3) / 3))
    assert gap.p_value == pytest.approx(2 * stats.t.sf(0.25 / math.sqrt(5 / 24), 30 / 11))


def direct_anova(d: list[list[float]]) -> dict:
    """The crossed test written out with loops over one (S, N) table, from the textbook sums of squares."""
    seeds, items = len(d), len(d[0])
    grand = sum(sum(row) for row in d) / (seeds * items)
    seed_means = [sum(row) / items for row in d]
    item_means = [sum(d[s][i] for s in range(seeds)) / seeds for i in range(items)]
    ss_seed = items * sum((mean - grand) ** 2 for mean in seed_means)
    ss_item = seeds * sum((mean - grand) ** 2 for mean in item_means)
    ss_total = sum((d[s][i] - grand) ** 2 for s in range(seeds) for i in range(items))
    dof = (seeds - 1, items - 1, (seeds - 1) * (items - 1))
    ms_seed, ms_item, ms_res = ss_seed / dof[0], ss_item / dof[1], (ss_total - ss_seed - ss_item) / dof[2]
    seed_part, item_part = max(ms_seed - ms_res, 0.0), max(ms_item - ms_res, 0.0)
    variance = (seed_part + item_part + ms_res) / (seeds * items)
    df = (seed_part + item_part + ms_res) / (ms_seed / dof[0] + ms_item / dof[1] + ms_res / dof[2])
    return {
        "gap": grand,
        "standard_error": math.sqrt(variance),
        "degrees_of_freedom": df,
        "seed_variance": seed_part / items,
        "item_variance": item_part / seeds,
        "residual_variance": ms_res,
    }


def test_crossed_gap_matches_a_direct_anova_with_and_without_truncation():
    generator = np.random.default_rng(5)
    batch = generator.integers(-1, 2, size=(40, 3, 25)).astype(float)
    batch[:10] += generator.integers(-1, 2, size=(10, 3, 1))  # seed effects: some components kept, some not
    gaps = crossed_gap(batch)  # fields (40,)
    truncated = 0
    for index in range(len(batch)):
        expected = direct_anova(batch[index].tolist())
        one = crossed_gap(batch[index])
        for field, value in expected.items():
            assert getattr(one, field) == pytest.approx(value), field
            assert getattr(gaps, field)[index] == pytest.approx(value), field
        truncated += expected["seed_variance"] == 0
    assert 5 < truncated < 35  # both branches were exercised


def test_variance_components_and_standard_error_match_statsmodels_mixed_model():
    """REML on a balanced crossed design equals the ANOVA estimate when every component is positive;
    the GLS intercept is the grand mean and its standard error the crossed test's."""
    from statsmodels.regression.mixed_linear_model import MixedLM

    generator = np.random.default_rng(8)
    seeds, items = 5, 40
    values = (
        0.3
        + generator.normal(0, 0.6, (seeds, 1))
        + generator.normal(0, 0.8, (1, items))
        + generator.normal(0, 1.0, (seeds, items))
    )
    data = pd.DataFrame(
        {
            "d": values.ravel(),
            "seed": np.repeat(np.arange(seeds), items),
            "item": np.tile(np.arange(items), seeds),
            "everything": 0,
        }
    )
    model = MixedLM.from_formula(
        "d ~ 1", data, groups="everything", re_formula="0", vc_formula={"seed": "0 + C(seed)", "item": "0 + C(item)"}
    )  # crossed effects
    fit = model.fit(reml=True, method="lbfgs")
    components = dict(zip(model.exog_vc.names, fit.vcomp))
    gap = crossed_gap(values)
    assert gap.seed_variance > 0 and gap.item_variance > 0
    assert components["seed"] == pytest.approx(gap.seed_variance, rel=1e-3)
    assert components["item"] == pytest.approx(gap.item_variance, rel=1e-3)
    assert fit.scale == pytest.approx(gap.residual_variance, rel=1e-3)
    assert fit.fe_params.iloc[0] == pytest.approx(gap.gap)
    assert fit.bse_fe.iloc[0] == pytest.approx(gap.standard_error, rel=1e-3)


def test_one_seed_pair_gives_the_gap_without_a_test():
    generator = np.random.default_rng(3)
    differences = generator.integers(-1, 2, size=(1, 200)).astype(float)
    gap = crossed_gap(differences)
    assert gap.procedure == NO_SEED_REPLICATION and gap.seeds == 1
    assert gap.gap == pytest.approx(differences.mean())
    for field in ("ci_low", "ci_high", "p_value", "standard_error", "degrees_of_freedom", "seed_variance"):
        assert math.isnan(getattr(gap, field)), field
    with pytest.raises(ValueError, match="no seed replication"):
        minimum_detectable_effect(float("nan"), 0.2, 0.0, 1, 1725)


def test_degenerate_differences():
    identical = crossed_gap(np.zeros((3, 50)))  # e.g. method and twin both collapsed to one class
    assert identical.gap == 0.0 and identical.p_value == 1.0
    assert identical.standard_error == pytest.approx(1 / 150)  # floored at the gap's resolution, 1 / (S N)
    effect = minimum_detectable_effect(
        identical.seed_variance, identical.item_variance, identical.residual_variance, 3, 50
    )
    assert effect > 3 / 150  # the same floor: no design detects a gap finer than a few items
    always_better = crossed_gap(np.ones((3, 50)))  # method always right, twin always wrong
    assert always_better.gap == 1.0 and always_better.p_value < 1e-3 and always_better.ci_low > 0.9
    with pytest.raises(ValueError):
        crossed_gap(np.ones((2, 1)))


# ── simulations with known truth ─────────────────────────────────────────────────────────────


def simulate(
    seed: int, replicates: int, seeds: int, items: int, seed_luck: float, shift: float = 0.0, item_split: float = 0.0
):
    """Correctness (R, S, N) of a method and its twin: latent = ability + item difficulty + run luck
    (one per run) + per-item-per-run noise; right when the latent is > 0. The difficulty is shared by
    both arms except an ``item_split`` part of its own per arm (equal accuracy, different hard items:
    an item effect in the differences under the null); its total sd stays 1.5."""
    generator = np.random.default_rng(seed)

    def normal(scale: float, shape: tuple) -> np.ndarray:
        return scale * generator.standard_normal(shape, dtype=np.float32)  # float32: half the memory

    shared = normal(1.5, (replicates, 1, items))
    scale = 1.5 / math.sqrt(1.5**2 + item_split**2)

    def runs(ability: float) -> np.ndarray:
        own = normal(item_split, (replicates, 1, items)) if item_split else 0.0
        latent = normal(1.0, (replicates, seeds, items))
        latent += ability + scale * (shared + own) + normal(seed_luck, (replicates, seeds, 1))
        return latent > 0

    return runs(1.0 + shift), runs(1.0)


def true_gap(seed_luck: float, shift: float) -> float:
    """Population accuracy gap of ``simulate``: E Phi((a + X) / sqrt(1 + luck^2)), X ~ N(0, 1.5^2)."""
    scale = math.sqrt(1.0 + seed_luck**2 + 1.5**2)
    return stats.norm.cdf((1.0 + shift) / scale) - stats.norm.cdf(1.0 / scale)


def mean_squares(differences: np.ndarray):
    """``(gap, MS_seed, MS_item, MS_res)`` of a batch (R, S, N), each (R,)."""
    seeds, items = differences.shape[-2:]
    grand = differences.mean(axis=(-2, -1))
    seed_means, item_means = differences.mean(axis=-1), differences.mean(axis=-2)
    ms_seed, ms_item = items * seed_means.var(axis=-1, ddof=1), seeds * item_means.var(axis=-1, ddof=1)
    residual = differences - seed_means[..., None] - item_means[..., None, :] + grand[..., None, None]
    return grand, ms_seed, ms_item, (residual**2).sum(axis=(-2, -1)) / ((seeds - 1) * (items - 1))


def untruncated_p(differences: np.ndarray) -> np.ndarray:
    """The test before truncation: (MS_seed + max(MS_item - MS_res, 0)) / (S N), Satterthwaite df. (R,)"""
    seeds, items = differences.shape[-2:]
    grand, ms_seed, ms_item, ms_res = mean_squares(differences)
    use_item = ms_item > ms_res
    combined = ms_seed + use_item * (ms_item - ms_res)
    spread = ms_seed**2 / (seeds - 1) + use_item * (ms_item**2 / (items - 1) + ms_res**2 / ((seeds - 1) * (items - 1)))
    df = np.where(combined > 0, combined**2 / np.where(spread > 0, spread, 1.0), seeds - 1.0)
    error = np.sqrt(np.maximum(combined / (seeds * items), 1.0 / (seeds * items) ** 2))
    return 2 * stats.t.sf(np.abs(grand / error), df)


def population_components(differences: np.ndarray) -> list[float]:
    """The simulation's true variance components, estimated without truncation bias: the mean over
    replicates of the unbiased ANOVA estimates, then clipped at 0 (seed, item, residual)."""
    seeds, items = differences.shape[-2:]
    _, ms_seed, ms_item, ms_res = (values.mean() for values in mean_squares(differences))
    return [max(ms_seed - ms_res, 0.0) / items, max(ms_item - ms_res, 0.0) / seeds, float(ms_res)]


NULL_SETTINGS = [
    (3, 0.0, 0.0),
    (3, 0.06, 0.0),
    (3, 0.1, 0.0),
    (3, 0.25, 0.0),
    (3, 0.0, 0.7),
    (3, 0.1, 0.7),
    (3, 0.4, 0.7),
    (5, 0.0, 0.0),
    (5, 0.15, 0.0),
    (5, 0.4, 0.7),
]


@pytest.mark.parametrize("seeds, seed_luck, item_split", NULL_SETTINGS)
def test_null_rejects_at_most_about_the_nominal_rate_and_the_ci_covers_zero(seeds, seed_luck, item_split):
    # seed luck 0.1: the accuracy of a run varies by ≈ 1.9 points over seeds (≈ 1.3 of it item noise)
    method, twin = simulate(
        seeds * 100 + int(seed_luck * 100) + int(item_split * 10), 2000, seeds, 1000, seed_luck, item_split=item_split
    )
    gap = crossed_gap(method.astype(float) - twin)  # fields (R,)
    rejected = np.mean(gap.p_value < 0.05)
    assert rejected <= 0.07, rejected
    covered = np.mean((gap.ci_low <= 0) & (gap.ci_high >= 0))
    assert covered == pytest.approx(1 - rejected)  # the CI and the p-value are one procedure
    if seed_luck >= 0.25 or (seeds == 5 and seed_luck > 0):  # where seed luck dominates: near nominal
        assert rejected >= 0.035, rejected


def test_size_under_the_normal_model_across_seed_item_and_residual_shares():
    """The test's rejection rate under a true null, computed (not simulated) over MS_seed's distribution:
    at most ~6% with 3 seed pairs, at most 5% with 5; conservative (~1%) when seeds do not vary at all."""
    residual, items = 0.3, 1000
    for seeds, ceiling in ((3, 0.06), (5, 0.051)):
        sizes = []
        for seed_share in (0.0, 0.5, 1, 2, 3, 5, 10, 30, 1000):  # N sigma^2_seed / sigma^2_res
            for item_share in (0.0, 0.05, 0.1, 0.25, 1.0, 4.0):  # S sigma^2_item / E[MS_seed]
                seed_variance = seed_share * residual / items
                item_variance = item_share * (residual + items * seed_variance) / seeds
                sizes.append(rejection_probability(0.0, seed_variance, item_variance, residual, seeds, items))
        assert max(sizes) <= ceiling, (seeds, max(sizes))
        assert min(sizes) >= 0.008 and sizes[-6] == pytest.approx(0.05, abs=0.002)  # seed luck alone: the t-test


def tied_seed_differences(seed: int, replicates: int, seeds: int, items: int, discordant: int, plus=None):
    """(R, S, N) differences whose seed gaps tie exactly: every seed pair has the same ``plus`` items at
    +1 and ``discordant - plus`` at -1, at random positions of its own. Without ``plus``, the common count
    is drawn from the null of a seed-averaged gap (round(Binomial(S K, 1/2) / S)), so the seeds carry no
    luck and the gap is noise: a valid test rejects at about alpha."""
    generator = np.random.default_rng(seed)
    if plus is None:
        plus = np.rint(generator.binomial(seeds * discordant, 0.5, replicates) / seeds).astype(int)
    plus = np.broadcast_to(np.asarray(plus), (replicates,))[:, None, None]
    rank = generator.random((replicates, seeds, items)).argsort(axis=-1).argsort(axis=-1)  # random positions
    return np.where(rank < plus, 1.0, np.where(rank < discordant, -1.0, 0.0))


def test_tied_seed_gaps_reject_at_about_the_nominal_rate():
    differences = tied_seed_differences(41, 400, 3, 1725, 190)
    assert np.all(np.ptp(differences.mean(axis=-1), axis=-1) == 0)  # the seed gaps tie exactly
    gap = crossed_gap(differences)
    assert np.all(gap.seed_variance == 0) and np.all(gap.standard_error > 0.003)  # not the floor, 1 / 5175
    rejected = np.mean(gap.p_value < 0.05)
    assert 0.025 <= rejected <= 0.085, rejected
    assert np.mean(untruncated_p(differences) < 0.05) > 0.4  # the untruncated SE collapses with the seed variance


def test_plus_100_minus_90_in_each_of_three_seed_pairs_is_not_a_gap():
    """10 more items right of 1725, the same in 3 seed pairs: the sign of 570 discordant items, +300/−270,
    z = 30 / sqrt(570) = 1.26, p ≈ 0.21 — not a gap, whatever the positions."""
    differences = tied_seed_differences(42, 300, 3, 1725, 190, plus=100)
    gap = crossed_gap(differences)
    assert np.all(gap.gap == pytest.approx(30 / (3 * 1725)))
    assert np.all(gap.p_value > 0.15) and np.all(gap.ci_low < 0)
    assert np.median(gap.p_value) == pytest.approx(2 * stats.norm.sf(30 / math.sqrt(570)), abs=0.02)
    assert np.mean(untruncated_p(differences) < 0.05) > 0.5  # the untruncated test calls it significant


def old_median_mcnemar(method: np.ndarray, twin: np.ndarray) -> np.ndarray:
    """The former p_value_vs_random: exact McNemar per seed pair, median over seeds. Returns (R,)."""
    only_method, only_twin = (method & ~twin).sum(-1), (~method & twin).sum(-1)  # (R, S)
    per_seed = np.minimum(1.0, 2 * stats.binom.cdf(np.minimum(only_method, only_twin), only_method + only_twin, 0.5))
    return np.median(per_seed, axis=-1)


def items_only(differences: np.ndarray) -> np.ndarray:
    """A naive test: paired t over items of the seed-averaged differences, seeds ignored. Returns (R,)."""
    per_item = differences.mean(axis=-2)  # (R, N)
    return stats.ttest_1samp(per_item, 0.0, axis=-1).pvalue


def test_median_of_mcnemar_and_items_only_are_miscalibrated_under_seed_luck():
    # seed luck 0.15: accuracy std over seeds ≈ 2.7 points (≈ 1.3 of it is item sampling noise)
    lucky_method, lucky_twin = simulate(11, 1000, 5, 1000, seed_luck=0.15)
    lucky = lucky_method.astype(float) - lucky_twin
    assert np.mean(old_median_mcnemar(lucky_method, lucky_twin) < 0.05) > 0.15
    assert np.mean(items_only(lucky) < 0.05) > 0.25
    assert np.mean(crossed_gap(lucky).p_value < 0.05) < 0.07
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


@pytest.mark.parametrize("seeds, luck", [(5, 0.15), (3, 0.03)])
def test_minimum_detectable_effect_has_the_promised_power(seeds, luck):
    items = 1000
    method, twin = simulate(31 + seeds, 200, seeds, items, luck)
    components = population_components(method.astype(float) - twin)
    effect = minimum_detectable_effect(*components, seeds, items)
    assert rejection_probability(effect, *components, seeds, items) == pytest.approx(0.8, abs=1e-4)
    shift = next(value for value in np.arange(0.0, 1.0, 0.002) if true_gap(luck, value) >= effect)
    method, twin = simulate(32 + seeds, 1000, seeds, items, luck, shift=shift)
    power = np.mean(crossed_gap(method.astype(float) - twin).p_value < 0.05)
    assert 0.72 <= power <= 0.9, (effect, power)
    assert minimum_detectable_effect(*components, 10, items) < effect < minimum_detectable_effect(*components, 2, items)
    assert minimum_detectable_effect(*components, seeds, 4 * items) < effect


# ── against a deterministic baseline ─────────────────────────────────────────────────────────


def simulate_against_baseline(
    seed: int, replicates: int, seeds: int, items: int, seed_luck: float, own_difficulty: float = 1.0
):
    """A method's correctness (R, S, N) and a deterministic baseline's (R, 1, N) with the same population
    accuracy: both see a shared difficulty plus one of their own per item (sd ``own_difficulty``); the
    method has seed luck and per-run noise, the baseline one fixed draw of its noise."""
    generator = np.random.default_rng(seed)

    def normal(scale: float, shape: tuple) -> np.ndarray:
        return scale * generator.standard_normal(shape, dtype=np.float32)

    shared = normal(1.2, (replicates, 1, items))
    method_own, baseline_own = (normal(own_difficulty, (replicates, 1, items)) for _ in range(2))
    ability = 1.0
    spread = 1.2**2 + own_difficulty**2 + 1.0  # difficulty and noise variance of each
    baseline_ability = ability * math.sqrt(spread / (spread + seed_luck**2))  # equal accuracy over seeds and items
    method = normal(1.0, (replicates, seeds, items))
    method += ability + shared + method_own + normal(seed_luck, (replicates, seeds, 1))
    baseline = baseline_ability + shared + baseline_own + normal(1.0, (replicates, 1, items)) > 0
    return method > 0, baseline


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy, on the naive t-test's close accuracies
@pytest.mark.parametrize("seeds, seed_luck", [(3, 0.0), (3, 0.1), (5, 0.25)])
def test_gap_to_a_deterministic_baseline_is_calibrated(seeds, seed_luck):
    """The baseline's correctness is an item property: the crossed test with the baseline repeated at
    every seed is calibrated. Treating the baseline's accuracy as a known constant (a t-test of the
    method's seed accuracies against it) ignores that the test items are a sample, and rejects far
    too often."""
    method, baseline = simulate_against_baseline(50 + seeds + int(100 * seed_luck), 2000, seeds, 1000, seed_luck)
    gap = crossed_gap(method.astype(float) - baseline)  # (R,)
    rejected = np.mean(gap.p_value < 0.05)
    assert rejected <= 0.07, rejected
    assert np.mean((gap.ci_low <= 0) & (gap.ci_high >= 0)) == pytest.approx(1 - rejected)
    assert np.all(gap.item_variance > 0)  # the baseline's item pattern is in the item component
    differences = method.astype(float) - baseline
    if seed_luck == 0:  # item effects make the baseline's accuracy on these items a sample, not a constant
        constant = stats.ttest_1samp(method.mean(axis=-1), baseline.mean(axis=-1), axis=-1).pvalue  # (R, S), (R, 1)
        assert np.mean(constant < 0.05) > 0.15
    if seed_luck >= 0.25:  # the method's seed luck moves all its items at once
        assert np.mean(items_only(differences) < 0.05) > 0.15


def test_compare_with_baseline_repeats_the_baseline_at_every_seed():
    correct = {seed: np.arange(40) < 30 + seed for seed in range(3)}
    method_runs = {seed: frame(correct[seed]) for seed in range(3)}
    baseline = frame(np.arange(40) >= 15)  # 25 of 40, other items than the method's
    shuffled = baseline.sample(frac=1.0, random_state=1)
    gap = compare_with_baseline(method_runs, shuffled)
    expected = crossed_gap(
        np.stack([correct[seed] for seed in range(3)]).astype(float) - (np.arange(40) >= 15).astype(float)
    )
    assert gap.gap == pytest.approx(expected.gap) and gap.p_value == pytest.approx(expected.p_value)
    assert gap.gap == pytest.approx((31 - 25) / 40) and gap.seeds == 3
    assert compare_with_baseline(method_runs, frame(np.ones(30, bool))) is None  # other items: no test
    assert compare_with_baseline({}, baseline) is None
    one = compare_with_baseline({0: method_runs[0]}, baseline)
    assert one.procedure == NO_SEED_REPLICATION and math.isnan(one.p_value) and one.gap == pytest.approx(5 / 40)


# ── the results table ────────────────────────────────────────────────────────────────────────

NEW_COLUMNS = [
    "p_adjusted",
    "gap_vs_tfidf",
    "gap_vs_tfidf_ci_low",
    "gap_vs_tfidf_ci_high",
    "p_vs_tfidf",
    "p_vs_tfidf_adjusted",
]


def results_table(runs: pd.DataFrame, gaps: dict, baseline_gaps: dict | None = None) -> pd.DataFrame:
    """The results columns of ``runs`` and these gaps alone (no predictions: nothing collapsed, no control)."""
    baseline_gaps = baseline_gaps or {}
    return results_frame(
        [
            Evidence(row["method"], row, gaps.get(row["method"]), baseline_gaps.get(row["method"]))
            for row in aggregate_runs(runs).to_dict("records")
        ]
    )


def test_results_table_columns_and_gap_fields():
    correct = {seed: np.arange(40) < 30 + seed for seed in range(3)}
    method_runs = {seed: frame(correct[seed]) for seed in range(3)}
    gap = compare_with_twin(method_runs, {seed: frame(np.arange(40) < 20) for seed in range(3)})
    single = compare_with_twin({0: frame(np.arange(40) < 35)}, {0: frame(np.arange(40) < 20)})
    versus_tfidf = compare_with_baseline(method_runs, frame(np.arange(40) < 25))
    runs = pd.concat([make_runs(), make_runs().assign(method="one")[:1]], ignore_index=True)
    table = results_table(runs, {"elmo": gap, "one": single}, {"elmo": versus_tfidf})
    expected = ["method", "n_seeds"] + [
        f"{metric}_{statistic}" for metric in METRICS for statistic in ("mean", "std", "min", "max")
    ]
    assert list(table.columns) == expected + [
        "p_value_vs_random",
        "collapsed_runs",
        "gap_vs_random",
        "gap_ci_low",
        "gap_ci_high",
        "mde_vs_random",
        "paired_seeds",
        "paired_items",
        "gap_test",
        "p_adjusted",
        "gap_vs_tfidf",
        "gap_vs_tfidf_ci_low",
        "gap_vs_tfidf_ci_high",
        "p_vs_tfidf",
        "p_vs_tfidf_adjusted",
        "control_ok",
        "control_reason",
        "tfidf_reference",
        "n_pretrainings",
    ]
    rows = table.set_index("method")
    elmo, random, one = rows.loc["elmo"], rows.loc["random"], rows.loc["one"]
    assert elmo["gap_vs_random"] == pytest.approx(11 / 40)  # (30, 31, 32) right against 20, of 40
    assert elmo["gap_ci_low"] < elmo["gap_vs_random"] < elmo["gap_ci_high"]
    assert elmo["p_value_vs_random"] == gap.p_value and elmo["paired_seeds"] == 3 and elmo["gap_test"] == CROSSED
    assert elmo["mde_vs_random"] > 0 and elmo["paired_items"] == 40
    assert elmo["p_adjusted"] == pytest.approx(gap.p_value)  # the one comparison with a p: Holm changes nothing
    assert elmo["gap_vs_tfidf"] == pytest.approx(6 / 40) and elmo["p_vs_tfidf"] == versus_tfidf.p_value
    assert elmo["gap_vs_tfidf_ci_low"] == versus_tfidf.ci_low and elmo["gap_vs_tfidf_ci_high"] == versus_tfidf.ci_high
    assert math.isnan(random["p_value_vs_random"]) and math.isnan(random["gap_vs_random"])
    assert random["paired_seeds"] == random["paired_items"] == 0 and pd.isna(random["gap_test"])
    assert all(math.isnan(random[column]) for column in NEW_COLUMNS)
    assert one["gap_vs_random"] == pytest.approx(15 / 40) and one["gap_test"] == NO_SEED_REPLICATION
    for column in ("p_value_vs_random", "gap_ci_low", "gap_ci_high", "mde_vs_random", "p_adjusted"):
        assert math.isnan(one[column]), column


def test_results_table_adjusts_every_twin_comparison_together():
    generator = np.random.default_rng(9)
    gaps = {}
    for index, shift in enumerate((0, 2, 4, 8)):
        twin = {seed: frame(generator.random(200) < 0.7) for seed in range(3)}
        method = {seed: frame(generator.random(200) < 0.7 + 0.02 * shift) for seed in range(3)}
        gaps[f"m{index}"] = compare_with_twin(method, twin)
    runs = pd.DataFrame(
        [(method, seed, 0.5, 0.5, 0.5, 0.5) for method in gaps for seed in range(3)],
        columns=["method", "seed"] + METRICS,
    )
    table = results_table(runs, gaps)
    assert table["p_adjusted"].to_numpy() == pytest.approx(holm([gaps[method].p_value for method in gaps]))
    assert (table["p_adjusted"] >= table["p_value_vs_random"]).all()
    # the comparisons with TF-IDF + LR: a family of their own, adjusted apart from the twins'
    versus = {method: gaps[method] for method in ("m1", "m3")}
    table = results_table(runs, gaps, baseline_gaps=versus).set_index("method")
    assert table.loc[["m1", "m3"], "p_vs_tfidf_adjusted"].to_numpy() == pytest.approx(
        holm([versus["m1"].p_value, versus["m3"].p_value])
    )
    assert table.loc[["m0", "m2"], "p_vs_tfidf_adjusted"].isna().all()


def test_rejection_probability_matches_a_simulation_of_the_normal_model():
    """The MDE's power function against the test itself on normal data with known components: size and
    power at the MDE, with few seeds, truncated components and an item effect."""
    generator = np.random.default_rng(60)
    replicates, items, residual = 2000, 300, 0.2
    for seeds, seed_variance, item_variance in ((3, 0.0, 0.0), (3, 0.0007, 0.0), (3, 0.003, 0.0008), (5, 0.002, 0.0)):
        effect = minimum_detectable_effect(seed_variance, item_variance, residual, seeds, items)
        for shift, expected in ((0.0, None), (effect, 0.8)):
            differences = (
                shift
                + generator.normal(0, math.sqrt(seed_variance), (replicates, seeds, 1))
                + generator.normal(0, math.sqrt(item_variance), (replicates, 1, items))
                + generator.normal(0, math.sqrt(residual), (replicates, seeds, items))
            )
            simulated = np.mean(crossed_gap(differences).p_value < 0.05)
            predicted = rejection_probability(shift, seed_variance, item_variance, residual, seeds, items)
            assert expected is None or predicted == pytest.approx(expected, abs=1e-4)
            assert simulated == pytest.approx(predicted, abs=0.025), (seeds, seed_variance, shift)
