"""The gap to the twin when pretraining itself is a random variable: R pretraining runs of one
recipe, S head seeds in each (distinct across runs), N test items. The twin has no run level: its
cell at seed s (its own random init) pairs with the pretrained cell (run, s), so

    d[r, s, i] = score_pretrained[r, s, i] - score_twin[s, i]
               = mu + run_r + seed_(r)s + item_i + (run x item)_ri + residual_rsi,

seeds nested in runs, items crossed with both; the scores are the task's per-item ones
(``pairing.item_scores``: correctness, or a correlation's jackknife share). Every reading comes from
the mean squares of this balanced design (``NestedMeanSquares``), with ``crossed_gap``'s resolution
floor:

- **this recipe** (runs random: what another pretraining of the recipe would give, the headline):
  ``R S N Var(mean d) = E[MS_run] + E[MS_item] - E[MS_run x item]``. Without a run effect
  ``E[MS_run] = E[MS_seed] + E[MS_run x item] - E[MS_residual]`` (the within-run seed variation),
  so MS_run is floored there, not at MS_run x item: a run component estimated below the seeds'
  own spread is noise, and truncating it at 0 against the items would make the reading narrower
  than the one it generalises. Satterthwaite's degrees of freedom combine the run term on R - 1
  (the floor's own where it binds) with the item terms; and since the runs add a level to "these
  checkpoints", an interval narrower than theirs is replaced by theirs.
- **these checkpoints** (runs fixed: the R checkpoints at hand, comparable with a study that
  pretrained once): ``R S N Var = E[MS_seed within run] + E[MS_item] - E[MS_residual]``, with
  R (S - 1) seed degrees of freedom in Satterthwaite's combination. With one run it is
  ``crossed_gap`` itself.
- **the registered reading** (study v3's pre-registered test, kept as a sensitivity line):
  ``crossed_gap`` on each run's mean over its seeds, the run component truncated at 0.

The between-run variance is ``(MS_run - floor) / (S N)``, truncated at 0, with a one-sided 95%
upper bound by the modified large-sample method (Graybill & Wang 1980). Calibration (null
rejection, CI coverage, the bound) is checked by simulation of the mean squares in
``tests/benchmarks/test_pretraining_runs_calibration.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from benchmarks.stats.gaps import Gap, crossed_gap, minimum_detectable_effect, t_interval
from benchmarks.stats.pairing import paired_scores
from harness.datasets.task import CLASSES, Task

RECIPE, CHECKPOINTS = "runs x items", "seeds within runs x items"
REGISTERED_RECIPE = "runs x items, run component truncated at 0"  # study v3's registered test
STATISTICS_VERSION = "v4: over pretraining runs, the run mean square floored at the within-run seed variation"
N_PRETRAININGS_COLUMN = "n_pretrainings"  # results.csv: pretraining runs among a pretrained method's cells
# results.csv, for a method pretrained more than once: the "these checkpoints" reading beside the
# headline "this recipe" one (gap_vs_random and its CI), and the SD of the gap between runs
CHECKPOINTS_COLUMNS = ("checkpoints_ci_low", "checkpoints_ci_high", "checkpoints_p", "between_run_sd")
CHECKPOINTS_ADJUSTED_COLUMN = "checkpoints_p_adjusted"  # Holm over the pre-registered family, beside checkpoints_p
CHECKPOINTS_MDE_COLUMN = "checkpoints_mde"  # the "these checkpoints" reading's minimum detectable effect
SD_UPPER_COLUMN = "between_run_sd_upper"  # one-sided 95% upper bound of between_run_sd
MDE_UPPER_COLUMN = "mde_at_sd_upper"  # the headline's MDE with the between-run SD at that bound
# the registered v3 test (run component truncated at 0): CI, p and its Holm p, a sensitivity reading
REGISTERED_COLUMNS = ("registered_ci_low", "registered_ci_high", "registered_p")
REGISTERED_ADJUSTED_COLUMN = "registered_p_adjusted"
NO_RUN_REPLICATION, NO_SEED_REPLICATION = "no run replication", "no seed replication within runs"
UPPER_BOUND_LEVEL = 0.95


@dataclass(frozen=True)
class NestedMeanSquares:
    """The gap and the mean squares of (R, S, N) differences; arrays over leading batch axes."""

    gap: np.ndarray
    run: np.ndarray  # R - 1 df
    seed: np.ndarray  # seeds within runs, R (S - 1) df
    item: np.ndarray  # N - 1 df
    run_item: np.ndarray  # (R - 1)(N - 1) df
    residual: np.ndarray  # R (S - 1)(N - 1) df
    runs: int
    seeds: int
    items: int

    @property
    def floor(self) -> np.ndarray:
        """MS_run's expectation without a run effect: the within-run seed variation, estimated."""
        return self.run_item + np.maximum(self.seed - self.residual, 0.0)


@dataclass(frozen=True)
class PretrainingGaps:
    """The readings of one comparison, and how much the gap moves between pretraining runs."""

    recipe: Gap  # over pretraining runs: the headline
    checkpoints: Gap  # conditional on these runs
    runs: int
    seeds_per_run: int
    between_run_variance: np.ndarray  # sigma^2 of the gap between runs (fraction^2), >= 0; NaN with one run
    registered: Gap | None = None  # study v3's registered test over runs (run component truncated at 0)
    between_run_upper: np.ndarray | float = np.nan  # one-sided 95% upper bound of between_run_variance


def mean_squares(differences: np.ndarray) -> NestedMeanSquares:
    """The mean squares of (..., R, S, N) differences (S >= 2)."""
    d = np.asarray(differences, dtype=float)
    runs, seeds, items = d.shape[-3:]
    cell_means = d.mean(axis=-1)  # (..., R, S)
    run_means = cell_means.mean(axis=-1)  # (..., R)
    run_item_means = d.mean(axis=-2)  # (..., R, N)
    item_means = run_item_means.mean(axis=-2)  # (..., N)
    gap = run_item_means.mean(axis=(-2, -1))  # as the registered reading sums it
    residual = d - cell_means[..., None] - run_item_means[..., None, :] + run_means[..., None, None]
    interaction = run_item_means - run_means[..., None] - item_means[..., None, :] + gap[..., None, None]
    return NestedMeanSquares(
        gap,
        seeds * items * run_means.var(axis=-1, ddof=1),
        items * ((cell_means - run_means[..., None]) ** 2).sum(axis=(-2, -1)) / (runs * (seeds - 1)),
        runs * seeds * item_means.var(axis=-1, ddof=1),
        seeds * (interaction**2).sum(axis=(-2, -1)) / ((runs - 1) * (items - 1)),
        (residual**2).sum(axis=(-3, -2, -1)) / (runs * (seeds - 1) * (items - 1)),
        runs,
        seeds,
        items,
    )


def _as_out(squares: NestedMeanSquares):
    return float if np.ndim(squares.gap) == 0 else np.asarray


def checkpoints_reading(squares: NestedMeanSquares, confidence: float = 0.95) -> Gap:
    """Conditional on the runs: seeds within runs × items, Satterthwaite's degrees of freedom (with
    R (S - 1) >= 4 seed degrees of freedom its squared shares are calibrated; ``crossed_gap``'s
    linear weighting guards S - 1 = 2, and stays the reading of one run)."""
    ms, as_out = squares, _as_out(squares)
    runs, seeds, items = ms.runs, ms.seeds, ms.items
    seed_df, residual_df = runs * (seeds - 1), runs * (seeds - 1) * (items - 1)
    seed_excess, item_excess = np.maximum(ms.seed - ms.residual, 0.0), np.maximum(ms.item - ms.residual, 0.0)
    variance = seed_excess + item_excess + ms.residual  # R S N Var(mean d)
    share = ms.seed**2 / seed_df + ms.item**2 / (items - 1) + ms.residual**2 / residual_df
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(share > 0, variance**2 / np.where(share > 0, share, 1.0), float(seed_df))
    error, p_value, low, high = t_interval(ms.gap, variance, df, runs * seeds * items, confidence)
    components = (seed_excess / items, item_excess / (runs * seeds), ms.residual)
    return Gap(
        *(as_out(value) for value in (ms.gap, low, high, p_value, error, df, *components)),
        runs * seeds,
        items,
        CHECKPOINTS,
    )


def _floor_df(squares: NestedMeanSquares) -> np.ndarray:
    """Satterthwaite's degrees of freedom of the floor, MS_run x item + (MS_seed - MS_residual)+."""
    ms = squares
    runs, seeds, items = ms.runs, ms.seeds, ms.items
    seed_share = ms.seed**2 / (runs * (seeds - 1)) + ms.residual**2 / (runs * (seeds - 1) * (items - 1))
    share = np.where(ms.seed > ms.residual, seed_share, 0.0) + ms.run_item**2 / ((runs - 1) * (items - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(share > 0, ms.floor**2 / np.where(share > 0, share, 1.0), float(runs - 1))


def recipe_reading(squares: NestedMeanSquares, confidence: float = 0.95) -> Gap:
    """Over runs, the headline: MS_run floored at the within-run seed variation, in Satterthwaite's
    combination on R - 1 degrees of freedom (the floor's own where it binds); where that interval
    would be narrower than the checkpoints reading's, the checkpoints reading's variance and degrees
    of freedom: the runs add a level, so the recipe can never be known better than these runs."""
    ms, as_out = squares, _as_out(squares)
    runs, seeds, items = ms.runs, ms.seeds, ms.items
    binds = ms.run < ms.floor
    run_term = np.where(binds, ms.floor, ms.run)
    run_df = np.where(binds, _floor_df(ms), float(runs - 1))
    item_excess = np.maximum(ms.item - ms.run_item, 0.0)
    variance = run_term + item_excess  # R S N Var(mean d)
    share = run_term**2 / run_df + ms.item**2 / (items - 1) + ms.run_item**2 / ((runs - 1) * (items - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(share > 0, variance**2 / np.where(share > 0, share, 1.0), float(runs - 1))
    cells = runs * seeds * items
    conditional = checkpoints_reading(ms, confidence)
    conditional_variance = np.asarray(conditional.standard_error) ** 2 * cells
    quantile = 0.5 + confidence / 2
    narrower = stats.t.ppf(quantile, df) ** 2 * np.maximum(variance, 1.0 / cells) < (
        stats.t.ppf(quantile, conditional.degrees_of_freedom) ** 2 * conditional_variance
    )
    variance = np.where(narrower, conditional_variance, variance)
    df = np.where(narrower, conditional.degrees_of_freedom, df)
    error, p_value, low, high = t_interval(ms.gap, variance, df, cells, confidence)
    components = ((run_term - ms.run_item) / (seeds * items), item_excess / (runs * seeds), ms.run_item / seeds)
    return Gap(
        *(as_out(value) for value in (ms.gap, low, high, p_value, error, df, *components)),
        runs,
        items,
        RECIPE,
    )


def between_run_bounds(squares: NestedMeanSquares, level: float = UPPER_BOUND_LEVEL):
    """The between-run variance ``(MS_run - floor) / (S N)`` truncated at 0, and its one-sided upper
    bound at ``level``: the modified large-sample bound of a difference of mean squares, each term
    widened by its own chi-square quantile (Graybill & Wang 1980; Burdick & Graybill 1992)."""
    ms = squares
    runs, seeds, items = ms.runs, ms.seeds, ms.items
    scale = seeds * items
    estimate = (ms.run - ms.floor) / scale
    alpha = 1 - level
    terms = (  # (mean square, its df, +1 where it enters positively)
        (ms.run, runs - 1, 1),
        (ms.residual, runs * (seeds - 1) * (items - 1), 1),
        (ms.seed, runs * (seeds - 1), -1),
        (ms.run_item, (runs - 1) * (items - 1), -1),
    )
    spread = 0.0
    for value, df, sign in terms:
        factor = df / stats.chi2.ppf(alpha, df) - 1 if sign > 0 else 1 - df / stats.chi2.ppf(1 - alpha, df)
        spread = spread + (factor * value) ** 2
    upper = estimate + np.sqrt(spread) / scale
    return np.maximum(estimate, 0.0), np.maximum(upper, 0.0)


def _registered(differences: np.ndarray) -> Gap:
    """Study v3's registered test: ``crossed_gap`` on each run's mean over its seeds, (..., R, N)."""
    gap = crossed_gap(differences.mean(axis=-2))
    return replace(gap, procedure=REGISTERED_RECIPE if gap.seeds >= 2 else NO_RUN_REPLICATION)


def _no_seed_replication(differences: np.ndarray) -> Gap:
    """One seed a run: the gap and the (confounded) item variance, nothing to test with."""
    runs, seeds, items = differences.shape[-3:]
    as_out = float if differences.ndim == 3 else np.asarray
    gap = differences.mean(axis=(-3, -2, -1))
    ms_item = runs * seeds * differences.mean(axis=(-3, -2)).var(axis=-1, ddof=1)
    missing = np.full_like(gap, np.nan)
    return Gap(
        as_out(gap),
        *(as_out(missing) for _ in range(6)),
        as_out(ms_item),
        as_out(missing),
        runs * seeds,
        items,
        NO_SEED_REPLICATION,
    )


def nested_gap(differences, confidence: float = 0.95) -> PretrainingGaps:
    """Every reading of the gap from per-cell, per-item differences.

    Args:
        differences: (..., R, S, N): run r's seed s minus the twin at that seed, item by item.

    Returns:
        ``PretrainingGaps``; with one run the recipe reading is the registered ``NO_RUN_REPLICATION``
        one and the checkpoints reading ``crossed_gap`` itself; with one seed a run, no test.
    """
    d = np.asarray(differences, dtype=float)
    runs, seeds = d.shape[-3:-1]
    registered = _registered(d)
    missing = np.full(d.shape[:-3], np.nan)
    scalar = d.ndim == 3
    if seeds < 2:
        return PretrainingGaps(registered, _no_seed_replication(d), runs, seeds, float(missing) if scalar else missing)
    if runs < 2:
        alone = crossed_gap(d[..., 0, :, :], confidence)
        return PretrainingGaps(registered, alone, runs, seeds, float(missing) if scalar else missing)
    squares = mean_squares(d)
    checkpoints = checkpoints_reading(squares, confidence)
    between, upper = between_run_bounds(squares)
    as_out = float if scalar else np.asarray
    return PretrainingGaps(
        recipe_reading(squares, confidence), checkpoints, runs, seeds, as_out(between), registered, as_out(upper)
    )


def recipe_detectable_effects(gaps: PretrainingGaps) -> tuple[float, float]:
    """The headline's minimum detectable effect (power 0.8, alpha 0.05) from the variance it uses,
    and the same with the between-run SD at its one-sided 95% upper bound (conservative): a crossed
    runs × items design whose run component is the floored one; NaN without a run-level test."""
    reading = gaps.recipe
    if reading.procedure != RECIPE:
        return float("nan"), float("nan")
    within = float(reading.seed_variance) - float(gaps.between_run_variance)  # the seeds' share of a run's mean
    effects = [
        minimum_detectable_effect(
            within + between, float(reading.item_variance), float(reading.residual_variance), gaps.runs, reading.items
        )
        for between in (float(gaps.between_run_variance), float(gaps.between_run_upper))
    ]
    return effects[0], effects[1]


def checkpoints_detectable_effect(gaps: PretrainingGaps) -> float:
    """The smallest true gap the "these checkpoints" reading finds with power 0.8 at alpha 0.05: its
    seed pairs nested in the runs (R (S - 1) seed degrees of freedom); NaN with one seed a run."""
    reading = gaps.checkpoints
    if gaps.seeds_per_run < 2:
        return float("nan")
    return minimum_detectable_effect(
        float(reading.seed_variance),
        float(reading.item_variance),
        float(reading.residual_variance),
        reading.seeds,
        reading.items,
        seed_df=gaps.runs * (gaps.seeds_per_run - 1),
    )


def compare_over_pretrainings(
    method_runs: Mapping[tuple, object],
    twin_runs: Mapping,
    method: str = "method",
    task: Task = CLASSES,
    metric: str | None = None,
) -> PretrainingGaps | None:
    """Both readings for a method pretrained several times against its twin.

    Args:
        method_runs: ``{(pretraining run, seed): test predictions}``, seeds distinct across runs.
        twin_runs: ``{seed: test predictions}``; the twin's cell at seed s pairs with (run, s).
        task, metric: what the items score (``pairing.item_scores``; the task's main metric by default).

    Returns:
        ``PretrainingGaps`` over the seeds both arms have, or None without any. Raises ValueError
        when a seed appears under two runs or the runs keep unequal numbers of paired seeds.
    """
    run_of = {}
    for run, seed in method_runs:
        if seed in run_of:
            raise ValueError(
                f"{method}: seed {seed} under pretraining runs {run_of[seed]!r} and {run!r}; "
                "each run needs seeds of its own"
            )
        run_of[seed] = run
    by_seed = {seed: frame for (_, seed), frame in method_runs.items()}
    seeds, scores_method, scores_twin = paired_scores(by_seed, twin_runs, method, task, metric)
    if not seeds:
        return None
    differences = scores_method - scores_twin  # (cells, N)
    runs = list(dict.fromkeys(run_of[seed] for seed in seeds))
    rows = [[index for index, seed in enumerate(seeds) if run_of[seed] == run] for run in runs]
    if len({len(row) for row in rows}) != 1:
        raise ValueError(
            f"{method}: pretraining runs with unequal numbers of paired seeds "
            f"({', '.join(f'{run!r}: {len(row)}' for run, row in zip(runs, rows))}); "
            "the model needs a balanced design"
        )
    return nested_gap(differences[np.array(rows)])  # (R, S, N)
