"""The headline reading over pretraining runs on study v3's own shape (5 runs × 2 seeds × 1,725 test
items), simulated through its sufficient statistics: under the normal model of
``benchmarks.stats.pretraining_runs`` the gap and the five mean squares are independent, the gap
normal and each mean square its expectation times a chi-square over its degrees of freedom. The
seed, item, run × item and residual components are v3's own, estimated from the committed
predictions of GPT frozen (attn) and GPT fine-tuned (cls), 100% of the labels (the recomputation
test's reading of ``results/families-v3/``, rounded); the between-run SD is set to 0, 0.4, 0.8 and
1.5 points. Seeded, vectorised over replications."""

import numpy as np
import pytest
from scipy import stats

from benchmarks.stats.pretraining_runs import (
    NestedMeanSquares,
    between_run_bounds,
    checkpoints_reading,
    mean_squares,
    nested_gap,
    recipe_reading,
)

RUNS, SEEDS, ITEMS = 5, 2, 1725
REPLICATIONS = 20_000
# variance components of d = pretrained - twin correctness (fraction^2): seed within run, item, run x item, residual
V3_COMPONENTS = {
    "gpt-frozen": {"seed": 5.9e-05, "item": 0.0342, "run_item": 0.0047, "residual": 0.2077},
    "gpt-finetuned": {"seed": 6.7e-05, "item": 0.0117, "run_item": 0.0120, "residual": 0.0671},
}
RUN_SDS = (0.0, 0.004, 0.008, 0.015)  # between-run SD of the gap: 0, 0.4, 0.8, 1.5 points


def simulate(components: dict, run_sd: float, gap: float, seed: int) -> NestedMeanSquares:
    """``REPLICATIONS`` draws of the gap and the mean squares of a (RUNS, SEEDS, ITEMS) design."""
    generator = np.random.default_rng(seed)
    residual = components["residual"]
    expected = {
        "run": residual + ITEMS * components["seed"] + SEEDS * components["run_item"] + SEEDS * ITEMS * run_sd**2,
        "seed": residual + ITEMS * components["seed"],
        "item": residual + SEEDS * components["run_item"] + RUNS * SEEDS * components["item"],
        "run_item": residual + SEEDS * components["run_item"],
        "residual": residual,
    }
    df = {
        "run": RUNS - 1,
        "seed": RUNS * (SEEDS - 1),
        "item": ITEMS - 1,
        "run_item": (RUNS - 1) * (ITEMS - 1),
        "residual": RUNS * (SEEDS - 1) * (ITEMS - 1),
    }
    squares = {name: expected[name] * generator.chisquare(df[name], REPLICATIONS) / df[name] for name in expected}
    spread = np.sqrt((expected["run"] + expected["item"] - expected["run_item"]) / (RUNS * SEEDS * ITEMS))
    gaps = gap + spread * generator.standard_normal(REPLICATIONS)
    return NestedMeanSquares(gaps, **squares, runs=RUNS, seeds=SEEDS, items=ITEMS)


CASES = [(name, run_sd) for name in V3_COMPONENTS for run_sd in RUN_SDS]


@pytest.mark.parametrize("name, run_sd", CASES)
def test_the_headline_rejects_a_true_null_at_about_alpha_on_v3s_shape(name, run_sd):
    squares = simulate(V3_COMPONENTS[name], run_sd, 0.0, seed=int(1000 * run_sd) + len(name))
    rejected = np.mean(recipe_reading(squares).p_value < 0.05)
    assert 0.025 <= rejected <= 0.06, rejected


@pytest.mark.parametrize("name, run_sd", CASES)
def test_the_headline_ci_covers_a_true_gap_about_95_percent_of_the_time_on_v3s_shape(name, run_sd):
    truth = 0.014
    squares = simulate(V3_COMPONENTS[name], run_sd, truth, seed=7 + int(1000 * run_sd) + len(name))
    reading = recipe_reading(squares)
    covered = np.mean((reading.ci_low <= truth) & (truth <= reading.ci_high))
    assert 0.93 <= covered <= 0.975, covered


@pytest.mark.parametrize("name, run_sd", CASES)
def test_the_headline_ci_is_never_narrower_than_the_checkpoints_one(name, run_sd):
    squares = simulate(V3_COMPONENTS[name], run_sd, 0.0, seed=11 + int(1000 * run_sd))
    recipe, checkpoints = recipe_reading(squares), checkpoints_reading(squares)
    assert np.all(recipe.ci_high - recipe.ci_low >= checkpoints.ci_high - checkpoints.ci_low - 1e-12)
    assert not np.any((recipe.p_value < 0.05) & (checkpoints.p_value >= 0.05))  # no claim the runs-fixed reading lacks


@pytest.mark.parametrize("name, run_sd", [case for case in CASES if case[1] > 0])
def test_the_between_run_sd_upper_bound_covers_the_true_sd_about_95_percent_of_the_time(name, run_sd):
    squares = simulate(V3_COMPONENTS[name], run_sd, 0.0, seed=13 + int(1000 * run_sd))
    _, upper = between_run_bounds(squares)
    covered = np.mean(run_sd**2 <= upper)
    assert 0.93 <= covered <= 0.99, covered


def test_the_registered_truncation_was_too_narrow_where_runs_do_not_differ():
    """The defect the floor removes: with the run component truncated at 0 against the run × item
    interaction (study v3's registered test), the gap's CI is the narrower of the two readings in
    most replications, and the between-run variance is 0 in about half."""
    squares = simulate(V3_COMPONENTS["gpt-finetuned"], 0.0, 0.0, seed=17)
    run_term = np.maximum(squares.run, squares.run_item)  # the registered reading's, in R S N units
    checkpoints = checkpoints_reading(squares)
    narrower = run_term + squares.item - squares.run_item < checkpoints.standard_error**2 * RUNS * SEEDS * ITEMS
    assert narrower.mean() > 0.3
    assert np.mean(between_run_bounds(squares)[0] == 0) > 0.4


def test_the_sufficient_statistics_are_those_of_the_items_and_the_readings_agree():
    """``nested_gap`` on a (R, S, N) array is ``recipe_reading`` and ``checkpoints_reading`` on its
    mean squares, and those follow their expectations under the normal model (small N)."""
    generator = np.random.default_rng(19)
    replicates, items = 400, 60
    d = (
        0.01 * generator.standard_normal((replicates, RUNS, 1, 1))
        + 0.05 * generator.standard_normal((replicates, RUNS, SEEDS, 1))
        + 0.2 * generator.standard_normal((replicates, 1, 1, items))
        + 0.1 * generator.standard_normal((replicates, RUNS, 1, items))
        + 0.4 * generator.standard_normal((replicates, RUNS, SEEDS, items))
    )
    squares = mean_squares(d)
    gaps = nested_gap(d)
    np.testing.assert_allclose(gaps.recipe.ci_low, recipe_reading(squares).ci_low)
    np.testing.assert_allclose(gaps.checkpoints.p_value, checkpoints_reading(squares).p_value)
    expected = {
        "run": 0.16 + items * 0.0025 + SEEDS * 0.01 + SEEDS * items * 0.0001,
        "seed": 0.16 + items * 0.0025,
        "item": 0.16 + SEEDS * 0.01 + RUNS * SEEDS * 0.04,
        "run_item": 0.16 + SEEDS * 0.01,
        "residual": 0.16,
    }
    for name, value in expected.items():
        observed = getattr(squares, name)
        assert observed.mean() == pytest.approx(value, rel=4 * observed.std() / value / np.sqrt(replicates) + 0.01)
    assert stats.ttest_1samp(squares.gap, 0.0).pvalue > 0.001
