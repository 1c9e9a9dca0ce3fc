"""A graded benchmark end to end, as a user runs one on a task of their own: the toy graded task
(one registered entry, ``tests/downstream/toy_graded_task.py``) imported by a two-line launcher,
then the real suite (a smoke ELMo pretrained on the task's pairs, a frozen head and its twin at two
seeds, the task's two baselines), ``export`` to a results folder, ``import`` into a fresh store and
``report`` from the folder alone. Every run carries the task's tag and correlations; the folder's
checks recompute them from the predicted scores (= scipy); the rebuilt report shows Pearson and
Spearman × 100 and the same results.csv as the suite's."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient
from scipy.stats import pearsonr, spearmanr

from benchmarks.results_files.folder import read_folder
from benchmarks.results_files.task_predictions import GradedPredictions
from harness.datasets.registry import DATASETS
from tests.downstream import toy_graded_task
from tests.helpers import all_runs, run_module

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = """import runpy
import sys

from harness.datasets.registry import register
from toy_overlap import TOY_OVERLAP

register(TOY_OVERLAP)
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""
METHODS = {"elmo-scalar-pool-mlp", "random-scalar-pool-mlp", "overlap-cosine", "tfidf-ridge"}
GRADED_METRICS = {"dev_pearson", "dev_spearman", "test_pearson", "test_spearman"}


def launch(directory: Path, uri: str, module: str, *args: str):
    """``python -m <module> <args>`` with the toy task registered first, its code the repository's."""
    process = run_module("launch", module, *args, uri=uri, cwd=directory, timeout=1200, PYTHONPATH=str(REPO))
    assert process.returncode == 0, (process.stdout[-3000:], process.stderr[-5000:])
    return process


@pytest.fixture(scope="module", autouse=True)
def toy_task_known():
    """The toy entry in this process's registry while this file's tests read its folder, as a user's
    plugin would have registered it; removed after, so other files see the built-in tasks only."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(DATASETS, toy_graded_task.NAME, toy_graded_task.TOY_OVERLAP)
        yield


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("graded-benchmark")
    shutil.copy(Path(toy_graded_task.__file__), directory / "toy_overlap.py")
    (directory / "launch.py").write_text(LAUNCHER)
    config = {
        "name": "toy-graded-quick",
        "dataset": {"dataset": toy_graded_task.NAME},
        "encoders": [
            {
                "name": "elmo",
                "pretrain": {"config": str(REPO / "configs/pretrain/smoke.yaml"), "args": ["--data.corpus=pairs"]},
            }
        ],
        "finetune": {"config": str(REPO / "configs/downstream/smoke.yaml")},
        "mixes": ["scalar"],
        "heads": ["pool-mlp"],
        "seeds": 2,
        "random_control": True,
        "baselines": ["overlap-cosine", "tfidf-ridge"],
    }
    (directory / "toy.yaml").write_text(yaml.safe_dump(config))
    uri = f"sqlite:///{directory / 'mlflow.db'}"
    scratch = f"--data.cache_dir={directory / 'cache'} --trainer.default_root_dir={directory / 'lightning'}"
    suite = launch(
        directory,
        uri,
        "benchmarks.suite",
        "--config",
        "toy.yaml",
        "--results-dir",
        "results",
        "--jobs",
        "1",  # in this process, where the launcher registered the task
        f"--finetune-args={scratch}",
    )
    launch(directory, uri, "benchmarks", "export", "--benchmark", "toy-graded-quick", "--out", "folder")
    fresh = f"sqlite:///{directory / 'fresh.db'}"
    imported = launch(directory, fresh, "benchmarks", "import", "folder")
    launch(directory, fresh, "benchmarks", "report", "folder", "--out", "rebuilt")
    return {"directory": directory, "uri": uri, "fresh": fresh, "suite": suite, "imported": imported}


def test_every_run_logs_the_tasks_correlations_and_carries_its_tag(benchmark):
    runs = all_runs(benchmark["uri"])
    parent = [run for run in runs if run.data.tags.get("stage") == "benchmark"]
    cells = [run for run in runs if run.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id]
    assert {run.data.tags["method"] for run in cells} == METHODS and len(cells) == 6
    assert all(run.data.tags["task"] == toy_graded_task.NAME for run in [*parent, *cells])
    assert all(GRADED_METRICS <= set(run.data.metrics) and "test_acc" not in run.data.metrics for run in cells)
    assert all(run.data.params["task"] == "graded" for run in cells)  # baselines log the task's params too
    assert not any({"num_classes", "f1_average", "labels"} & set(run.data.params) for run in cells)
    assert "dev pearson" in benchmark["suite"].stdout and "dev acc" not in benchmark["suite"].stdout


def test_the_folder_holds_the_predicted_scores_and_their_correlations_are_scipys(benchmark):
    folder = benchmark["directory"] / "folder"
    study, cells = read_folder(folder)  # every check passed
    assert study["labels"] == [] and len(cells) == 6
    for cell in cells:
        for split in ("dev", "test"):
            frame = cell.predictions[split].astype({"label": float, "pred": float})
            assert list(cell.predictions[split].columns) == ["id", "label", "pred"]
            expected = {
                f"{split}_pearson": pearsonr(frame["pred"], frame["label"]).statistic,
                f"{split}_spearman": spearmanr(frame["pred"], frame["label"]).statistic,
            }
            assert {key: cell.record["metrics"][key] for key in expected} == pytest.approx(expected, abs=1e-9)
            assert GradedPredictions(toy_graded_task.TASK).metrics(cell.predictions[split], split) == pytest.approx(
                expected, abs=1e-12
            )


def test_an_edited_score_in_the_exported_folder_is_caught(benchmark, tmp_path):
    from benchmarks.results_files.manifest import write_manifest
    from benchmarks.results_files.predictions_file import predictions_bytes
    from harness.errors import UserError
    from tests.benchmarks.test_results_graded import edit_record

    folder = shutil.copytree(benchmark["directory"] / "folder", tmp_path / "folder")
    cell = read_folder(folder)[1][0]
    frames = {split: frame.copy() for split, frame in cell.predictions.items()}
    frames["test"].loc[0, "pred"] = str(float(frames["test"].loc[0, "pred"]) + 1.0)
    content = predictions_bytes(frames)
    (folder / "cells" / cell.record["predictions"]["file"]).write_bytes(content)
    import hashlib

    edit_record(cell.path, lambda record: record["predictions"].update(sha256=hashlib.sha256(content).hexdigest()))
    write_manifest(folder)  # a forger who also rewrites the digests
    with pytest.raises(UserError, match=r"test_pearson .* is not its predictions'"):
        read_folder(folder)


def test_the_imported_cells_are_the_exported_ones(benchmark):
    imported = [run for run in all_runs(benchmark["fresh"]) if run.data.tags.get("cell_hash")]
    original = {
        run.data.tags["cell_hash"]: run.data.metrics
        for run in all_runs(benchmark["uri"])
        if run.data.tags.get("cell_hash") and run.data.tags.get("stage") != "pretrain"
    }
    assert len(imported) == 6
    for run in imported:
        assert run.data.tags["task"] == toy_graded_task.NAME
        assert {key: run.data.metrics[key] for key in GRADED_METRICS} == {
            key: original[run.data.tags["cell_hash"]][key] for key in GRADED_METRICS
        }
    assert MlflowClient(benchmark["fresh"]).search_experiments()[0] is not None


def test_the_report_rebuilt_from_the_folder_shows_correlations_times_100(benchmark):
    directory = benchmark["directory"]
    suite, rebuilt = (pd.read_csv(directory / name / "results.csv") for name in ("results", "rebuilt"))
    assert {f"{metric}_mean" for metric in GRADED_METRICS} <= set(rebuilt.columns)
    assert not any(column.startswith(("test_acc", "dev_acc")) for column in rebuilt.columns)
    pd.testing.assert_frame_equal(rebuilt, suite[rebuilt.columns.tolist()], check_exact=False, atol=1e-12)
    report = (directory / "rebuilt" / "report.md").read_text()
    assert "Pearson r and Spearman ρ × 100, mean ± std (min–max) over seeds" in report
    assert "| method | seeds | dev Pearson | dev Spearman | test Pearson | test Spearman |" in report
    row = rebuilt.set_index("method").loc["elmo-scalar-pool-mlp"]
    mean, std = 100 * row["test_pearson_mean"], 100 * row["test_pearson_std"]
    assert f"{mean:.1f} ± {std:.1f}" in report
    record = json.loads((directory / "folder" / "benchmark.json").read_text())
    assert record["settings"]["dataset"]["dataset"] == toy_graded_task.NAME
