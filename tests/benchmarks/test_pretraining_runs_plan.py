"""``pretraining_runs:`` on an encoder entry: one pretraining per run with its own seed (its own
stage hashes), run r's cells at head seeds 2r and 2r+1 as one method, and a twin without a run
level on the same seeds, its cell k paired with the pretrained cell of seed k."""

import pytest

from benchmarks.engine.task_graph import encoder_cells
from benchmarks.plan.cells import plan
from benchmarks.plan.cost_model import Costs, simulate, study_plan
from benchmarks.plan.encoders import stage_hashes, stages_of
from benchmarks.plan.matrix import parse_matrix
from harness.errors import UserError

STAGE = {"config": "configs/pretrain/gpt.yaml", "args": ["--trainer.max_epochs=1"]}


def matrix(runs=3, **extra):
    return parse_matrix(
        {
            "encoders": [{"name": "gpt-reuters", "pretraining_runs": runs, "pretrain": STAGE}],
            "transfers": {"gpt": [{"name": "full", "heads": ["cls"]}]},
            "fractions": [1.0, 0.1],
            "seeds": 2,
            "baselines": ["tfidf-lr"],
            "linear_probe": True,
            "comparisons": ["gpt-reuters-full-cls"],
            **extra,
        }
    )


def described(config):
    return [
        {"name": entry["name"], "run_id": f"id-{entry['name']}", "family": "gpt", "num_layers": 3}
        for entry in config.encoders
    ]


def test_each_run_pretrains_with_its_own_seed_and_hash():
    config = matrix()
    assert [entry["name"] for entry in config.encoders] == [f"gpt-reuters+run{r}" for r in range(3)]
    assert [stages_of(entry)[0].args[-1] for entry in config.encoders] == [f"--seed_everything={r}" for r in range(3)]
    hashes = {stage_hashes(stages_of(entry), "data")[-1] for entry in config.encoders}
    assert len(hashes) == 3


def test_the_runs_cells_form_one_method_and_the_twin_pairs_by_seed():
    config = matrix()
    cells = [cell for cell in plan(config, described(config), []) if cell.train_fraction == 1.0]
    pretrained = [cell for cell in cells if cell.kind == "pretrained"]
    twins = [cell for cell in cells if cell.kind == "random"]
    assert {cell.method for cell in pretrained} == {"gpt-reuters-full-cls"}
    assert {cell.encoder for cell in cells if cell.encoder} == {"gpt-reuters"}  # the method's encoder
    assert {(cell.seed, cell.encoder_run) for cell in pretrained} == {
        (seed, f"id-gpt-reuters+run{seed // 2}") for seed in range(6)
    }
    assert {cell.control for cell in pretrained} == {"random-full-cls"}
    assert {cell.method for cell in twins} == {"random-full-cls"}
    assert sorted(cell.seed for cell in twins) == list(range(6))  # no run level: each seed once
    probes = [cell for cell in cells if cell.kind == "probe" and cell.probe_of == "pretrained"]
    assert {cell.method for cell in probes} == {"gpt-reuters-linear-probe"}
    assert sorted(cell.seed for cell in probes) == list(range(6))


def test_a_chunk_holds_some_runs_with_their_own_seeds():
    config = matrix(runs=[3, 4])
    cells = plan(config, described(config), [])
    assert sorted({cell.seed for cell in cells if cell.kind == "pretrained"}) == [6, 7, 8, 9]
    tfidf = sorted(cell.seed for cell in cells if cell.method == "tfidf-lr@0.1")
    assert tfidf == [6, 7, 8, 9]  # the baselines at 10% fit the subsets of the chunk's seeds


def test_scaleout_prices_each_run_as_its_entry():
    config = matrix()
    costs = Costs({"gpt-reuters": [15.5]}, 2, {}, {"1": 1.0, "0.1": 0.5}, 0.1).only(config.encoders)
    assert costs.stages == {f"gpt-reuters+run{r}": [15.5] for r in range(3)}
    cells = study_plan(config)
    assert {cell.encoder_run for cell in cells if cell.kind == "pretrained"} == set(costs.stages)
    assert simulate(costs, cells, 2) >= 3 * 15.5  # each run's stage is priced and waited for


def test_the_executor_plans_each_runs_own_cells():
    config = matrix()
    second = {**described(config)[1]}
    cells = encoder_cells(config, second, [entry["name"] for entry in config.encoders], [])
    assert {cell.encoder_run for cell in cells} == {second["run_id"]}
    assert sorted({cell.seed for cell in cells}) == [2, 3]
    assert {cell.kind for cell in cells} == {"pretrained", "random", "probe"}


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"name": "gpt-reuters", "pretraining_runs": 3, "run": "latest"}, "needs `pretrain`"),
        ({"name": "gpt-reuters", "pretraining_runs": 0, "pretrain": STAGE}, "pretraining_runs` must be a count"),
        ({"name": "gpt-reuters", "pretraining_runs": [1, 1], "pretrain": STAGE}, "pretraining_runs` must be a count"),
    ],
)
def test_a_bad_pretraining_runs_is_one_line(entry, message):
    with pytest.raises(UserError, match=message):
        parse_matrix({"encoders": [entry]}, "m.yaml")
