"""The gap over pretraining runs × seeds × items (``benchmarks.stats.pretraining_runs``): both readings
against ``crossed_gap`` where they must agree, and simulations of the normal model with known truth —
"this recipe" calibrated when pretraining runs differ, "these checkpoints" calibrated given them, and
the between-run variance recovered. Simulations are seeded and vectorised over replicates."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from benchmarks.stats.gaps import crossed_gap, minimum_detectable_effect
from benchmarks.stats.pretraining_runs import (
    CHECKPOINTS,
    NO_RUN_REPLICATION,
    RECIPE,
    REGISTERED_RECIPE,
    checkpoints_detectable_effect,
    compare_over_pretrainings,
    nested_gap,
)

RUNS, SEEDS, ITEMS = 5, 2, 400


def simulate(
    seed: int,
    replicates: int,
    run_sd: float,
    fixed_runs: bool = False,
    seed_sd: float = 0.01,
    item_sd: float = 0.3,
    run_item_sd: float = 0.1,
    residual_sd: float = 0.5,
) -> np.ndarray:
    """Differences (B, R, S, N) under a true null: run + seed-within-run + item + run×item + residual,
    each normal with mean 0. ``fixed_runs``: the same zero-sum run effects in every replicate (the
    checkpoints at hand), the rest drawn afresh."""
    generator = np.random.default_rng(seed)

    def normal(scale: float, shape: tuple) -> np.ndarray:
        return scale * generator.standard_normal(shape, dtype=np.float32)

    shape = (replicates, RUNS, SEEDS, ITEMS)
    if fixed_runs:
        runs = run_sd * np.linspace(-1.4, 1.4, RUNS, dtype=np.float32)[None, :, None, None]  # sum 0, sd ~ run_sd
    else:
        runs = normal(run_sd, (replicates, RUNS, 1, 1))
    return (
        runs
        + normal(seed_sd, (replicates, RUNS, SEEDS, 1))
        + normal(item_sd, (replicates, 1, 1, ITEMS))
        + normal(run_item_sd, (replicates, RUNS, 1, ITEMS))
        + normal(residual_sd, shape)
    )


def test_the_registered_reading_is_crossed_gap_over_each_runs_mean_and_one_run_is_crossed_gap_itself():
    differences = np.random.default_rng(0).integers(-1, 2, (RUNS, SEEDS, 50)).astype(float)
    gaps = nested_gap(differences)
    over_runs = crossed_gap(differences.mean(axis=1))
    assert (gaps.registered.gap, gaps.registered.p_value, gaps.registered.ci_low) == (
        over_runs.gap,
        over_runs.p_value,
        over_runs.ci_low,
    )
    assert gaps.recipe.gap == over_runs.gap
    assert gaps.recipe.ci_high - gaps.recipe.ci_low >= gaps.checkpoints.ci_high - gaps.checkpoints.ci_low
    assert gaps.registered.procedure == REGISTERED_RECIPE
    assert gaps.recipe.procedure == RECIPE and gaps.checkpoints.procedure == CHECKPOINTS
    assert (gaps.runs, gaps.seeds_per_run) == (RUNS, SEEDS)
    one = nested_gap(differences[:1])
    alone = crossed_gap(differences[0])
    assert one.checkpoints.p_value == pytest.approx(alone.p_value)
    assert one.checkpoints.standard_error == pytest.approx(alone.standard_error)
    assert one.checkpoints.degrees_of_freedom == pytest.approx(alone.degrees_of_freedom)
    assert one.recipe.procedure == NO_RUN_REPLICATION and np.isnan(one.recipe.p_value)
    assert np.isnan(one.between_run_variance)


def test_runs_that_differ_widen_the_recipe_reading_not_the_checkpoints_one():
    items = np.random.default_rng(1).normal(0, 0.3, 200)
    differences = np.stack([np.stack([items + shift] * 2) for shift in (-0.1, 0.1, 0.0, 0.05, -0.05)])  # (5, 2, N)
    differences += np.random.default_rng(2).normal(0, 0.2, differences.shape)
    gaps = nested_gap(differences)
    assert gaps.recipe.standard_error > 1.5 * gaps.checkpoints.standard_error
    assert gaps.recipe.degrees_of_freedom < gaps.checkpoints.degrees_of_freedom  # the runs give the df
    assert gaps.between_run_variance == pytest.approx(np.var([-0.1, 0.1, 0.0, 0.05, -0.05], ddof=1), rel=0.3)


@pytest.mark.parametrize("run_sd", [0.0, 0.02, 0.05])
def test_this_recipe_rejects_a_true_null_at_about_the_nominal_rate_when_pretraining_runs_differ(run_sd):
    gaps = nested_gap(simulate(int(100 * run_sd), 2000, run_sd))
    rejected = np.mean(gaps.recipe.p_value < 0.05)
    assert rejected <= 0.07, rejected
    if run_sd >= 0.02:  # where the runs matter: near nominal
        assert rejected >= 0.035, rejected
    if run_sd >= 0.05:  # where they dominate, the checkpoints reading is no test of the recipe
        assert np.mean(gaps.checkpoints.p_value < 0.05) > 0.15


@pytest.mark.parametrize("seed_sd", [0.03, 0.15])
def test_these_checkpoints_reject_a_true_null_at_about_the_nominal_rate_given_the_runs(seed_sd):
    gaps = nested_gap(simulate(11, 2000, 0.05, fixed_runs=True, seed_sd=seed_sd))
    rejected = np.mean(gaps.checkpoints.p_value < 0.05)
    assert rejected <= 0.07, rejected
    if seed_sd >= 0.15:  # where seed luck dominates: near nominal (like crossed_gap, cautious otherwise)
        assert rejected >= 0.035, rejected
    # the standard error is the spread of the gap over replicates, not a multiple of it
    assert np.std(gaps.checkpoints.gap) / np.mean(gaps.checkpoints.standard_error) == pytest.approx(1.0, abs=0.1)
    covered = np.mean((gaps.checkpoints.ci_low <= 0) & (gaps.checkpoints.ci_high >= 0))
    assert covered == pytest.approx(1 - rejected)
    assert np.mean(gaps.recipe.p_value < 0.05) < rejected  # over runs: these runs' spread counts as noise


@pytest.mark.parametrize("seed_sd", [0.02, 0.2])
def test_the_checkpoints_mde_has_the_promised_power_given_the_runs(seed_sd):
    """At the MDE ``checkpoints_detectable_effect`` gives from the true components (seeds nested in
    the runs: R (S - 1) seed degrees of freedom), the checkpoints reading rejects about 80% of the time."""
    components = {"seed_sd": seed_sd, "item_sd": 0.3, "run_item_sd": 0.0, "residual_sd": 0.5}
    truth = nested_gap(np.zeros((RUNS, SEEDS, ITEMS)))
    truth = replace(
        truth,
        checkpoints=replace(
            truth.checkpoints, seed_variance=seed_sd**2, item_variance=0.3**2, residual_variance=0.5**2
        ),
    )
    effect = checkpoints_detectable_effect(truth)
    gaps = nested_gap(simulate(21, 2000, 0.05, fixed_runs=True, **components) + effect)
    power = np.mean(gaps.checkpoints.p_value < 0.05)
    assert 0.75 <= power <= 0.85, (effect, power)  # with RS - 1 seed df: 0.72 at seed_sd 0.2
    crossed_df = minimum_detectable_effect(seed_sd**2, 0.3**2, 0.5**2, RUNS * SEEDS, ITEMS)
    assert effect >= crossed_df  # fewer seed degrees of freedom than RS - 1 seed pairs would give


def test_the_between_run_variance_is_recovered_on_average():
    gaps = nested_gap(simulate(3, 1000, 0.03))
    assert np.mean(gaps.between_run_variance) == pytest.approx(0.03**2, rel=0.2)


def frame(correct: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {"id1": np.arange(len(correct)), "id2": np.arange(len(correct)), "label": 1, "pred": correct.astype(int)}
    )


def test_compare_over_pretrainings_pairs_each_twin_cell_with_the_run_of_its_seed():
    rng = np.random.default_rng(4)
    correct = {seed: rng.random(300) < 0.7 for seed in range(6)}
    twin = {seed: rng.random(300) < 0.6 for seed in range(6)}
    method = {(seed // 2, seed): frame(correct[seed]) for seed in range(6)}  # run r has seeds 2r, 2r+1
    gaps = compare_over_pretrainings(method, {seed: frame(values) for seed, values in twin.items()})
    expected = np.stack(
        [[correct[seed].astype(float) - twin[seed] for seed in (2 * run, 2 * run + 1)] for run in range(3)]
    )
    assert gaps.runs == 3 and gaps.seeds_per_run == 2
    assert gaps.recipe.p_value == pytest.approx(nested_gap(expected).recipe.p_value)
    with pytest.raises(ValueError, match="unequal numbers of paired seeds"):
        compare_over_pretrainings(method, {seed: frame(twin[seed]) for seed in range(5)})
    with pytest.raises(ValueError, match="seed 1 under pretraining runs"):
        compare_over_pretrainings({**method, (2, 1): frame(correct[1])}, {0: frame(twin[0])})
    assert compare_over_pretrainings(method, {9: frame(twin[0])}) is None


def test_the_results_table_reads_a_method_pretrained_several_times_over_its_runs():
    from benchmarks.report.results_table import build_results

    rng = np.random.default_rng(5)
    rows, predictions = [], {}

    def add(method, kind, seed, correct, encoder_run, control=""):
        run_id = f"{method}/{seed}"
        predictions[run_id] = frame(correct)
        rows.append(
            {
                "run_id": run_id,
                "method": method,
                "seed": seed,
                "kind": kind,
                "control": control,
                "encoder_run": encoder_run,
                "test_acc": correct.mean(),
            }
        )

    for seed in range(6):
        add("m", "pretrained", seed, rng.random(300) < 0.75, f"pretrain-{seed // 2}", control="twin")
        add("twin", "random", seed, rng.random(300) < 0.6, f"pretrain-{seed // 2}")
        add("once", "pretrained", seed, rng.random(300) < 0.75, "pretrain-0", control="twin")
    results = build_results(pd.DataFrame(rows), predictions).set_index("method")
    method = {(seed // 2, seed): predictions[f"m/{seed}"] for seed in range(6)}
    expected = compare_over_pretrainings(method, {seed: predictions[f"twin/{seed}"] for seed in range(6)})
    assert results.loc["m", "n_pretrainings"] == 3 and results.loc["once", "n_pretrainings"] == 1
    assert pd.isna(results.loc["twin", "n_pretrainings"])
    assert results.loc["m", "gap_test"] == RECIPE and results.loc["m", "paired_seeds"] == 3  # runs
    assert results.loc["m", "p_value_vs_random"] == pytest.approx(expected.recipe.p_value)
    assert results.loc["m", "checkpoints_p"] == pytest.approx(expected.checkpoints.p_value)
    assert results.loc["m", "between_run_sd"] == pytest.approx(np.sqrt(expected.between_run_variance))
    assert results.loc["m", "checkpoints_mde"] == pytest.approx(checkpoints_detectable_effect(expected))
    assert pd.isna(results.loc["once", "checkpoints_mde"])
    assert results.loc["once", "gap_test"] == "seeds x items" and pd.isna(results.loc["once", "checkpoints_p"])


def comparison_remarks(runs: pd.DataFrame | None = None, **columns) -> list[str]:
    """The report's remarks on one method ``m`` (6 seeds, a gap of +5 points over 3 units of
    ``paired_seeds``) beside its twin, with ``columns`` added to the results table; ``runs``: the
    per-run table (default: one cell each)."""
    from benchmarks.report.remarks import remarks

    if runs is None:
        runs = pd.DataFrame(
            {"method": ["m", "twin"], "kind": ["pretrained", "random"], "control": ["twin", ""], "seed": [0, 0]}
        )
    table = pd.DataFrame(
        {
            "method": ["m", "twin"],
            "n_seeds": [6, 6],
            "test_acc_mean": [0.75, 0.7],
            "gap_vs_random": [0.05, np.nan],
            "gap_ci_low": [0.01, np.nan],
            "gap_ci_high": [0.09, np.nan],
            "p_value_vs_random": [0.03, np.nan],
            "mde_vs_random": [0.04, np.nan],
            "paired_seeds": [3, 0],
            "paired_items": [300, 0],
            **columns,
        }
    )
    return remarks(table, runs)


def test_the_report_gives_every_reading_of_a_method_pretrained_several_times():
    (line,) = [
        remark
        for remark in comparison_remarks(
            n_pretrainings=[3, np.nan],
            checkpoints_ci_low=[0.03, np.nan],
            checkpoints_ci_high=[0.07, np.nan],
            checkpoints_p=[0.001, np.nan],
            checkpoints_p_adjusted=[0.004, np.nan],
            between_run_sd=[0.012, np.nan],
            between_run_sd_upper=[0.031, np.nan],
            mde_at_sd_upper=[0.055, np.nan],
            registered_ci_low=[0.02, np.nan],
            registered_ci_high=[0.08, np.nan],
            registered_p=[0.01, np.nan],
            registered_p_adjusted=[0.03, np.nan],
            checkpoints_mde=[0.02, np.nan],
            p_adjusted=[0.06, np.nan],
        )
        if "pretraining runs" in remark
    ]
    assert line == (
        "`m` over 3 pretraining runs: this recipe (runs random, the headline) +5.0 points (95% CI +1.0 to "
        "+9.0, p = 0.03, Holm p 0.06, MDE 4.0 points); these checkpoints (runs fixed) CI +3.0 to +7.0, "
        "p = 0.001, Holm p 0.004, MDE 2.0 points; the gap's SD between pretraining runs 1.2 points (one-sided "
        "95% upper bound 3.1; MDE 5.5 points there); sensitivity, study v3's registered test (run variance "
        "truncated at 0, chosen before the results; the floor replaced it after they were seen): CI +2.0 to "
        "+8.0, p = 0.01, Holm p 0.03."
    )
    assert "vary less than their seeds" not in line and "beyond seed noise" not in line


def test_a_gap_read_over_runs_names_runs_not_seed_pairs():
    """``paired_seeds`` counts pretraining runs where the gap is read over them: the report says runs."""
    text = "\n".join(comparison_remarks(gap_test=[RECIPE, None]))
    assert "3 pretraining run(s) × 300 test items" in text
    assert "seed pair" not in text


def test_the_checkpoints_reading_is_adjusted_over_the_registered_family_beside_its_p():
    from benchmarks.stats.multiplicity import holm
    from benchmarks.stats.preregistration import adjust_registered

    table = pd.DataFrame(
        {
            "method": ["a", "b", "one-run", "exploratory"],
            "p_value_vs_random": [0.01, 0.2, 0.03, 0.04],
            "checkpoints_p": [0.001, 0.3, np.nan, 0.02],
            "between_run_sd": [0.01, 0.02, np.nan, 0.0],
        }
    )
    adjusted, _ = adjust_registered(table, ("a", "b", "one-run", "not-run"))
    columns = list(adjusted.columns)
    assert columns[columns.index("checkpoints_p") + 1] == "checkpoints_p_adjusted"
    expected = holm([0.001, 0.3, 1.0, 1.0])  # one pretraining run or not run yet: p = 1 in the family
    shown = adjusted.set_index("method")["checkpoints_p_adjusted"]
    assert shown[["a", "b"]].tolist() == pytest.approx(expected[:2])
    assert shown[["one-run", "exploratory"]].isna().all()


def test_the_report_lists_the_gap_of_each_pretraining_run_in_seed_order():
    from benchmarks.report.remarks import gaps_by_pretraining_run

    runs = pd.DataFrame(
        {
            "method": ["m"] * 4 + ["twin"] * 4,
            "kind": ["pretrained"] * 4 + ["random"] * 4,
            "control": ["twin"] * 4 + [""] * 4,
            "seed": [2, 3, 0, 1, 0, 1, 2, 3],
            "encoder_run": ["b", "b", "a", "a", "a", "a", "a", "a"],
            "test_acc": [0.70, 0.72, 0.80, 0.78, 0.70, 0.70, 0.70, 0.68],
        }
    )
    assert gaps_by_pretraining_run("m", runs) == pytest.approx([0.09, 0.02])  # run "a" holds seeds 0-1
    remarks = comparison_remarks(
        runs,
        n_pretrainings=[2, np.nan],
        checkpoints_ci_low=[0.02, np.nan],
        checkpoints_ci_high=[0.09, np.nan],
        checkpoints_p=[0.01, np.nan],
        between_run_sd=[0.03, np.nan],
    )
    (line,) = [remark for remark in remarks if "pretraining runs:" in remark]
    assert "; the gap by pretraining run (in seed order) +9.0, +2.0; the gap's SD between pretraining runs 3.0" in line
