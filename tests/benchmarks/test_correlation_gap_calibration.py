"""The gap between two methods' test correlations, through the per-item jackknife scores and the same
crossed and nested tests as the accuracy gap, calibrated by simulation of item-level predictions.

Gold scores y ~ N(0, 1) on N items; a method's prediction at a seed is
``y + shared_i + own_i + scale * noise_si``: ``shared`` the items both methods find hard
(variance 0.2), ``own`` the method's own item errors (variance 0.2 under the null), ``noise`` the
seed's, its scale 0.4 · exp(0.15 z) drawn per seed (seed luck in the correlation, about a point).
A seed's population Pearson correlation is ``1 / sqrt(1 + 0.2 + own + scale^2)``, about 0.8; the
true score of a method is its mean over seeds, computed by quadrature. Over pretraining runs the
pretrained arm adds a run × item error whose scale 0.3 · exp(0.3 z) is drawn per run (a run effect);
its twin draws that scale per seed, so both arms' cells have the same distribution under the null.
Seeded, vectorised over replications (2,000 each unless said)."""

import numpy as np
import pytest
from scipy import optimize, stats

from benchmarks.stats.gaps import crossed_gap, minimum_detectable_effect
from benchmarks.stats.jackknife import item_scores
from benchmarks.stats.pretraining_runs import nested_gap

SHARED, OWN, SCALE, SEED_SPREAD = 0.2, 0.2, 0.4, 0.15
RUN_SCALE, RUN_SPREAD = 0.3, 0.3
REPLICATIONS, BATCH = 2000, 100
QUANTILES = stats.norm.ppf((np.arange(400) + 0.5) / 400)  # quadrature over a lognormal scale


def true_correlation(own: float, runs: bool = False, seed_spread: float = SEED_SPREAD) -> float:
    """A method's expected Pearson correlation over seeds (and runs): the population value it estimates."""
    noise = (SCALE * np.exp(seed_spread * QUANTILES)) ** 2
    if runs:
        noise = noise[:, None] + (RUN_SCALE * np.exp(RUN_SPREAD * QUANTILES))[None, :] ** 2
    return float(np.mean(1 / np.sqrt(1 + SHARED + own + noise)))


def predictions(generator, truth, own: float, cells: tuple, seed_spread: float, heavy: bool, run_level=None):
    """(B, *cells, N) predictions of one method; ``run_level``: the shape its run × item scale is drawn in."""
    replications, items = truth.shape[0], truth.shape[-1]

    def noise(*shape):
        return generator.standard_t(4, shape) / np.sqrt(2) if heavy else generator.standard_normal(shape)

    ones = (1,) * len(cells)
    scale = SCALE * np.exp(seed_spread * generator.standard_normal((replications, *cells, 1)))
    values = truth + np.sqrt(own) * noise(replications, *ones, items) + scale * noise(replications, *cells, items)
    if run_level is not None:  # a run × item error, its scale drawn per run (or per cell: the twin)
        run_scale = RUN_SCALE * np.exp(RUN_SPREAD * generator.standard_normal((replications, *run_level, 1)))
        values = values + run_scale * noise(replications, *run_level, items)
    return values


def simulate(own_method: float, seeds: int, items: int, seed: int, runs: int = 0, **options):
    """Per replication the (S, N) differences of the two methods' item scores (``runs``: (R, S, N)),
    each batch passed to ``read``; the readings concatenated field by field."""
    generator = np.random.default_rng(seed)
    seed_spread, heavy = options.get("seed_spread", SEED_SPREAD), options.get("heavy", False)
    cells = (runs, seeds) if runs else (seeds,)
    readings = []
    for _ in range(REPLICATIONS // BATCH):
        gold = generator.standard_normal((BATCH, *(1,) * len(cells), items))
        truth = gold + np.sqrt(SHARED) * generator.standard_normal(gold.shape)
        levels = {"method": (runs, 1), "twin": (runs, seeds)} if runs else {"method": None, "twin": None}
        method = predictions(generator, truth, own_method, cells, seed_spread, heavy, levels["method"])
        twin = predictions(generator, truth, OWN, cells, seed_spread, heavy, levels["twin"])
        differences = item_scores(method, gold) - item_scores(twin, gold)  # (B, *cells, N)
        readings.append(nested_gap(differences) if runs else crossed_gap(differences))
    return readings


def field(readings, name: str, reading: str | None = None) -> np.ndarray:
    return np.concatenate([getattr(getattr(one, reading) if reading else one, name) for one in readings])


@pytest.mark.parametrize(
    "seeds, items, seed_spread, heavy",
    [
        (3, 1379, SEED_SPREAD, False),
        (5, 1379, SEED_SPREAD, False),
        (3, 1379, 0.03, False),
        (3, 1379, SEED_SPREAD, True),
    ],
)
def test_a_true_null_correlation_gap_is_rejected_at_about_alpha(seeds, items, seed_spread, heavy):
    """STS-B's 1,379 test items; 3 and 5 seeds, seed luck as large as the items' noise or a fifth of
    it, normal or heavy-tailed (t with 4 df) errors."""
    readings = simulate(
        OWN, seeds, items, seed=seeds + int(100 * seed_spread) + heavy, seed_spread=seed_spread, heavy=heavy
    )
    rejected = np.mean(field(readings, "p_value") < 0.05)
    assert 0.025 <= rejected <= 0.06, rejected


@pytest.mark.parametrize("seeds, items", [(3, 1379), (5, 500)])
def test_the_ci_covers_a_true_correlation_gap_about_95_percent_of_the_time(seeds, items):
    truth = true_correlation(0.15) - true_correlation(OWN)  # about 1.3 points
    readings = simulate(0.15, seeds, items, seed=40 + seeds)
    covered = np.mean((field(readings, "ci_low") <= truth) & (truth <= field(readings, "ci_high")))
    assert 0.93 <= covered <= 0.975, covered
    assert np.mean(field(readings, "gap")) == pytest.approx(truth, abs=4 * np.std(field(readings, "gap")) / 45)


@pytest.mark.slow
def test_a_true_gap_at_the_mde_is_found_about_80_percent_of_the_time():
    """The MDE of 5 seeds × 1,379 items from the variance components the test estimates under the null
    (their mean over replications); a true gap of that size found with power about 0.8."""
    null = simulate(OWN, 5, 1379, seed=51)
    components = [np.mean(field(null, name)) for name in ("seed_variance", "item_variance", "residual_variance")]
    effect = minimum_detectable_effect(*components, seeds=5, items=1379)
    assert 0.02 < effect < 0.06  # 2 to 6 correlation points on this design
    own = optimize.brentq(lambda own: true_correlation(own) - true_correlation(OWN) - effect, 0.0, OWN)
    power = np.mean(field(simulate(own, 5, 1379, seed=52), "p_value") < 0.05)
    assert 0.72 <= power <= 0.88, power


@pytest.mark.slow
@pytest.mark.parametrize("runs, seeds", [(5, 2), (3, 3)])
def test_over_pretraining_runs_the_headline_is_calibrated_where_the_checkpoints_reading_is_not(runs, seeds):
    """R runs × S seeds × 500 items with a run effect: "this recipe" rejects a true null at about alpha
    and its CI covers a true gap; "these checkpoints", which holds the runs fixed, rejects more often
    than the band allows (the run effect is real in the simulation)."""
    null = simulate(OWN, seeds, 500, seed=60 + runs, runs=runs)
    assert 0.025 <= np.mean(field(null, "p_value", "recipe") < 0.05) <= 0.06
    assert np.mean(field(null, "p_value", "checkpoints") < 0.05) > 0.06
    truth = true_correlation(0.15, runs=True) - true_correlation(OWN, runs=True)
    known = simulate(0.15, seeds, 500, seed=70 + runs, runs=runs)
    covered = (field(known, "ci_low", "recipe") <= truth) & (truth <= field(known, "ci_high", "recipe"))
    assert 0.93 <= np.mean(covered) <= 0.975, np.mean(covered)


@pytest.mark.slow
def test_a_true_null_spearman_gap_is_rejected_at_about_alpha():
    """Spearman's per-item scores (one vector at a time: 600 replications, 3 seeds, 200 items with
    gold scores in 0.2 steps, so ties): the band is wider for the fewer replications (± 2 SE)."""
    generator = np.random.default_rng(81)
    p_values = []
    for _ in range(600):
        gold = np.round(np.clip(2.5 + 1.2 * generator.standard_normal(200), 0, 5) * 5) / 5
        truth = gold + np.sqrt(SHARED) * generator.standard_normal(200)
        method, twin = (
            truth
            + np.sqrt(OWN) * generator.standard_normal(200)
            + SCALE * np.exp(SEED_SPREAD * generator.standard_normal((3, 1))) * generator.standard_normal((3, 200))
            for _ in range(2)
        )
        differences = item_scores(method, gold, "spearman") - item_scores(twin, gold, "spearman")  # (3, N)
        p_values.append(crossed_gap(differences).p_value)
    rejected = np.mean(np.array(p_values) < 0.05)
    assert 0.02 <= rejected <= 0.07, rejected
