"""The scale-out simulation schedules a plan as the executor does (stages first, an encoder's
cells once its last stage is done) and finds the critical path; worked out by hand on a tiny plan."""

import pytest

from benchmarks.matrix import parse_matrix
from benchmarks.scaleout import Costs, critical_path, simulate, study_plan

CONFIG = parse_matrix({"encoders": [{"name": "elmo-a", "run": "latest"}, {"name": "gpt-b", "run": "latest"}],
          "transfers": {"elmo": [{"name": "frozen", "heads": ["pool-mlp"]}], "gpt": [{"name": "full", "heads": ["cls"]}]},
          "fractions": [1.0], "seeds": 1, "random_control": True, "baselines": []})
COSTS = Costs(stages={"elmo-a": [10.0], "gpt-b": [5.0, 5.0]}, stage_cpus=1, cells={"gpt/full/cls": {"1": 3.0}},
              default={"1": 2.0}, baseline=0.0)


def test_the_critical_path_is_the_longest_chain_of_stages_and_its_longest_cell():
    cells = study_plan(CONFIG)
    assert [cell.family for cell in cells] == ["elmo", "elmo", "gpt", "gpt"]
    assert critical_path(COSTS, cells) == pytest.approx(13.0)  # gpt-b: 5 + 5, then a 3-minute cell


@pytest.mark.parametrize("cpus, minutes", [(1, 30.0), (2, 15.0), (4, 13.0)])
def test_the_simulated_wall_time_follows_the_executors_policy(cpus, minutes):
    # 1 CPU: the stages first (10 + 5 + 5), then the cells (2 + 2 + 3 + 3). 2 CPUs: elmo-a 0-10
    # beside gpt-b's stages 0-5-10; elmo's two cells 10-12, gpt's 12-15. 4 CPUs: all four cells
    # start at 10, so the critical path (gpt-b's 10 minutes of stages + its 3-minute cell) decides.
    assert simulate(COSTS, study_plan(CONFIG), cpus) == pytest.approx(minutes)
