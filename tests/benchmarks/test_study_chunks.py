"""The transfer study's chunks (configs/benchmarks/families-budget/): each fits a 2-core machine
for 150 minutes by the scale-out model, has its own pretraining, twins, probes and baselines and
at least 5 seeds; together they cover every family frozen and fine-tuned at 100% and 10% of the
labels, and each pre-registers exactly its own comparisons, each a planned method with a twin."""

from pathlib import Path

import pytest

from benchmarks.plan.cost_model import Costs, simulate, study_plan
from benchmarks.plan.matrix import load_config

REPO = Path(__file__).resolve().parents[2]
CHUNKS = sorted((REPO / "configs" / "benchmarks" / "families-budget").glob("*.yaml"))
COSTS = Costs.read(REPO / "benchmarks" / "scaleout-costs.json")
CHUNK_MINUTES = 150


@pytest.mark.parametrize("path", CHUNKS, ids=[path.stem for path in CHUNKS])
def test_a_chunk_is_self_contained_and_fits_its_session(path):
    config = load_config(path)
    assert config.name == f"families-budget-{path.stem}"  # its export folder: results/families-budget/<stem>
    assert len(config.seeds) >= 5 and config.random_control and config.linear_probe
    assert set(config.baselines) == {"majority", "tfidf-lr"}
    assert all("pretrain" in encoder for encoder in config.encoders)  # pretrained here, not borrowed
    cells = study_plan(config)
    minutes = simulate(COSTS.only(config.encoders), cells, 2)
    assert minutes <= CHUNK_MINUTES, f"{path.stem}: {minutes:.0f} min on 2 CPUs"
    twins = {cell.method: cell.control for cell in cells if cell.kind == "pretrained"}
    assert config.comparisons and set(config.comparisons) == set(twins)  # every comparison registered, no other
    assert all(control for control in twins.values())
    assert {cell.train_fraction for cell in cells if cell.kind == "probe"} >= set(config.fractions)


def test_the_chunks_cover_each_family_frozen_and_fine_tuned_at_both_fractions():
    covered = set()
    for path in CHUNKS:
        for cell in study_plan(load_config(path)):
            if cell.kind == "pretrained":
                covered.add((cell.encoder.split("-")[0], cell.transfer == "frozen", cell.train_fraction))
    assert covered == {
        (family, frozen, fraction)
        for family in ("elmo", "ulmfit", "gpt")
        for frozen in (True, False)
        for fraction in (1.0, 0.1)
    }


def test_no_method_is_registered_by_two_chunks():
    names = [name for path in CHUNKS for name in load_config(path).comparisons]
    assert len(names) == len(set(names)) == 12
