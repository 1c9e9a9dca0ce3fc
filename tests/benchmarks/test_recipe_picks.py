"""Each arm's recipe from a selection folder (``recipe_from:``): a selection written here the way
``python -m benchmarks export`` writes one, the chunk planned at each arm's pick (pretrained and twin
apart, test never deciding), the head of a ``picked`` arm, every mistake one line before anything
runs, and what the results and the report show."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from benchmarks.plan.cells import plan
from benchmarks.plan.matrix import parse_matrix
from benchmarks.plan.recipe_picks import with_estimated_picks
from benchmarks.report.recipe_section import recipe_section
from benchmarks.report.results_table import build_results
from benchmarks.report.study_table import recipe_of
from benchmarks.results_files.folder import (
    BENCHMARK_FILE,
    CELLS_DIR,
    FORMAT,
    PREDICTIONS_SUFFIX,
    predictions_bytes,
    read_folder,
    write_json,
)
from benchmarks.results_files.manifest import write_manifest
from benchmarks.results_files.recipe_folders import recipe_table, with_picks
from harness.errors import UserError
from harness.protocol import protocol_version, settings_hash
from tests.benchmarks.test_results_files import DATA_DIGEST, predictions

PRETRAIN = {"config": "configs/pretrain/gpt.yaml", "args": ["--trainer.max_epochs=1"]}
FROZEN = {"name": "frozen", "mix": "scalar", "args": ["--model.standardize=true"]}
GRID = [0.0005, 0.001, 0.002]
SELECTION = {
    "name": "selection",
    "encoders": [{"name": "gpt-reuters", "pretraining_runs": [0], "pretrain": PRETRAIN}],
    "finetune": {"config": "configs/downstream/mrpc.yaml", "args": ["--data.equal_steps=true"]},
    "transfers": {
        "gpt": [
            {**FROZEN, "heads": ["attn"], "fractions": [1.0, 0.1], "lr_grid": GRID},
            {**FROZEN, "heads": ["pool-mlp", "dense"], "fractions": [0.1], "lr_grid": [0.001]},
        ]
    },
    "fractions": [1.0, 0.1],
    "seeds": [10],
}
# Dev accuracy (of 20 pairs) per (kind, head, fraction, rate); test says the opposite, and never decides.
DEV = {
    ("pretrained", "attn", 1.0): {0.0005: 14, 0.001: 16, 0.002: 15},
    ("random", "attn", 1.0): {0.0005: 13, 0.001: 13, 0.002: 12},  # a tie: the smaller rate
    ("pretrained", "attn", 0.1): {0.0005: 12, 0.001: 13, 0.002: 11},
    ("random", "attn", 0.1): {0.0005: 11, 0.001: 12, 0.002: 15},
    ("pretrained", "pool-mlp", 0.1): {0.001: 14},
    ("random", "pool-mlp", 0.1): {0.001: 10},
    ("pretrained", "dense", 0.1): {0.001: 14},
    ("random", "dense", 0.1): {0.001: 9},
}


def chunk(folder: Path, **transfer) -> dict:
    """A chunk of two pretraining runs whose frozen transfer takes its recipe from ``folder``; no
    two parts share an object, so ``yaml.safe_dump`` writes it without aliases (configs refuse them)."""
    return json.loads(
        json.dumps(
            {
                "name": "chunk",
                "encoders": [{"name": "gpt-reuters", "pretraining_runs": [0, 1], "pretrain": PRETRAIN}],
                "finetune": SELECTION["finetune"],
                "fractions": [1.0, 0.1],
                "seeds": 2,
                "transfers": {
                    "gpt": [
                        {**FROZEN, "heads": ["attn"], "fractions": [1.0], "recipe_from": str(folder)},
                        {**FROZEN, "heads": ["picked"], "fractions": [0.1], "recipe_from": str(folder), **transfer},
                    ]
                },
            }
        )
    )


def stand_ins(matrix) -> list[dict]:
    return [
        {
            "name": entry["name"],
            "run_id": f"run-of-{entry['name']}",
            "num_layers": 3,
            "family": "gpt",
            "identity": f"stage-{entry['name']}",
        }
        for entry in matrix.encoders
    ]


def write_cells(folder: Path, cells, benchmark: str, settings: dict, score) -> Path:
    """``cells`` as a results folder; ``score(cell)`` gives (dev right of 20, test right of 20)."""
    (folder / CELLS_DIR).mkdir(parents=True)
    write_json(
        folder / BENCHMARK_FILE,
        {
            "format": FORMAT,
            "benchmark": benchmark,
            "experiment": "mrpc",
            "dataset": "mrpc",
            "data_digest": DATA_DIGEST,
            "labels": ["0", "1"],
            "positive_label": "1",
            "settings": settings,
        },
    )
    for order, cell in enumerate(cells):
        dev, test = score(cell)
        frames = {"dev": predictions([i < dev for i in range(20)]), "test": predictions([i < test for i in range(20)])}
        spec = {**cell.spec(), "method": cell.method, "config_text": "", "data": DATA_DIGEST}
        cell_hash = settings_hash(spec, protocol_version())
        content = predictions_bytes(frames)
        (folder / CELLS_DIR / f"{cell_hash}{PREDICTIONS_SUFFIX}").write_bytes(content)
        metrics = {f"{split}_acc": float((frame["label"] == frame["pred"]).mean()) for split, frame in frames.items()}
        metrics |= {f"{split}_f1": f1(frame) for split, frame in frames.items()}
        write_json(
            folder / CELLS_DIR / f"{cell_hash}.json",
            {
                "format": FORMAT,
                "cell_hash": cell_hash,
                "protocol": protocol_version(),
                "commit": "abc",
                "spec": spec,
                "data_digest": DATA_DIGEST,
                "order": [0, order],
                "cell": cell.fields(),
                "metrics": metrics,
                "encoder": {
                    "identity": cell.encoder_identity,
                    "digest": "c" * 64,
                    "name": cell.encoder_run.removeprefix("run-of-"),
                },
                "params": {"dev_pairs": "20", "test_pairs": "20"},
                "tags": {"method": cell.method},
                "run": {"run_id": f"run-{order}", "parent_run_id": "parent"},
                "predictions": {
                    "file": f"{cell_hash}{PREDICTIONS_SUFFIX}",
                    "sha256": hashlib.sha256(content).hexdigest(),
                    "rows": {"dev": 20, "test": 20},
                },
            },
        )
    write_manifest(folder)
    return folder


def f1(frame: pd.DataFrame) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(frame["label"], frame["pred"], pos_label="1"))


def selection_folder(folder: Path, keep=lambda cell: True) -> Path:
    matrix = parse_matrix(SELECTION)
    cells = [cell for cell in plan(matrix, stand_ins(matrix), list(matrix.finetune_args)) if keep(cell)]
    return write_cells(
        folder,
        cells,
        "selection",
        matrix.source,
        lambda cell: (
            DEV[(cell.kind, cell.head, cell.train_fraction)][cell.learning_rate],
            20 - DEV[(cell.kind, cell.head, cell.train_fraction)][cell.learning_rate],
        ),
    )


def recipes(cells) -> dict:
    """(method, kind) → the heads and rates its cells run at."""
    found = {}
    for cell in cells:
        if cell.kind in ("pretrained", "random"):
            rate = [arg for arg in cell.args if arg.startswith("--model.learning_rate=")]
            found.setdefault((cell.method, cell.kind), set()).add((cell.head, cell.learning_rate, *rate))
    return found


def test_each_arm_runs_at_its_own_pick_from_dev_never_test(tmp_path):
    folder = selection_folder(tmp_path / "selection")
    matrix = with_picks(parse_matrix(chunk(folder)), "chunk.yaml", DATA_DIGEST)
    cells = plan(matrix, stand_ins(matrix), list(matrix.finetune_args))
    assert recipes(cells) == {
        ("gpt-reuters-frozen-attn", "pretrained"): {("attn", 0.001, "--model.learning_rate=0.001")},
        ("random-frozen-attn", "random"): {("attn", 0.0005, "--model.learning_rate=0.0005")},  # tie: smaller rate
        ("gpt-reuters-frozen-picked@0.1", "pretrained"): {("pool-mlp", 0.001, "--model.learning_rate=0.001")},
        ("random-frozen-picked@0.1", "random"): {("attn", 0.002, "--model.learning_rate=0.002")},
    }
    assert {cell.recipe_from for cell in cells if cell.kind in ("pretrained", "random")} == {str(folder)}
    picked = [cell for cell in cells if cell.method == "gpt-reuters-frozen-picked@0.1"]
    assert sorted(cell.seed for cell in picked) == [0, 1, 2, 3] and picked[0].control == "random-frozen-picked@0.1"
    assert all(cell.grid_of == "" for cell in cells)  # a pick is no grid point: its arm's own method
    unread = plan(with_estimated_picks(parse_matrix(chunk(tmp_path / "not-run-yet"))), stand_ins(matrix), [])
    assert {cell.head for cell in unread if cell.kind == "random"} == {"attn"}  # estimates: the dearest head


def test_a_pick_is_carried_by_the_results_folder_and_checked(tmp_path):
    folder = selection_folder(tmp_path / "selection")
    matrix = with_picks(parse_matrix(chunk(folder)), "chunk.yaml")
    cells = [cell for cell in plan(matrix, stand_ins(matrix), []) if cell.kind in ("pretrained", "random")]
    written = write_cells(tmp_path / "chunk", cells, "chunk", matrix.source, lambda cell: (15, 15))
    _, results = read_folder(written)
    rows = pd.DataFrame([result.row() for result in results])
    assert set(rows.loc[rows["method"] == "random-frozen-picked@0.1", "learning_rate"]) == {0.002}
    assert set(rows["recipe_from"]) == {str(folder)}
    edited = next((written / CELLS_DIR).glob("*.json"))
    record = json.loads(edited.read_text())
    record["cell"]["learning_rate"] = 0.1
    edited.write_text(json.dumps(record))
    write_manifest(written)
    with pytest.raises(UserError, match=r"cell.learning_rate 0.1 is not the rate its settings train at") as raised:
        read_folder(written)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "case, message",
    [
        ("no folder", r"chunk.yaml: recipe_from .*missing: no results folder there"),
        (
            "no twin at 10%",
            r"chunk.yaml: transfers.gpt.frozen: recipe_from .* holds no grid points of arm "
            r"`random-frozen-picked@0.1` \(random, head picked, fraction 0.1\)",
        ),
        (
            "other pretraining",
            r"chunk.yaml: transfers.gpt.frozen: recipe_from .* is no selection of this recipe: "
            r"encoder 'gpt-reuters' is pretrained otherwise there",
        ),
        ("other transfer args", r"is no selection of this recipe: its transfer 'frozen' has another `args`"),
        ("another data set", r"results of another data set"),
        (
            "unfinished",
            r"chunk.yaml: transfers.gpt.frozen: recipe_from .*: the grid of arm `gpt-reuters-frozen-attn` "
            r"is not the one its settings declare: lacks attn 0.002",
        ),
        (
            "the chunk's seeds",
            r"recipe_from .*: its seeds \[10\] are this chunk's too; a selection takes a seed of "
            r"its own",
        ),
    ],
)
def test_a_pick_that_cannot_be_read_is_one_line_naming_config_folder_and_arm(tmp_path, case, message):
    keep = {
        "no twin at 10%": lambda cell: not (cell.kind == "random" and cell.train_fraction < 1),
        "unfinished": lambda cell: (cell.kind, cell.train_fraction, cell.learning_rate) != ("pretrained", 1, 0.002),
    }.get(case, lambda cell: True)
    folder = selection_folder(tmp_path / "selection", keep)
    config = chunk(tmp_path / "missing" if case == "no folder" else folder)
    if case == "the chunk's seeds":
        config["seeds"] = 6  # run 1's seeds: 6 to 11
    if case == "other pretraining":
        config["encoders"][0]["pretrain"] = {**PRETRAIN, "args": ["--trainer.max_epochs=2"]}
    if case == "other transfer args":
        config = chunk(folder, args=["--model.standardize=false"])
    with pytest.raises(UserError, match=message) as raised:
        with_picks(parse_matrix(config), "chunk.yaml", "e" * 64 if case == "another data set" else DATA_DIGEST)
    assert "\n" not in str(raised.value)


def test_a_picked_head_needs_a_selection_and_a_pick_no_grid(tmp_path):
    config = chunk(tmp_path)
    del config["transfers"]["gpt"][1]["recipe_from"]
    with pytest.raises(UserError, match=r"chunk.yaml: transfers.gpt.frozen: head `picked` .* needs `recipe_from"):
        parse_matrix(config, "chunk.yaml")
    with pytest.raises(
        UserError,
        match=r"chunk.yaml: transfers.gpt.frozen: `recipe_from` runs each arm at its pick; "
        r"an `lr_grid` \(here or the matrix's\) belongs to the selection's config",
    ):
        parse_matrix({**chunk(tmp_path), "lr_grid": [0.001, 0.002]}, "chunk.yaml")


def test_the_report_lists_each_arms_grid_and_pick_and_the_head_it_ran_with(tmp_path):
    folder = selection_folder(tmp_path / "selection")
    table = recipe_table([parse_matrix(chunk(folder))])
    picks = table[table["chosen"]].set_index("method")
    assert picks.loc["random-frozen-picked@0.1", ["head", "learning_rate"]].tolist() == ["attn", 0.002]
    assert len(table[table["method"] == "random-frozen-picked@0.1"]) == 5  # attn × 3 rates, pool-mlp, dense
    section = "\n".join(recipe_section(table))
    assert "## Recipes chosen per arm on dev" in section
    assert (
        f"| `gpt-reuters-frozen-attn` | 0.0005: 70.0, **0.001: 80.0**, 0.002: 75.0 | attn at 0.001 | `{folder}` |"
        in section
    )
    assert "attn 0.002: 75.0**" in section and "pool-mlp 0.001: 70.0**" in section
    assert recipe_table([parse_matrix(chunk(tmp_path / "not-run-yet"))]).empty
    # in a report over several encoders a twin's arm is named as its cells' method: random(<encoder>)-…
    by_encoder = recipe_table([parse_matrix(chunk(folder))], twins_by_encoder=True)
    assert set(by_encoder["method"]) == {
        method.replace("random-", "random(gpt-reuters)-") for method in table["method"]
    }
    assert by_encoder.drop(columns="method").equals(table.drop(columns="method"))
    runs = pd.DataFrame(
        {
            "method": ["e-frozen-picked@0.1", "random-frozen-picked@0.1"],
            "kind": ["pretrained", "random"],
            "head": ["pool-mlp", "attn"],
            "recipe_from": [str(folder)] * 2,
            "learning_rate": [1e-3, 2e-3],
            "seed": [0, 0],
            "run_id": ["a", "b"],
            "control": ["random-frozen-picked@0.1", ""],
            **{metric: [0.7, 0.6] for metric in ("dev_acc", "dev_f1", "test_acc", "test_f1")},
        }
    )
    frame = predictions([True] * 20)
    results = build_results(runs, {"a": frame, "b": frame}).set_index("method")
    assert results.loc["random-frozen-picked@0.1", "picked_head"] == "attn"
    assert results.loc["e-frozen-picked@0.1", "learning_rate"] == 1e-3
    assert recipe_of("full", 1e-3, str(folder)) == f"each arm's rate chosen on dev in `{folder}`"


def test_the_suite_stops_on_a_missing_selection_before_any_run(tmp_path, monkeypatch, capsys):
    from benchmarks import suite
    from tests.helpers import all_runs

    config = tmp_path / "chunk.yaml"
    config.write_text(yaml.safe_dump(chunk(tmp_path / "not-run-yet")))
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MRPC_DIR", str(tmp_path / "no-data-here"))  # named before the data set is read
    assert suite.main(["--config", str(config), "--results-dir", str(tmp_path / "out"), "--jobs", "1"]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if "INFO" not in line]  # MLflow's own lines aside
    assert len(error) == 1 and error[0].startswith(f"error: {config}: recipe_from {tmp_path / 'not-run-yet'}: ")
    assert all_runs(store) == [] and not (tmp_path / "out").exists()


def test_the_study_table_says_each_arm_chose_its_recipe_and_names_a_picked_head():
    from benchmarks.report.study_table import PRETRAINED_RECIPE, study_rows, study_tables

    folder = "results/families-v3-selection/elmo-finetuned"
    runs = pd.DataFrame(
        {
            "method": ["e-gradual-attn", "r-gradual-attn", "e-frozen-picked@0.1", "r-frozen-picked@0.1"],
            "family": "elmo",
            "encoder": "e",
            "head": ["attn", "attn", "linear", "attn"],
            "train_fraction": [1.0, 1.0, 0.1, 0.1],
            "transfer": ["gradual", "gradual", "frozen", "frozen"],
            "kind": ["pretrained", "random"] * 2,
            "finetune": ["gradual", "gradual", "frozen", "frozen"],
            "control": ["r-gradual-attn", "", "r-frozen-picked@0.1", ""],
            "recipe_from": folder,
        }
    )
    results = pd.DataFrame(
        {
            "method": runs["method"],
            "n_seeds": 10,
            "test_acc_mean": 0.7,
            "test_f1_mean": 0.8,
            "p_value_vs_random": 0.01,
            "gap_vs_random": 0.03,
            "gap_ci_low": 0.01,
            "gap_ci_high": 0.05,
            "collapsed_runs": 0,
            "learning_rate": [1e-3, 2e-3, 1e-3, 5e-4],
        }
    )
    rows = study_rows(results, runs, [{"name": "e"}]).set_index("method")
    assert rows.loc["e-gradual-attn", "recipe"] == f"each arm's rate chosen on dev in `{folder}`"
    assert rows.loc["e-frozen-picked@0.1", "head"] == "picked (linear)"
    text = "\n".join(study_tables(rows.reset_index()))
    assert PRETRAINED_RECIPE not in text and "| `e` () | frozen | picked (linear) |" in text
