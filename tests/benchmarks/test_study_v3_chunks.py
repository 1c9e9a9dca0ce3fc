"""Study v3's chunks (configs/benchmarks/families-v3/): each fits a 2-core machine for 150 minutes
by the scale-out model and holds some of 5 pretraining runs of one family's recipe, 2 head seeds a
run (run r: 2r and 2r+1), the twin on the same seeds, probes and baselines; together they hold every
run of every registered comparison once, and the 12 comparisons are planned over all 5 runs. Each arm
runs at its own recipe, picked on dev in a selection chunk of its family (configs/benchmarks/
families-v3-selection/): pretraining run 0, a seed of its own, at most half the arm's final cells."""

from collections import defaultdict
from pathlib import Path

import pytest

from benchmarks.plan.cost_model import Costs, simulate, study_plan
from benchmarks.plan.matrix import PICKED_HEAD, load_config
from benchmarks.plan.pretraining_runs import RUN_INDEX
from benchmarks.plan.recipe_picks import recipe_arms

REPO = Path(__file__).resolve().parents[2]
CHUNKS = sorted((REPO / "configs" / "benchmarks" / "families-v3").glob("*.yaml"))
SELECTIONS = sorted((REPO / "configs" / "benchmarks" / "families-v3-selection").glob("*.yaml"))
COSTS = Costs.read(REPO / "benchmarks" / "scaleout-costs.json")
CHUNK_MINUTES, RUNS, SEEDS_PER_RUN = 150, 5, 2


@pytest.mark.parametrize("path", CHUNKS, ids=[path.stem for path in CHUNKS])
def test_a_v3_chunk_pairs_each_run_with_its_twin_and_fits_its_session(path):
    config = load_config(path)
    assert config.name == f"families-v3-{path.stem}"  # its export folder: results/families-v3/<stem>
    assert len(config.seeds) == SEEDS_PER_RUN and config.random_control and config.linear_probe
    assert set(config.baselines) == {"majority", "tfidf-lr"}
    assert all(RUN_INDEX in encoder for encoder in config.encoders)  # every encoder is one pretraining run
    cells = study_plan(config)
    minutes = simulate(COSTS.only(config.encoders), cells, 2)
    assert minutes <= CHUNK_MINUTES, f"{path.stem}: {minutes:.0f} min on 2 CPUs"
    pretrained = [cell for cell in cells if cell.kind == "pretrained"]
    assert config.comparisons and set(config.comparisons) == {cell.method for cell in pretrained}
    runs = {encoder["name"]: encoder[RUN_INDEX] for encoder in config.encoders}
    for method in config.comparisons:
        mine = [cell for cell in pretrained if cell.method == method]
        twin = {cell.seed for cell in cells if cell.kind == "random" and cell.method == mine[0].control}
        assert sorted((runs[cell.encoder_run], cell.seed) for cell in mine) == [
            (run, SEEDS_PER_RUN * run + seed) for run in sorted(runs.values()) for seed in range(SEEDS_PER_RUN)
        ]
        assert twin == {cell.seed for cell in mine}  # the twin on the same seeds, no run level


def test_the_v3_chunks_hold_every_run_of_the_twelve_comparisons_once():
    held = defaultdict(list)
    for path in CHUNKS:
        config = load_config(path)
        runs = {encoder["name"]: encoder[RUN_INDEX] for encoder in config.encoders}
        for cell in study_plan(config):
            if cell.kind == "pretrained":
                held[cell.method].append((runs[cell.encoder_run], cell.seed))
    assert len(held) == 12
    for method, cells in held.items():
        assert sorted(cells) == [(seed // SEEDS_PER_RUN, seed) for seed in range(RUNS * SEEDS_PER_RUN)], method
    families = {(method.split("-")[0], "-frozen-" in method, "@0.1" in method) for method in held}
    assert families == {
        (family, frozen, small)
        for family in ("elmo", "ulmfit", "gpt")
        for frozen in (True, False)
        for small in (True, False)
    }


@pytest.mark.parametrize("path", SELECTIONS, ids=[path.stem for path in SELECTIONS])
def test_a_selection_chunk_runs_every_grid_point_of_run_0_at_a_seed_of_its_own(path):
    config = load_config(path)
    assert config.name == f"families-v3-selection-{path.stem}"  # exported to results/families-v3-selection/<stem>
    assert [encoder[RUN_INDEX] for encoder in config.encoders] == [0] and config.random_control
    assert not config.comparisons and not config.baselines  # choices, not comparisons
    cells = study_plan(config)
    minutes = simulate(COSTS.only(config.encoders), cells, 2)
    assert minutes <= CHUNK_MINUTES, f"{path.stem}: {minutes:.0f} min on 2 CPUs"
    assert {cell.seed for cell in cells} == {RUNS * SEEDS_PER_RUN}  # seed 10: none of the final cells' 0-9
    assert all(cell.grid_of for cell in cells)  # every cell a grid point of an arm, pretrained and twin alike


def test_every_arm_of_every_chunk_takes_its_recipe_from_a_selection_of_its_family_at_half_its_cells_or_less():
    selections = {f"results/families-v3-selection/{path.stem}": load_config(path) for path in SELECTIONS}
    final_cells, selection_cells, heads = defaultdict(int), defaultdict(int), {}
    for path in CHUNKS:
        config = load_config(path)
        for family, transfers in config.transfers.items():
            assert path.stem.startswith(family)
            for transfer in transfers:
                assert transfer.recipe_from in selections, f"{path.stem}: {transfer.name}"
                selection = selections[transfer.recipe_from]
                kind = "frozen" if transfer.name == "frozen" else "finetuned"
                assert transfer.recipe_from == f"results/families-v3-selection/{family}-{kind}"
                assert [method for method in config.comparisons if PICKED_HEAD in method] == [
                    method for method in config.comparisons if "-frozen-" in method and "@0.1" in method
                ]
                planned = study_plan(selection)
                for arm in recipe_arms(config, family, transfer):
                    points = [
                        cell
                        for cell in planned
                        if cell.kind == arm.kind
                        and cell.train_fraction == arm.fraction
                        and cell.transfer == arm.transfer
                        and (arm.head in (PICKED_HEAD, cell.head))
                    ]
                    selection_cells[family, arm.method] = len(points)  # twins of families share names
                    heads[family, arm.method] = {cell.head for cell in points}
        for cell in study_plan(config):
            if cell.kind in ("pretrained", "random"):
                final_cells[path.stem.split("-")[0], cell.method] += 1
    assert len(final_cells) == 24  # 12 comparisons, each arm apart
    for method, cells in final_cells.items():
        assert cells == RUNS * SEEDS_PER_RUN, method
        assert 3 <= selection_cells[method] <= cells / 2, method  # a grid of 3 or more, at most half the cells
    picked = {arm: found for arm, found in heads.items() if PICKED_HEAD in arm[1]}
    assert len(picked) == 6 and all(found == {"attn", "linear", "dense"} for found in picked.values())
