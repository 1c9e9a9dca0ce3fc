"""``python -m benchmarks.evaluate`` end to end on a toy graded task a user added (one module that
registers its entry, imported before the command runs) with a smoke biLM: the parent run with a
child per task, zero-shot beside the probe, the head, the twin and the task's baselines, a results
folder per task and the table across tasks."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.downstream import toy_graded_task
from tests.helpers import printed_run_id, run_module

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
QUICK = ["--trainer.max_epochs=1", "--trainer.limit_val_batches=2", "--data.max_sentences=200"]

LAUNCHER = """import runpy

from harness.datasets.registry import register
from toy_overlap import TOY_OVERLAP

register(TOY_OVERLAP)
runpy.run_module("benchmarks.evaluate", run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, mrpc_dir) -> dict:
    directory = tmp_path_factory.mktemp("evaluate")
    shutil.copy(Path(toy_graded_task.__file__), directory / "toy_overlap.py")
    (directory / "toy_evaluate.py").write_text(LAUNCHER)
    uri = f"sqlite:///{directory / 'mlflow.db'}"
    pretrained = run_module(  # a tracked smoke biLM on the synthetic MRPC's text: what evaluate scores
        "pretrain", "fit", "--config", str(SMOKE), *QUICK, uri=uri, cwd=directory, mrpc_dir=mrpc_dir
    )
    encoder = f"runs:/{printed_run_id(pretrained)}"
    out = directory / "out"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": os.pathsep.join([str(directory), str(REPO)])}
    process = subprocess.run(
        [sys.executable, "toy_evaluate.py", "--encoder", encoder, "--tasks", "toy-overlap", "--out", str(out)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert process.returncode == 0, (process.stdout[-3000:], process.stderr[-3000:])
    return {"uri": uri, "out": out, "process": process}


def test_one_parent_with_a_child_per_task_and_the_methods_under_it(evaluated):
    client = MlflowClient(evaluated["uri"])
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = client.search_runs(experiments, "", max_results=1000)
    assert all(run.info.status == "FINISHED" for run in runs), [(r.info.run_name, r.info.status) for r in runs]
    parents = [run for run in runs if run.data.tags.get("kind") == "evaluate"]
    assert len(parents) == 1
    tasks = [run for run in runs if run.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert [run.data.tags["dataset"] for run in tasks] == ["toy-overlap"]
    methods = {
        run.data.tags.get("method") for run in runs if run.data.tags.get("mlflow.parentRunId") == tasks[0].info.run_id
    }
    assert {
        "elmo-zero-shot",
        "elmo-zero-shot-st",
        "random-zero-shot",
        "elmo-linear-probe",
        "random-linear-probe",
        "elmo-scalar-pool-mlp",
        "random-scalar-pool-mlp",
        "overlap-cosine",
        "tfidf-ridge",
    } <= methods


def test_every_method_of_the_encoder_and_its_twin_counts_the_test_pairs_it_read(evaluated):
    """The probe, zero-shot and the head each log ``test_seen_pairs`` (the encoder's text is known);
    the baselines, which read no pretraining text, do not."""
    client = MlflowClient(evaluated["uri"])
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = client.search_runs(experiments, "tags.dataset = 'toy-overlap'", max_results=1000)
    counted = {
        run.data.tags["method"]: run.data.metrics.get("test_seen_pairs") for run in runs if "method" in run.data.tags
    }
    for method in ("elmo-linear-probe", "random-linear-probe", "elmo-zero-shot", "elmo-scalar-pool-mlp"):
        assert counted[method] == 0, (method, counted)
    assert counted["tfidf-ridge"] is None and counted["overlap-cosine"] is None


def test_zero_shot_files_and_metrics(evaluated):
    folder = evaluated["out"] / "toy-overlap" / "zero-shot" / "elmo-zero-shot" / "s0"
    twins = evaluated["out"] / "toy-overlap" / "zero-shot" / "random-zero-shot"
    assert [path.name for path in twins.iterdir()] == ["s0"]  # each seed its own files (one seed here)
    frame = pd.read_csv(folder / "test.csv", dtype={"id": str})
    assert list(frame.columns) == ["id", "label", "pred", "sentence1", "sentence2"] and len(frame) == 80
    assert (frame["pred"].abs() <= 1 + 1e-9).all()  # cosines (rounding may pass 1 by an ulp)
    metrics = json.loads((folder / "metrics.json").read_text())["metrics"]
    assert metrics["test_spearman"] == pytest.approx(frame["pred"].corr(frame["label"], method="spearman"))


def test_a_results_folder_per_task_and_the_table(evaluated):
    out = evaluated["out"]
    assert (out / "toy-overlap" / "results" / "manifest.json").is_file()
    assert (out / "toy-overlap" / "suite" / "report.md").is_file()
    table = (out / "table.md").read_text()
    assert "| method | toy-overlap (test Pearson r) |" in table
    for row in (
        "elmo-zero-shot (ρ)",
        "elmo-linear-probe",
        "elmo-scalar-pool-mlp",
        "random-scalar-pool-mlp",
        "tfidf-ridge",
    ):
        assert f"| {row} | " in table, row
    assert "| test pairs with a sentence the encoder read | 0 of 80 |" in table  # its text is known: none
    printed = evaluated["process"].stdout
    assert "── evaluate " in printed and "Wall time:" in printed.splitlines()[-4]


def test_the_pilot_summary_reads_an_evaluation_as_a_chunk(evaluated, tmp_path, monkeypatch):
    from benchmarks.evaluate import pilot_summary
    from benchmarks.results_files.folder import read_folder
    from harness.datasets.registry import DATASETS

    monkeypatch.setitem(DATASETS, toy_graded_task.NAME, toy_graded_task.TOY_OVERLAP)  # for this test only

    chunk = tmp_path / "pilot" / "elmo-a"
    chunk.mkdir(parents=True)
    (chunk / "evaluate").symlink_to(evaluated["out"], target_is_directory=True)
    record = {"chunk": "elmo-a", "family": "elmo", "tasks": ["toy-overlap"], "commit": "0" * 40}
    record.update(stages=[{"minutes": 1.0}], evaluate_minutes=2.0)
    record.update(minutes=3.0, estimate_minutes=4, load_average_start=[1.0], load_average_end=[1.5])
    (chunk / "chunk.json").write_text(json.dumps(record))
    assert pilot_summary.main([str(tmp_path / "pilot")]) == 0
    rows = pd.read_csv(tmp_path / "pilot" / "components.csv").set_index("arm")
    _, cells = read_folder(evaluated["out"] / "toy-overlap" / "results")
    probe = {cell.record["cell"]["method"]: cell.record["metrics"]["test_pearson"] for cell in cells}
    assert rows.loc["linear-probe", "score"] == pytest.approx(100 * probe["elmo-linear-probe"])
    assert rows.loc["linear-probe", "gap"] == pytest.approx(
        100 * (probe["elmo-linear-probe"] - probe["random-linear-probe"])
    )
    zero_shot = json.loads(
        (evaluated["out"] / "toy-overlap" / "zero-shot" / "elmo-zero-shot" / "s0" / "metrics.json").read_text()
    )
    assert rows.loc["zero-shot", "score"] == pytest.approx(100 * zero_shot["metrics"]["test_spearman"])
    summary = (tmp_path / "pilot" / "summary.md").read_text()
    assert "| elmo | linear-probe | " in summary and "nan" not in summary  # a probe logs no CPU time
    assert "| elmo-a | toy-overlap | `" + "0" * 12 + "` | 1 | 2 | 3 | 4 | 1.0, 1.5 |" in summary
