"""A graded task added the way a user adds one — one ``DataSet`` entry in a module of its own
(``toy_graded_task.py``, copied as the user's), registered by the user's launcher before the CLI
runs, and a config — then the real ``python -m downstream fit`` on a tiny biLM: the run logs
``{dev,test}_{pearson,spearman}``, each equal to scipy's on the logged predictions file, its best
checkpoint monitored ``dev_pearson``, and its summary prints the correlations × 100."""

import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient
from scipy.stats import pearsonr, spearmanr

from tests.downstream import toy_graded_task
from tests.helpers import printed_run_id, run_module, save_tiny_bilm

pytestmark = pytest.mark.slow

# What a user writes: the module with the entry, a line that imports it before the CLI runs, a config.
LAUNCHER = """import runpy

from harness.datasets.registry import register
from toy_overlap import TOY_OVERLAP

register(TOY_OVERLAP)
runpy.run_module("downstream", run_name="__main__", alter_sys=True)
"""
CONFIG = """seed_everything: 0
trainer:
  max_epochs: 3
  deterministic: true
  log_every_n_steps: 5
  enable_model_summary: false
  enable_progress_bar: false
  callbacks:
    - class_path: pytorch_lightning.callbacks.EarlyStopping
      init_args:
        monitor: dev_pearson
        mode: max
        patience: 10
model:
  mix: scalar
  head: pool-mlp
  hidden_size: 32
  learning_rate: 0.003
data:
  dataset: toy-overlap
  batch_size: 16
  cache_dir: none
"""


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("graded-cli")
    shutil.copy(Path(toy_graded_task.__file__), directory / "toy_overlap.py")
    (directory / "toy_fit.py").write_text(LAUNCHER)
    (directory / "toy-overlap.yaml").write_text(CONFIG)
    pairs = toy_graded_task.load(None).train
    encoder = save_tiny_bilm([s for pair in pairs for s in (pair.sentence1, pair.sentence2)], directory)
    uri = f"sqlite:///{directory / 'mlflow.db'}"
    process = run_module(
        "toy_fit", "fit", "--config", "toy-overlap.yaml", f"--model.encoder={encoder}", uri=uri, cwd=directory
    )
    run = MlflowClient(uri).get_run(printed_run_id(process))
    return {"directory": directory, "uri": uri, "process": process, "run": run}


def logged_predictions(fitted: dict, split: str) -> pd.DataFrame:
    client = MlflowClient(fitted["uri"])
    path = client.download_artifacts(fitted["run"].info.run_id, f"predictions/{split}.csv", str(fitted["directory"]))
    return pd.read_csv(path, dtype={"id": str})


def test_the_run_logs_the_tasks_metrics_and_no_class_metrics(fitted):
    run = fitted["run"]
    assert run.info.status == "FINISHED"
    metrics = run.data.metrics
    assert {"dev_pearson", "dev_spearman", "test_pearson", "test_spearman"} <= set(metrics)
    assert not {"dev_acc", "dev_f1", "test_acc", "test_f1", "train_acc"} & set(metrics)
    assert metrics["test_pearson"] > 0.3  # the overlap score is learnable from the pair
    assert run.data.params["task"] == "graded" and run.data.params["score_range"] == "[0.0, 5.0]"
    assert not {"labels", "num_classes", "f1_average", "positive_label", "train_label_counts"} & set(run.data.params)


@pytest.mark.parametrize("split", ["dev", "test"])
def test_each_metric_is_scipys_on_the_logged_predictions_file(fitted, split):
    frame = logged_predictions(fitted, split)
    assert list(frame.columns) == ["id", "label", "pred", "sentence1", "sentence2"]
    gold = {p.ids[0]: p.label for p in toy_graded_task.load(None).split(split)}
    assert frame["label"].tolist() == [gold[key] for key in frame["id"]]
    metrics = fitted["run"].data.metrics
    assert metrics[f"{split}_pearson"] == pytest.approx(pearsonr(frame["pred"], frame["label"]).statistic, abs=1e-12)
    assert metrics[f"{split}_spearman"] == pytest.approx(spearmanr(frame["pred"], frame["label"]).statistic, abs=1e-12)


def test_the_best_checkpoint_monitored_dev_pearson(fitted):
    run_id = fitted["run"].info.run_id
    best = torch.load(fitted["directory"] / "checkpoints" / "finetune" / run_id / "best.ckpt", weights_only=True)
    monitors = {
        key.split("{")[0]: state for key, state in best["callbacks"].items() if "'monitor': 'dev_pearson'" in key
    }
    assert set(monitors) == {"ModelCheckpoint", "EarlyStopping"}
    history = MlflowClient(fitted["uri"]).get_metric_history(run_id, "dev_pearson")
    history = sorted(history, key=lambda entry: (entry.step, entry.timestamp))
    best_validation = max(entry.value for entry in history[:-1])  # the last entry: EvaluateBest's, from the file
    assert float(monitors["ModelCheckpoint"]["best_model_score"]) == pytest.approx(best_validation, abs=1e-6)
    assert fitted["run"].data.metrics["dev_pearson"] == pytest.approx(best_validation, abs=1e-4)  # float32 vs scipy


def test_the_summary_prints_the_correlations_times_100(fitted):
    metrics, out = fitted["run"].data.metrics, fitted["process"].stdout
    expected = f"Pearson r {100 * metrics['test_pearson']:.1f}  Spearman ρ {100 * metrics['test_spearman']:.1f}"
    assert f"  test       {expected}   (toy-overlap test, 80 pairs)" in out
    assert "95% interval over these pairs: Pearson r" in out and "Wilson" not in out
    assert "acc " not in out.split("── finetune finished")[-1]
