"""Importing results folders never overrides a store (``benchmarks.results_files.store_transfer``):
a folder imported again adds nothing, a copy with other numbers is refused naming both digests,
only a cell's own tags are written, never into an experiment encoders come from, never with a
future start time; a store's duplicates are named and removed by one command, and a suite never
picks silently between copies that disagree."""

import json
import time

import pytest
from mlflow.tracking import MlflowClient

from benchmarks.__main__ import main
from benchmarks.results_files.folder import CELLS_DIR, ResultSet
from benchmarks.results_files.manifest import write_manifest
from benchmarks.results_files.store_transfer import import_cell
from benchmarks.tasks.reuse import finished_run
from tests.benchmarks.test_results_files import edit_record, first_cell, make_folder
from tests.helpers import all_runs, assert_one_line_error


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("ENCODER_EXPERIMENTS", raising=False)
    return uri


def cell_runs(tmp_path) -> list:
    return [
        run for run in all_runs(tmp_path) if run.data.tags.get("cell_hash") and run.info.lifecycle_stage == "active"
    ]


def refused(capsys, *args: str) -> str:
    """``python -m benchmarks <args>`` stopped at one line; returns it."""
    assert main(list(args)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line for line in lines if line.startswith("error: ")] == [lines[-1]], lines  # above it: MLflow's logs
    assert "Traceback" not in "\n".join(lines)
    return lines[-1]


def test_a_folder_imported_twice_adds_nothing(tmp_path, store, capsys):
    folder = make_folder(tmp_path / "a")
    assert main(["import", str(folder)]) == 0
    first = {run.info.run_id for run in all_runs(tmp_path)}
    assert len(cell_runs(tmp_path)) == 6
    capsys.readouterr()
    assert main(["import", str(folder)]) == 0
    assert {run.info.run_id for run in all_runs(tmp_path)} == first
    assert "nothing new" in capsys.readouterr().out


def test_a_folder_holding_some_cells_already_links_them(tmp_path, store):
    small, full = make_folder(tmp_path / "small", seeds=1), make_folder(tmp_path / "full")
    assert main(["import", str(small)]) == 0
    assert main(["import", str(full)]) == 0
    runs = cell_runs(tmp_path)
    assert len(runs) == 6 and len({run.data.tags["cell_hash"] for run in runs}) == 6  # two linked, four added


def test_a_copy_with_other_numbers_is_refused_naming_both_digests(tmp_path, store, capsys):
    first, second = make_folder(tmp_path / "a"), make_folder(tmp_path / "b", twin_right=20)
    assert main(["import", str(first)]) == 0
    before = {run.info.run_id for run in all_runs(tmp_path)}
    records = {
        json.loads(path.read_text())["cell_hash"]: json.loads(path.read_text())
        for folder in (first, second)
        for path in sorted((folder / CELLS_DIR).glob("*.json"))
    }
    line = refused(capsys, "import", str(second))
    assert "is in the store already" in line and "other numbers" in line and "nothing imported" in line
    cell_hash = line.split("cell ")[1].split(" ")[0]
    kept = next(path for path in (first / CELLS_DIR).glob(f"{cell_hash}.json"))
    assert json.loads(kept.read_text())["predictions"]["sha256"][:12] in line  # the store's copy
    conflicting = json.loads((second / CELLS_DIR / f"{cell_hash}.json").read_text())
    assert conflicting["predictions"]["sha256"][:12] in line and cell_hash in records
    assert {run.info.run_id for run in all_runs(tmp_path)} == before  # the first stays, nothing added
    assert_one_line_error(lambda: ResultSet([first, second]), "has other numbers")  # a report over both says so


def test_two_folders_of_one_import_that_disagree_import_nothing(tmp_path, store, capsys):
    first, second = make_folder(tmp_path / "a"), make_folder(tmp_path / "b", twin_right=20)
    line = refused(capsys, "import", str(first), str(second))
    assert "has other numbers than in" in line
    assert all_runs(tmp_path) == []


def test_only_the_harness_cell_tags_are_imported(tmp_path, store):
    folder = make_folder(tmp_path / "a", seeds=1)
    for path in (folder / CELLS_DIR).glob("*.json"):
        edit_record(
            path,
            lambda record: record["tags"].update(
                {"mlflow.user": "mallory", "mlflow.source.name": "x", "note": "planted", "stage": "finetune"}
            ),
        )
    write_manifest(folder)  # a crafted folder: its manifest rewritten to match
    assert main(["import", str(folder)]) == 0
    for run in cell_runs(tmp_path):
        assert run.data.tags.get("mlflow.user") != "mallory" and "note" not in run.data.tags
        assert "mlflow.source.name" not in run.data.tags and run.data.tags["stage"] == "finetune"


def test_a_cell_tagged_with_another_stage_is_refused(tmp_path, store, capsys):
    folder = make_folder(tmp_path / "a", seeds=1)
    edit_record(first_cell(folder), lambda record: record["tags"].update(stage="pretrain"))
    write_manifest(folder)  # a crafted folder: its manifest rewritten to match
    assert "tag stage='pretrain' is not a cell's" in refused(capsys, "import", str(folder))
    assert all_runs(tmp_path) == []


@pytest.mark.parametrize("experiment, variable", [("pretrain", ""), ("team-lms", "team-lms")])
def test_a_folder_may_not_target_an_experiment_encoders_come_from(
    tmp_path, store, capsys, monkeypatch, experiment, variable
):
    monkeypatch.setenv("ENCODER_EXPERIMENTS", variable)
    folder = make_folder(tmp_path / "a", seeds=1)
    benchmark = folder / "benchmark.json"
    benchmark.write_text(json.dumps({**json.loads(benchmark.read_text()), "experiment": experiment}))
    write_manifest(folder)  # a crafted folder: its manifest rewritten to match
    line = refused(capsys, "import", str(folder))
    assert f"targets experiment '{experiment}', where encoders are resolved from" in line
    assert all_runs(tmp_path) == []


def test_a_start_time_in_the_future_is_refused(tmp_path, store, capsys):
    folder = make_folder(tmp_path / "a", seeds=1)
    year_2100 = 4_102_444_800_000
    edit_record(first_cell(folder), lambda record: record["run"].update(start_time=year_2100))
    write_manifest(folder)  # a crafted folder: its manifest rewritten to match
    line = refused(capsys, "import", str(folder))
    assert "run.start_time 4102444800000 lies in the future (2100-01-01)" in line
    assert all_runs(tmp_path) == []


def import_again(folder, tmp_path, experiment: str = "mrpc") -> list[str]:
    """The cells of ``folder`` written again, the way an import on today's main duplicated them."""
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = client.create_run(
        client.get_experiment_by_name(experiment).experiment_id, tags={"imported_from": str(folder)}
    ).info.run_id
    return [import_cell(cell, experiment, parent) for cell in ResultSet([folder]).ordered]


def test_duplicates_are_named_and_removed_by_one_command(tmp_path, store, capsys):
    folder = make_folder(tmp_path / "a", seeds=1)
    assert main(["import", str(folder)]) == 0
    again = import_again(folder, tmp_path)
    capsys.readouterr()
    assert main(["duplicates"]) == 0
    out = capsys.readouterr().out
    assert out.count("2 copies with the same numbers") == 2 and "duplicates --remove" in out
    assert main(["duplicates", "--remove"]) == 0
    assert len(cell_runs(tmp_path)) == 2 and not set(again) & {run.info.run_id for run in cell_runs(tmp_path)}
    assert main(["duplicates"]) == 0 and "no cell is held twice" in capsys.readouterr().out


def test_conflicting_duplicates_keep_the_copy_computed_here(tmp_path, store, capsys):
    folder, other = make_folder(tmp_path / "a", seeds=1), make_folder(tmp_path / "b", seeds=1, twin_right=20)
    assert main(["import", str(folder)]) == 0
    client = MlflowClient(store)
    for run in cell_runs(tmp_path):
        client.delete_tag(run.info.run_id, "imported_from")  # as if computed in this store
    planted = import_again(other, tmp_path)
    capsys.readouterr()
    assert main(["duplicates"]) == 1 and "copies with other numbers" in capsys.readouterr().out
    assert main(["duplicates", "--remove"]) == 0
    kept = {run.info.run_id for run in cell_runs(tmp_path)}
    assert len(kept) == 2 and not set(planted) & kept


def test_suite_reuse_never_picks_between_copies_that_disagree(tmp_path, store):
    folder, other = make_folder(tmp_path / "a", seeds=1), make_folder(tmp_path / "b", seeds=1, twin_right=20)
    assert main(["import", str(folder)]) == 0
    cells = ResultSet([folder]).ordered
    same = cells[0].cell_hash  # the method's cell: the same numbers in both folders
    twin = cells[1].cell_hash  # the twin's: other numbers in ``other``
    time.sleep(0.01)
    import_again(other, tmp_path)
    assert finished_run("mrpc", same) is not None
    assert_one_line_error(
        lambda: finished_run("mrpc", twin), f"cell {twin}", "copies with other numbers", "none is chosen"
    )


def test_a_suite_never_picks_between_the_store_and_a_results_folder(tmp_path, store):
    """``--results`` holds one copy of a cell, the store another with other numbers: the suite stops."""
    from types import SimpleNamespace

    from benchmarks.cell.definition import Cell
    from benchmarks.engine.task_graph import StudyExecutor

    folder, other = make_folder(tmp_path / "a", seeds=1), make_folder(tmp_path / "b", seeds=1, twin_right=20)
    assert main(["import", str(other)]) == 0
    results = ResultSet([folder])
    twin = results.ordered[1]
    executor = object.__new__(StudyExecutor)  # only what the reuse lookup needs
    executor.results, executor.client = results, MlflowClient(store)
    executor.study = SimpleNamespace(experiment="mrpc", parent="another-parent")
    executor.cell_settings = lambda cell: ("", twin.cell_hash)
    assert_one_line_error(
        lambda: executor.add_cell(Cell("random-scalar-pool-mlp", "random", 0)),
        "have other numbers",
        "none is chosen",
        str(twin.path),
    )
