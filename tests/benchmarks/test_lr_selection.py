"""Learning rates chosen per arm from one grid: the plan's grid points (the same for pretrained and
twin), the choice by mean dev accuracy (never test), each arm on its own, and what the results
and the report show."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.plan.cells import plan
from benchmarks.plan.lr_selection import lr_grid_section, lr_grid_table, select_learning_rates
from benchmarks.plan.matrix import parse_matrix
from benchmarks.report.outputs import write_outputs
from benchmarks.report.results_table import build_results


def test_every_grid_point_is_a_cell_of_each_arm():
    config = {"mixes": ["scalar"], "heads": ["pool-mlp"], "seeds": 2, "lr_grid": [1e-3, 3e-3]}
    cells = plan(parse_matrix(config), [{"name": "elmo", "run_id": "abc", "num_layers": 3}], ["--data.flag=1"])
    assert [(c.method, c.seed, c.grid_of, c.learning_rate) for c in cells[:4]] == [
        ("elmo-scalar-pool-mlp~lr0.001", 0, "elmo-scalar-pool-mlp", 1e-3),
        ("random-scalar-pool-mlp~lr0.001", 0, "random-scalar-pool-mlp", 1e-3),
        ("elmo-scalar-pool-mlp~lr0.001", 1, "elmo-scalar-pool-mlp", 1e-3),
        ("random-scalar-pool-mlp~lr0.001", 1, "random-scalar-pool-mlp", 1e-3),
    ]
    assert len(cells) == 8 and cells[0].control == "random-scalar-pool-mlp~lr0.001"
    assert cells[0].args == ["--data.flag=1", "--model.learning_rate=0.001"]
    assert cells[-1].args == ["--data.flag=1", "--model.learning_rate=0.003"]
    assert len({str(c.spec()) for c in cells}) == 8  # every point and seed its own settings
    assert [
        c.method
        for c in plan(parse_matrix({**config, "lr_grid": []}), [{"name": "elmo", "run_id": "abc", "num_layers": 3}], [])
    ][:1] == ["elmo-scalar-pool-mlp"]


def grid_runs():
    """Two arms × 3 rates × 3 seeds; the pretrained arm is best on dev at 3e-3 but best on test at
    1e-3, its twin best on dev at 1e-3."""
    rows, predictions = [], {}
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 300)
    dev = {
        ("elmo", 1e-3): 0.70,
        ("elmo", 3e-3): 0.76,
        ("elmo", 1e-2): 0.72,
        ("random", 1e-3): 0.71,
        ("random", 3e-3): 0.69,
        ("random", 1e-2): 0.60,
    }
    test = {
        ("elmo", 1e-3): 0.85,
        ("elmo", 3e-3): 0.78,
        ("elmo", 1e-2): 0.70,
        ("random", 1e-3): 0.70,
        ("random", 3e-3): 0.80,
        ("random", 1e-2): 0.60,
    }
    for (arm, rate), dev_acc in dev.items():
        for seed in range(3):
            method = f"{arm}-scalar-attn~lr{rate:g}"
            run_id = f"{method}/{seed}"
            correct = rng.random(300) < test[(arm, rate)]
            pred = np.where(correct, labels, 1 - labels)
            predictions[run_id] = pd.DataFrame(
                {"id1": [str(i) for i in range(300)], "id2": "x", "label": labels.astype(str), "pred": pred.astype(str)}
            )
            rows.append(
                {
                    "run_id": run_id,
                    "method": method,
                    "seed": seed,
                    "encoder": "elmo",
                    "kind": "pretrained" if arm == "elmo" else "random",
                    "mix": "scalar",
                    "head": "attn",
                    "control": f"random-scalar-attn~lr{rate:g}" if arm == "elmo" else "",
                    "grid_of": f"{arm}-scalar-attn",
                    "learning_rate": rate,
                    "dev_acc": dev_acc + 0.001 * seed,
                    "dev_f1": 0.8,
                    "test_acc": float(correct.mean()),
                    "test_f1": 0.8,
                }
            )
    return pd.DataFrame(rows), predictions


def test_each_arm_keeps_its_best_dev_rate_and_never_looks_at_test(tmp_path):
    runs, predictions = grid_runs()
    table = lr_grid_table(runs)
    chosen = dict(zip(table.loc[table["chosen"], "method"], table.loc[table["chosen"], "learning_rate"]))
    assert chosen == {"elmo-scalar-attn": 3e-3, "random-scalar-attn": 1e-3}  # dev decides, per arm
    planned = runs.assign(arm=runs["kind"] != "pretrained").sort_values(["learning_rate", "seed", "arm"])
    planned = planned.drop(columns="arm").reset_index(drop=True)  # the plan's order: rate, seed, arm
    assert planned["method"].iloc[1] == "random-scalar-attn~lr0.001"  # a kept twin point before any kept one
    assert list(dict.fromkeys(select_learning_rates(planned)["method"])) == ["elmo-scalar-attn", "random-scalar-attn"]
    selected = select_learning_rates(runs)
    assert list(dict.fromkeys(selected["method"])) == ["elmo-scalar-attn", "random-scalar-attn"]  # the plan's order
    assert len(selected) == 6
    assert set(selected.loc[selected["kind"] == "pretrained", "control"]) == {"random-scalar-attn"}
    results = build_results(selected, predictions).set_index("method")
    assert results.loc["elmo-scalar-attn", "learning_rate"] == 3e-3
    assert results.loc["random-scalar-attn", "learning_rate"] == 1e-3
    assert results.loc["elmo-scalar-attn", "paired_seeds"] == 3  # the chosen points pair by seed
    write_outputs(tmp_path, build_results(selected, predictions), selected, {"lr_grid": table})
    report = (tmp_path / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| method |"))
    assert "| lr |" in header
    section = "\n".join(lr_grid_section(table))
    assert "| `elmo-scalar-attn` | 0.001: 70.1, **0.003: 76.1**, 0.01: 72.1 | 0.003 |" in section
    assert "## Learning rates chosen per arm" in report


def test_a_tie_on_dev_goes_to_the_smaller_rate():
    runs, _ = grid_runs()
    runs.loc[runs["learning_rate"] == 1e-2, "dev_acc"] = runs.loc[runs["learning_rate"] == 3e-3, "dev_acc"].to_numpy()
    table = lr_grid_table(runs)
    assert table.loc[table["chosen"] & (table["method"] == "elmo-scalar-attn"), "learning_rate"].item() == 3e-3


def test_runs_without_a_grid_are_left_as_they_are():
    runs = pd.DataFrame({"method": ["a", "b"], "seed": [0, 0], "dev_acc": [0.7, 0.6]})
    assert select_learning_rates(runs) is runs and lr_grid_section(lr_grid_table(runs)) == []
    with pytest.raises(KeyError):
        runs["learning_rate"]


@pytest.mark.parametrize("grid", ["[1e-3, 3e-3]", "0.001", "[0.001, -1]"])
def test_a_grid_that_is_not_a_list_of_positive_rates_is_one_line(tmp_path, grid):
    from benchmarks.plan.matrix import load_config
    from harness.errors import UserError

    path = tmp_path / "grid.yaml"  # YAML reads 1e-3 (no dot) as text
    path.write_text(f"encoders: [{{name: elmo, run: latest}}]\nmixes: [scalar]\nlr_grid: {grid}\n")
    with pytest.raises(UserError, match=r"`lr_grid` must be a list of learning rates > 0") as raised:
        load_config(path)
    assert "\n" not in str(raised.value)
    path.write_text("encoders: [{name: elmo, run: latest}]\nmixes: [scalar]\nlr_grid: [1.0e-3, 3.0e-3]\n")
    assert load_config(path).lr_grid == (1e-3, 3e-3)


def test_a_graded_arm_keeps_its_best_dev_pearson_rate():
    """The rate is chosen on the task's main dev metric: Pearson for a graded task, whatever else the
    runs hold (here a dev_acc column that would choose the other rate)."""
    from harness.datasets.task import graded

    runs, _ = grid_runs()
    task = graded(0, 5)
    runs = runs.assign(dev_pearson=1 - runs["dev_acc"])  # the order of the rates reversed
    table = lr_grid_table(runs, task)
    chosen = dict(zip(table.loc[table["chosen"], "method"], table.loc[table["chosen"], "learning_rate"]))
    assert chosen == {"elmo-scalar-attn": 1e-3, "random-scalar-attn": 1e-2}
    assert "dev_pearson_mean" in table and "dev_acc_mean" not in table
    section = "\n".join(lr_grid_section(table, task))
    assert "best mean dev Pearson r over seeds (× 100)" in section and "mean dev Pearson by learning rate" in section
    assert set(select_learning_rates(runs, task)["learning_rate"]) == {1e-3, 1e-2}
