"""A graded cell in a results folder (``benchmarks.results_files``): a toy graded data set registered
the way a user would, its cells written as ``python -m benchmarks export`` writes them, read back with
the task's checks (Pearson and Spearman recomputed from the predicted scores, = scipy), sealed and
imported like a cell of classes; an edited score or a folder whose labels or data set do not fit its
task is one line naming the file."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, spearmanr

from benchmarks.__main__ import main
from benchmarks.results_files.folder import (
    BENCHMARK_FILE,
    CELLS_DIR,
    FORMAT,
    PREDICTIONS_SUFFIX,
    read_folder,
    write_json,
)
from benchmarks.results_files.manifest import write_manifest
from benchmarks.results_files.predictions_file import read_predictions_file
from benchmarks.results_files.task_predictions import GradedPredictions, folder_task
from harness.datasets import registry
from harness.datasets.entry import DataSet
from harness.datasets.task import graded
from harness.errors import UserError
from harness.protocol import protocol_version, settings_hash
from tests.benchmarks.test_results_files import edit_record
from tests.helpers import all_runs

DATA_DIGEST = "e" * 64
TOY = "toy-graded"
TASK = graded(0, 5)
ENCODER = {"name": "elmo", "identity": "stage-1", "digest": "c" * 64, "family": "elmo", "run_id": "pretrain-run"}


@pytest.fixture(autouse=True)
def toy_task(monkeypatch):
    """A graded data set in one registry entry, as a plugin would add it."""

    def unread(spec):
        raise AssertionError("a results folder is read without its data")

    monkeypatch.setitem(
        registry.DATASETS, TOY, DataSet(name=TOY, load=unread, default_name=lambda spec: TOY, task=TASK)
    )


def scores(seed: int, noise: float, size: int) -> pd.DataFrame:
    """The split's gold scores on [0, 5] (one set for every cell) and predictions of seed ``seed``
    that follow them with ``noise``, as a graded run writes them."""
    gold = np.round(np.random.default_rng(size).uniform(0, 5, size), 1)
    generator = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id1": [str(100 + i) for i in range(size)],
            "id2": [str(500 + i) for i in range(size)],
            "label": gold,
            "pred": gold + generator.normal(0, noise, size),
            "sentence1": ["a sentence"] * size,
            "sentence2": ["another"] * size,
        }
    )


def scipy_metrics(frame: pd.DataFrame, split: str) -> dict[str, float]:
    return {
        f"{split}_pearson": pearsonr(frame["pred"], frame["label"]).statistic,
        f"{split}_spearman": spearmanr(frame["pred"], frame["label"]).statistic,
    }


def write_graded_cell(folder: Path, method: str, kind: str, seed: int, noise: float, order: int, control: str = ""):
    from benchmarks.results_files.predictions_file import predictions_bytes

    frames = {"dev": scores(seed, noise, 12), "test": scores(100 + seed, noise, 40)}
    spec = {
        "kind": kind,
        "seed": seed,
        "method": method,
        "encoder": ENCODER["identity"],
        "mix": "scalar",
        "head": "pool-mlp",
        "train_fraction": 1.0,
        "args": [f"--data.dataset={TOY}"],
        "config": "",
        "config_text": "",
        "data": DATA_DIGEST,
    }
    protocol = protocol_version()
    cell_hash = settings_hash(spec, protocol)
    content = predictions_bytes(frames)
    (folder / CELLS_DIR / f"{cell_hash}{PREDICTIONS_SUFFIX}").write_bytes(content)
    metrics = {
        key: float(value) for split, frame in frames.items() for key, value in scipy_metrics(frame, split).items()
    }
    cell = {
        "method": method,
        "kind": kind,
        "seed": seed,
        "encoder": "elmo",
        "encoder_run": "pretrain-run",
        "mix": "scalar",
        "head": "pool-mlp",
        "train_fraction": 1.0,
        "control": control,
        "args": spec["args"],
        "config": "",
        "family": "elmo",
        "transfer": "",
        "encoder_identity": ENCODER["identity"],
        "probe_of": "",
        "grid_of": "",
        "learning_rate": None,
    }
    record = {
        "format": FORMAT,
        "cell_hash": cell_hash,
        "protocol": protocol,
        "commit": "abc",
        "spec": spec,
        "data_digest": DATA_DIGEST,
        "order": [0, order],
        "encoder": ENCODER,
        "cell": cell,
        "metrics": metrics,
        "params": {"dev_pairs": "12", "test_pairs": "40"},
        "tags": {"method": method, "task": TOY},
        "run": {"run_id": f"run-{method}-{seed}", "parent_run_id": "parent"},
        "predictions": {
            "file": f"{cell_hash}{PREDICTIONS_SUFFIX}",
            "sha256": hashlib.sha256(content).hexdigest(),
            "rows": {"dev": 12, "test": 40},
        },
    }
    write_json(folder / CELLS_DIR / f"{cell_hash}.json", record)


def make_graded_folder(folder: Path, seeds: int = 3) -> Path:
    """A method whose scores follow the gold ones more closely than its twin's, over ``seeds`` seeds."""
    (folder / CELLS_DIR).mkdir(parents=True)
    write_json(
        folder / BENCHMARK_FILE,
        {
            "format": FORMAT,
            "benchmark": "tiny-graded",
            "experiment": TOY,
            "dataset": TOY,
            "data_digest": DATA_DIGEST,
            "labels": [],
            "positive_label": None,
            "settings": {"seeds": seeds, "dataset": {"dataset": TOY}},
        },
    )
    for seed in range(seeds):
        write_graded_cell(folder, "elmo-scalar-pool-mlp", "pretrained", seed, 0.5, 2 * seed, "random-scalar-pool-mlp")
        write_graded_cell(folder, "random-scalar-pool-mlp", "random", seed, 2.5, 2 * seed + 1)
    write_manifest(folder)
    return folder


def graded_cell(folder: Path) -> Path:
    return next(path for path in sorted((folder / CELLS_DIR).glob("*.json")))


def test_a_graded_folder_reads_back_with_its_correlations_recomputed_as_scipy_does(tmp_path):
    benchmark, cells = read_folder(make_graded_folder(tmp_path / "a"))
    assert folder_task(benchmark, tmp_path) == TASK and len(cells) == 6
    test = cells[0].predictions["test"]
    assert list(test.columns) == ["id1", "id2", "label", "pred"]  # no sentence, no probability
    expected = scipy_metrics(test.astype({"label": float, "pred": float}), "test")
    assert GradedPredictions(TASK).metrics(test, "test") == pytest.approx(expected, abs=1e-12)
    assert cells[0].record["metrics"]["test_pearson"] == pytest.approx(expected["test_pearson"], abs=1e-12)


def rescore(folder: Path, change) -> None:
    """Edit a cell's predictions and write its sha256 and the manifest again, as a careful forger would."""
    path = graded_cell(folder)
    record = json.loads(path.read_text())
    predictions = folder / CELLS_DIR / record["predictions"]["file"]
    frames = read_predictions_file(predictions, record["predictions"]["sha256"], DATA_DIGEST, GradedPredictions(TASK))
    from benchmarks.results_files.predictions_file import predictions_bytes

    content = predictions_bytes({split: change(frame.copy(), split) for split, frame in frames.items()})
    predictions.write_bytes(content)
    edit_record(path, lambda r: r["predictions"].update(sha256=hashlib.sha256(content).hexdigest()))
    write_manifest(folder)


def better_scores(frame: pd.DataFrame, split: str) -> pd.DataFrame:
    if split == "test":
        frame.loc[0, "pred"] = frame.loc[0, "label"]
    return frame


def unknown_data_set(folder: Path) -> None:
    path = folder / BENCHMARK_FILE
    benchmark = json.loads(path.read_text())
    benchmark["settings"]["dataset"]["dataset"] = "not-registered"
    write_json(path, benchmark)
    write_manifest(folder)


def labels_on_a_graded_task(folder: Path) -> None:
    path = folder / BENCHMARK_FILE
    write_json(path, {**json.loads(path.read_text()), "labels": ["0", "1"], "positive_label": "1"})
    write_manifest(folder)


def scores_out_of_range(folder: Path) -> None:
    rescore(folder, lambda frame, split: frame.assign(label=frame["label"].where(frame.index != 0, "7.5")))


def text_for_a_score(folder: Path) -> None:
    rescore(folder, lambda frame, split: frame.assign(pred=frame["pred"].where(frame.index != 0, "high")))


@pytest.mark.parametrize(
    "spoil, words",
    [
        (lambda folder: rescore(folder, better_scores), "test_pearson"),
        (unknown_data_set, "settings.dataset.dataset 'not-registered'"),
        (labels_on_a_graded_task, "labels ['0', '1']"),
        (scores_out_of_range, "label '7.5' is not a score in [0, 5]"),
        (text_for_a_score, "pred 'high' is not a finite number"),
    ],
    ids=["edited-pred", "unknown-data-set", "labels", "out-of-range", "text"],
)
def test_an_edited_graded_folder_is_one_line_naming_the_file(tmp_path, spoil, words):
    folder = make_graded_folder(tmp_path / "a", seeds=1)
    spoil(folder)
    with pytest.raises(UserError) as raised:
        read_folder(folder)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_a_graded_folder_seals_and_imports_like_a_folder_of_classes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    folder = make_graded_folder(tmp_path / "a")
    manifest = (folder / "manifest.json").read_bytes()
    assert main(["seal", "--again", str(folder)]) == 0
    assert (folder / "manifest.json").read_bytes() != manifest  # a second seal, chained to the first
    assert main(["import", str(folder)]) == 0, capsys.readouterr().err
    cells = [run for run in all_runs(tmp_path) if run.data.tags.get("cell_hash")]
    assert len(cells) == 6 and all(run.data.tags["task"] == TOY for run in cells)
    assert {"test_pearson", "test_spearman", "dev_pearson", "dev_spearman"} <= set(cells[0].data.metrics)


def test_a_report_from_a_graded_folder_shows_its_correlations_times_100(tmp_path):
    from harness.datasets.metric_text import metrics_sentence, points, short_title

    folder = make_graded_folder(tmp_path / "a")
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    results = pd.read_csv(tmp_path / "report" / "results.csv").set_index("method")
    assert not [column for column in results.columns if column.startswith(("dev_acc", "test_acc", "test_f1"))]
    cells = read_folder(folder)[1]
    pearsons = [cell.record["metrics"]["test_pearson"] for cell in cells if cell.record["cell"]["kind"] == "pretrained"]
    assert results.loc["elmo-scalar-pool-mlp", "test_pearson_mean"] == pytest.approx(np.mean(pearsons), abs=1e-12)
    report = (tmp_path / "report" / "report.md").read_text()
    assert f"{metrics_sentence(TASK)}, mean ± std" in report and "Accuracy" not in report
    header = " | ".join(map(short_title, TASK.run_metrics()))
    assert (
        f"| method | seeds | {header} |" in report
        and header == "dev Pearson | dev Spearman | test Pearson | test Spearman"
    )
    row = results.loc["elmo-scalar-pool-mlp"]
    assert f"{100 * row['test_pearson_mean']:.1f} ± {100 * row['test_pearson_std']:.1f}" in report
    assert (
        f"Best method by mean test Pearson r: `elmo-scalar-pool-mlp` ({points(row['test_pearson_mean'], 'pearson')})"
        in report
    )
    assert "d = 1 (only the method right)" not in report and "pseudo-value" in report  # How to read, for correlations
