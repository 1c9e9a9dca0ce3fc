"""The gap to the twin when pretraining itself is a random variable: R pretraining runs of one
recipe, S head seeds in each (distinct across runs), N test items. The twin has no run level: its
cell at seed s (its own random init) pairs with the pretrained cell (run, s), so

    d[r, s, i] = correct_pretrained[r, s, i] - correct_twin[s, i]
               = mu + run_r + seed_(r)s + item_i + (run x item)_ri + residual_rsi,

seeds nested in runs, items crossed with both. Two readings, both from mean squares of this
balanced design (``crossed_gap``'s truncation, degrees of freedom and resolution floor):

- **this recipe** (runs random: what another pretraining of the recipe would give): ``R S N
  Var(mean d) = E[MS_run] + E[MS_item] - E[MS_run x item]``, which is ``crossed_gap`` on the (R, N)
  table of each run's mean over its seeds; its degrees of freedom come from the runs, not the seeds.
- **these checkpoints** (runs fixed: the R checkpoints at hand, comparable with a study that
  pretrained once): ``R S N Var = E[MS_seed within run] + E[MS_item] - E[MS_residual]``, with
  R (S - 1) seed degrees of freedom. With one run it is ``crossed_gap`` itself.

Calibration (null rejection in both readings, the between-run variance) is checked by simulation in
``tests/benchmarks/test_pretraining_runs.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from benchmarks.stats.gaps import Gap, crossed_gap, minimum_detectable_effect, t_interval
from benchmarks.stats.pairing import paired_correctness

RECIPE, CHECKPOINTS = "runs x items", "seeds within runs x items"
N_PRETRAININGS_COLUMN = "n_pretrainings"  # results.csv: pretraining runs among a pretrained method's cells
# results.csv, for a method pretrained more than once: the "these checkpoints" reading beside the
# headline "this recipe" one (gap_vs_random and its CI), and the SD of the gap between runs
CHECKPOINTS_COLUMNS = ("checkpoints_ci_low", "checkpoints_ci_high", "checkpoints_p", "between_run_sd")
CHECKPOINTS_ADJUSTED_COLUMN = "checkpoints_p_adjusted"  # Holm over the pre-registered family, beside checkpoints_p
CHECKPOINTS_MDE_COLUMN = "checkpoints_mde"  # the "these checkpoints" reading's minimum detectable effect
NO_RUN_REPLICATION, NO_SEED_REPLICATION = "no run replication", "no seed replication within runs"


@dataclass(frozen=True)
class PretrainingGaps:
    """Both readings of one comparison, and how much the gap moves between pretraining runs."""

    recipe: Gap  # over pretraining runs: the headline
    checkpoints: Gap  # conditional on these runs
    runs: int
    seeds_per_run: int
    between_run_variance: np.ndarray  # sigma^2 of the gap between runs (fraction^2), >= 0; NaN with one run


def _recipe(differences: np.ndarray) -> Gap:
    """Over runs: ``crossed_gap`` on each run's mean over its seeds, (..., R, N)."""
    gap = crossed_gap(differences.mean(axis=-2))
    return replace(gap, procedure=RECIPE if gap.seeds >= 2 else NO_RUN_REPLICATION)


def _checkpoints(differences: np.ndarray, confidence: float) -> Gap:
    """Conditional on the runs: seeds within runs × items, (..., R, S, N)."""
    runs, seeds, items = differences.shape[-3:]
    as_out = float if differences.ndim == 3 else np.asarray
    gap = differences.mean(axis=(-3, -2, -1))
    item_means = differences.mean(axis=(-3, -2))  # (..., N)
    ms_item = runs * seeds * item_means.var(axis=-1, ddof=1)
    if seeds < 2:
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
    cell_means = differences.mean(axis=-1)  # (..., R, S)
    run_means = cell_means.mean(axis=-1)  # (..., R)
    run_item_means = differences.mean(axis=-2)  # (..., R, N)
    seed_df, residual_df = runs * (seeds - 1), runs * (seeds - 1) * (items - 1)
    ms_seed = items * ((cell_means - run_means[..., None]) ** 2).sum(axis=(-2, -1)) / seed_df
    residual = (
        differences - cell_means[..., None] - run_item_means[..., None, :] + run_means[..., None, None]
    )  # (..., R, S, N)
    ms_residual = (residual**2).sum(axis=(-3, -2, -1)) / residual_df
    seed_excess, item_excess = np.maximum(ms_seed - ms_residual, 0.0), np.maximum(ms_item - ms_residual, 0.0)
    variance = seed_excess + item_excess + ms_residual  # R S N Var(mean d)
    share = ms_seed / seed_df + ms_item / (items - 1) + ms_residual / residual_df
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(share > 0, variance / np.where(share > 0, share, 1.0), float(seed_df))
    error, p_value, low, high = t_interval(gap, variance, df, runs * seeds * items, confidence)
    components = (seed_excess / items, item_excess / (runs * seeds), ms_residual)
    return Gap(
        as_out(gap),
        as_out(low),
        as_out(high),
        as_out(p_value),
        as_out(error),
        as_out(df),
        *(as_out(component) for component in components),
        runs * seeds,
        items,
        CHECKPOINTS,
    )


def nested_gap(differences, confidence: float = 0.95) -> PretrainingGaps:
    """Both readings of the gap from per-cell, per-item differences.

    Args:
        differences: (..., R, S, N): run r's seed s minus the twin at that seed, item by item.

    Returns:
        ``PretrainingGaps``; its ``between_run_variance`` is the recipe reading's row component
        (between runs, seeds averaged) less the checkpoints' seed component / S, truncated at 0.
    """
    d = np.asarray(differences, dtype=float)
    runs, seeds = d.shape[-3:-1]
    recipe, checkpoints = _recipe(d), _checkpoints(d, confidence)
    if runs < 2:
        between = np.full(d.shape[:-3], np.nan)
    else:
        within = np.nan_to_num(np.asarray(checkpoints.seed_variance, dtype=float)) / seeds
        between = np.maximum(np.asarray(recipe.seed_variance, dtype=float) - within, 0.0)
    return PretrainingGaps(recipe, checkpoints, runs, seeds, float(between) if d.ndim == 3 else between)


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
    method_runs: Mapping[tuple, object], twin_runs: Mapping, method: str = "method"
) -> PretrainingGaps | None:
    """Both readings for a method pretrained several times against its twin.

    Args:
        method_runs: ``{(pretraining run, seed): test predictions}``, seeds distinct across runs.
        twin_runs: ``{seed: test predictions}``; the twin's cell at seed s pairs with (run, s).

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
    seeds, correct_method, correct_twin = paired_correctness(by_seed, twin_runs, method)
    if not seeds:
        return None
    differences = correct_method.astype(float) - correct_twin.astype(float)  # (cells, N)
    runs = list(dict.fromkeys(run_of[seed] for seed in seeds))
    rows = [[index for index, seed in enumerate(seeds) if run_of[seed] == run] for run in runs]
    if len({len(row) for row in rows}) != 1:
        raise ValueError(
            f"{method}: pretraining runs with unequal numbers of paired seeds "
            f"({', '.join(f'{run!r}: {len(row)}' for run, row in zip(runs, rows))}); "
            "the model needs a balanced design"
        )
    return nested_gap(differences[np.array(rows)])  # (R, S, N)
