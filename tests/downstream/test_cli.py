"""The real ``python -m downstream`` CLI on the smoke config, over one smoke pretrain run: what a
finetune run leaves in MLflow, the random control, determinism, train fractions, and how user
errors end (one line, exit 2, no run left RUNNING)."""

import json
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from downstream.run.evaluation import PREDICTION_COLUMNS
from harness.datasets import seen_sentences
from harness.datasets.mrpc import load_mrpc
from harness.tracking.views import VIEW_PREFIX
from tests.helpers import all_runs, assert_one_line_exit, printed_run_id, run_module

REPO = Path(__file__).resolve().parents[2]
PRETRAIN_SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
FINETUNE_SMOKE = REPO / "configs" / "downstream" / "smoke.yaml"
PRETRAIN_QUICK = ["--trainer.max_epochs=1", "--trainer.limit_val_batches=2", "--data.max_sentences=200"]
SMOKE_PAIRS = 300  # data.max_pairs of the smoke config
METRICS = ("dev_acc", "dev_f1", "test_acc", "test_f1")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory, real_mrpc_dir) -> dict:
    """One smoke pretrain run in a fresh SQLite store, shared by every test here."""
    directory = tmp_path_factory.mktemp("store")
    store = {"directory": directory, "uri": f"sqlite:///{directory / 'mlflow.db'}", "mrpc_dir": real_mrpc_dir}
    process = run_stage(store, "pretrain", PRETRAIN_SMOKE, *PRETRAIN_QUICK)
    assert process.returncode == 0, process.stderr[-5000:]
    runs = all_runs(store["uri"])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    store["pretrain_run_id"] = runs[0].info.run_id
    return store


def run_stage(store: dict, module: str, config: Path, *flags: str) -> subprocess.CompletedProcess:
    return run_module(
        module,
        "fit",
        "--config",
        str(config),
        *flags,
        uri=store["uri"],
        cwd=store["directory"],
        mrpc_dir=store["mrpc_dir"],
    )


def finetune(store: dict, *flags: str) -> subprocess.CompletedProcess:
    cache = f"--data.cache_dir={store['directory'] / 'cache'}"
    return run_stage(store, "downstream", FINETUNE_SMOKE, cache, "--trainer.enable_progress_bar=false", *flags)


def finished_run(store: dict, process: subprocess.CompletedProcess):
    """The run a successful finetune printed in its summary, read back from the store."""
    run = MlflowClient(store["uri"]).get_run(printed_run_id(process))
    assert run.info.status == "FINISHED"
    return run


def predictions(store: dict, run_id: str, split: str, directory: Path) -> tuple[pd.DataFrame, str]:
    path = MlflowClient(store["uri"]).download_artifacts(run_id, f"predictions/{split}.csv", str(directory))
    text = Path(path).read_text()
    return pd.read_csv(path, dtype={"id1": str, "id2": str}), text


@pytest.fixture(scope="module")
def smoke(store) -> dict:
    process = finetune(store, f"--model.encoder=runs:/{store['pretrain_run_id']}")
    return {"process": process, "run": finished_run(store, process)}


def test_smoke_run_finishes_and_prints_a_summary(smoke):
    stdout, run = smoke["process"].stdout, smoke["run"]
    assert "finetune finished" in stdout
    assert f"run        {run.info.run_id}" in stdout
    for fragment in (
        "dev        acc",
        "test       acc",
        "mix        weights",
        f"train      {SMOKE_PAIRS} pairs",
        "features   frozen, standardised",
        "majority class",
        "TF-IDF + LR",
        "95% interval over these pairs: acc ",
    ):
        assert fragment in stdout, fragment
    assert "Traceback" not in smoke["process"].stderr


WARNING_LINE = re.compile(r"warn|deprecat|💡|FLOPs", re.IGNORECASE)


def test_smoke_run_console_has_no_warning_and_says_why_it_stopped(smoke):
    lines = (smoke["process"].stdout + smoke["process"].stderr).splitlines()
    assert [line for line in lines if WARNING_LINE.search(line)] == []
    assert "stopped: max_epochs=2 reached" in lines


def test_smoke_run_tags_metrics_and_params(store, smoke):
    run = smoke["run"]
    tags, metrics, params = run.data.tags, run.data.metrics, run.data.params
    assert tags["stage"] == "finetune"
    assert tags["pretrain_run_id"] == store["pretrain_run_id"]
    assert tags["seed"] == "0"
    assert tags["mix"] == "scalar" and tags["head"] == "pool-mlp"
    assert run.info.run_name == "elmo-smoke·scalar·pool-mlp·s0"  # a smoke pretraining's encoder
    assert tags["encoder"] == f"elmo-2x32-{store['pretrain_run_id'][:8]}"  # family, size, short run id
    assert params["model.encoder"] == f"runs:/{store['pretrain_run_id']}"  # resolved, whatever the flag said
    assert params["model.standardize"] == "True"  # frozen: on by default, logged as applied (never "auto")
    assert not [key for key, value in params.items() if value in ("None", "", "{}", "[]")]
    assert not {"run_name", "tags", "trainer.barebones", "trainer.enable_progress_bar"} & set(params)
    for name in METRICS:
        assert 0.0 <= metrics[name] <= 1.0, name
    weights = [metrics[f"mix_weight_{k}"] for k in range(3)]
    assert "mix_weight_3" not in metrics
    assert sum(weights) == pytest.approx(1.0, abs=1e-6) and all(w > 0 for w in weights)
    assert metrics["mix_gamma"] > 0
    assert params["train_pairs"] == params["dev_pairs"] == params["test_pairs"] == str(SMOKE_PAIRS)
    assert params["encoder_layers"] == "3" and params["encoder_dim"] == "64"
    assert len(params["encoder_fingerprint"]) == 64


def test_smoke_run_logs_where_its_time_went(smoke):
    run = smoke["run"]
    metrics = run.data.metrics
    fit, evaluation, total = metrics["time_fit_s"], metrics["time_eval_s"], metrics["time_total_s"]
    assert fit > 0 and evaluation > 0
    assert total > fit + evaluation + 0.5  # from the process's start: its imports and start-up count
    assert metrics["time_cpu_s"] > 0.5  # the CPU the process spent over the same span: the imports alone
    lifetime = (run.info.end_time - run.info.start_time) / 1000  # the run exists after the CLI has parsed
    assert lifetime - 1.0 < total


def test_smoke_run_predictions_recompute_the_metrics(store, smoke, tmp_path):
    run = smoke["run"]
    client = MlflowClient(store["uri"])
    listed = {artifact.path for artifact in client.list_artifacts(run.info.run_id, "predictions")}
    assert listed == {"predictions/dev.csv", "predictions/test.csv", "predictions/dev.json", "predictions/test.json"}
    splits = load_mrpc(str(store["mrpc_dir"]))
    for split, pairs in (("dev", splits.dev), ("test", splits.test)):
        frame, _ = predictions(store, run.info.run_id, split, tmp_path / split)
        assert list(frame.columns) == PREDICTION_COLUMNS
        assert len(frame) == SMOKE_PAIRS
        assert frame["id1"].tolist() == [p.ids[0] for p in pairs[:SMOKE_PAIRS]]
        assert frame["id2"].tolist() == [p.ids[1] for p in pairs[:SMOKE_PAIRS]]
        assert frame["label"].tolist() == [p.label for p in pairs[:SMOKE_PAIRS]]
        assert frame["prob"].between(0, 1).all()
        assert (frame["pred"] == (frame["prob"] >= 0.5).astype(int)).all()
        true_positive = int(((frame["pred"] == 1) & (frame["label"] == 1)).sum())
        false_positive = int(((frame["pred"] == 1) & (frame["label"] == 0)).sum())
        false_negative = int(((frame["pred"] == 0) & (frame["label"] == 1)).sum())
        true_negative = len(frame) - true_positive - false_positive - false_negative
        assert true_negative == int(((frame["pred"] == 0) & (frame["label"] == 0)).sum())  # binary: cells add up
        accuracy = (true_positive + true_negative) / len(frame)
        f1 = 2 * true_positive / max(1, 2 * true_positive + false_positive + false_negative)
        assert run.data.metrics[f"{split}_acc"] == pytest.approx(accuracy, abs=1e-12)
        assert run.data.metrics[f"{split}_f1"] == pytest.approx(f1, abs=1e-12)


def test_smoke_run_counts_the_pairs_its_encoder_read_and_scores_the_rest(store, smoke, tmp_path):
    client = MlflowClient(store["uri"])
    pretrain_run = client.get_run(store["pretrain_run_id"])
    seen = seen_sentences.read(
        Path(client.download_artifacts(pretrain_run.info.run_id, seen_sentences.ARTIFACT, str(tmp_path)))
    )
    assert len(seen) == int(pretrain_run.data.params["train_sentences"])  # its training text, each sentence once
    metrics = smoke["run"].data.metrics
    for split in ("dev", "test"):
        frame, _ = predictions(store, smoke["run"].info.run_id, split, tmp_path / split)
        read = seen_sentences.seen_pairs(frame["sentence1"], frame["sentence2"], seen)
        assert metrics[f"{split}_seen_pairs"] == read.sum()
        if read.any():  # the scores over the rest (unit-tested in tests/harness/datasets/test_seen_sentences.py)
            rest = frame[~read]
            assert metrics[f"{split}_acc_unseen"] == pytest.approx((rest["pred"] == rest["label"]).mean(), abs=1e-12)
        else:
            assert f"{split}_acc_unseen" not in metrics
    seen_line = (
        f"  seen       {metrics['test_seen_pairs']:.0f} of {SMOKE_PAIRS} test pairs hold a sentence the encoder read"
        if metrics["test_seen_pairs"]
        else "  seen       no test pair holds a sentence the encoder read in pretraining"
    )
    assert seen_line in smoke["process"].stdout


def test_smoke_run_shows_its_data_predictions_and_figures_in_the_ui(store, smoke, tmp_path):
    """Dataset inputs (the splits, with digests and contexts), predictions tables with both
    sentences, and the confusion matrix and mix weights as keyed images."""
    run = MlflowClient(store["uri"]).get_run(smoke["run"].info.run_id)
    inputs = {
        (item.dataset.name, {tag.key: tag.value for tag in item.tags}["mlflow.data.context"], item.dataset.digest)
        for item in run.inputs.dataset_inputs
    }
    assert {(name, context) for name, context, _ in inputs} == {
        ("mrpc-train", "train"),
        ("mrpc-dev", "dev"),
        ("mrpc-test", "test"),
    }
    assert len({digest for _, _, digest in inputs}) == 3  # the splits' content differs, so do the digests
    client = MlflowClient(store["uri"])
    logged = json.loads(run.data.tags["mlflow.loggedArtifacts"])  # how the UI finds a run's tables
    assert {"path": "predictions/test.json", "type": "table"} in logged
    stored = json.loads(
        Path(client.download_artifacts(run.info.run_id, "predictions/test.json", str(tmp_path))).read_text()
    )
    table = pd.DataFrame(stored["data"], columns=stored["columns"])
    pairs = load_mrpc(str(store["mrpc_dir"])).test[:SMOKE_PAIRS]
    assert table["sentence1"].tolist() == [p.sentence1 for p in pairs]
    assert table["sentence2"].tolist() == [p.sentence2 for p in pairs]
    assert table["id1"].astype(str).tolist() == [p.ids[0] for p in pairs]
    images = {artifact.path for artifact in client.list_artifacts(run.info.run_id, "images")}
    assert any(path.startswith("images/confusion_matrix") for path in images), images
    assert any(path.startswith("images/mix_weights") for path in images), images


def test_same_seed_twice_gives_the_same_run(store, smoke, tmp_path):
    again = finished_run(store, finetune(store, f"--model.encoder=runs:/{store['pretrain_run_id']}"))
    first = smoke["run"]
    assert again.info.run_id != first.info.run_id
    for name in METRICS:
        assert again.data.metrics[name] == first.data.metrics[name], name
    _, first_text = predictions(store, first.info.run_id, "test", tmp_path / "first")
    _, again_text = predictions(store, again.info.run_id, "test", tmp_path / "again")
    assert again_text == first_text


def test_random_control(store, smoke):
    process = finetune(store, "--model.encoder=random")
    run = finished_run(store, process)
    assert run.data.tags["stage"] == "finetune"
    assert run.data.tags["pretrain_run_id"] == "random"
    assert run.data.tags["seed"] == "0"
    assert run.info.run_name.startswith("random-smoke·scalar·")  # the twin of a smoke pretraining's encoder
    assert run.data.tags["encoder"] == f"random-elmo-2x32-{store['pretrain_run_id'][:8]}"
    assert run.data.params["model.encoder"] == f"random:runs:/{store['pretrain_run_id']}@0"  # a valid flag value
    compare = re.search(r"^  compare +\S+viewStateShareKey=([\w-]+)", process.stdout, re.MULTILINE)  # twin ran first
    assert compare, process.stdout[-2000:]
    view = MlflowClient(store["uri"]).get_experiment(run.info.experiment_id).tags[VIEW_PREFIX + compare.group(1)]
    assert run.info.run_id in json.loads(json.loads(view)["state"])["searchFilter"]  # the view of the two runs
    counterpart = smoke["run"]  # or a rerun of it with the same settings and numbers (the newest is named)
    named = re.search(r"pretrained counterpart \(run (\w+)\)", process.stdout)
    assert named, process.stdout[-2000:]
    named_run = MlflowClient(store["uri"]).get_run(named.group(1))
    assert named_run.data.params["model.encoder"] == counterpart.data.params["model.encoder"]
    assert named_run.data.metrics["test_acc"] == counterpart.data.metrics["test_acc"]
    gap = counterpart.data.metrics["test_acc"] - run.data.metrics["test_acc"]
    assert f"  gap        {gap:+.3f}    test acc (pretrained − random twin)" in process.stdout
    for name in METRICS:
        assert 0.0 <= run.data.metrics[name] <= 1.0, name
    recorded = run.data.params["model.encoder"]  # the logged form, given back to the flag: the same twin
    again = finished_run(store, finetune(store, f"--model.encoder={recorded}"))
    assert again.data.params["model.encoder"] == recorded and again.data.tags["encoder"] == run.data.tags["encoder"]
    assert {name: again.data.metrics[name] for name in METRICS} == {name: run.data.metrics[name] for name in METRICS}


def test_train_fraction_subsamples_train_stratified(store):
    run = finished_run(
        store, finetune(store, f"--model.encoder=runs:/{store['pretrain_run_id']}", "--data.train_fraction=0.5")
    )
    params = run.data.params
    assert int(params["train_pairs"]) == SMOKE_PAIRS // 2
    assert params["dev_pairs"] == params["test_pairs"] == str(SMOKE_PAIRS)
    capped = load_mrpc(str(store["mrpc_dir"])).train[:SMOKE_PAIRS]
    assert abs(int(params["train_positive"]) - sum(p.label for p in capped) / 2) <= 1
    assert run.data.tags["train_fraction"] == "0.5"
    assert "pool-mlp@0.5·s0" in run.info.run_name


def test_equal_steps_validates_as_often_as_the_full_set(store):
    """A quarter of the pairs repeated 4 times an epoch: dev is scored on the schedule of every run,
    twice an epoch (4 times in 2 epochs), not once a pass, and the best validation's checkpoint is
    the one evaluated."""
    run = finished_run(
        store,
        finetune(
            store,
            f"--model.encoder=runs:/{store['pretrain_run_id']}",
            "--data.train_fraction=0.25",
            "--data.equal_steps=true",
            "--model.standardize=true",
        ),
    )
    assert run.data.params["data.validations_per_epoch"] == "2" and run.data.params["model.standardize"] == "True"
    history = MlflowClient(store["uri"]).get_metric_history(run.info.run_id, "dev_acc")
    assert len({point.step for point in history}) in (4, 5)  # 2 an epoch (the best checkpoint's evaluation may add one)
    assert run.data.metrics["train_epochs"] == 2


USER_ERRORS = [
    (["--model.mix=layer:9"], ["--model.mix=layer:9", "layer:2"]),
    (["--model.encoder=runs:/0123456789abcdef"], ["--model.encoder=runs:/0123456789abcdef", "no run"]),
    (["--model.encoder=runs:/{finetune_run_id}"], ["--model.encoder=runs:/{finetune_run_id}", "not a pretrain run"]),
    (["--model.encoder=/nonexistent/bilm.ckpt"], ["--model.encoder=/nonexistent/bilm.ckpt", "no such file"]),
    (["--model.head=nope"], ["--model.head=nope", "pool-mlp"]),
    (["--data.batch_size=0"], ["--data.batch_size=0", "at least 1"]),
    (["--model.standardize=true", "--model.finetune=full"], ["--model.standardize=true", "finetune=frozen"]),
]


@pytest.mark.parametrize(
    "flags, fragments",
    USER_ERRORS,
    ids=["mix", "unknown-run", "finetune-run", "missing-file", "head", "batch-size", "standardize-fine-tuned"],
)
def test_user_errors_end_in_one_line(store, smoke, flags, fragments):
    names = {"finetune_run_id": smoke["run"].info.run_id}
    before = {run.info.run_id for run in all_runs(store["uri"])}
    process = finetune(store, *(flag.format(**names) for flag in flags))
    assert_one_line_exit(process, *(fragment.format(**names) for fragment in fragments))
    runs = all_runs(store["uri"])
    assert not [run.info.run_id for run in runs if run.info.status == "RUNNING"]
    assert all(run.info.status == "FAILED" for run in runs if run.info.run_id not in before)


def test_gradual_fine_tuning_of_the_pretrained_and_random_encoder(store, tmp_path):
    """The same procedure for the encoder and its random twin: tags, per-group learning-rate
    curves, and a checkpoint that records the resolved encoder (never `latest`)."""
    for encoder in ("latest", "random"):
        run = finished_run(store, finetune(store, f"--model.encoder={encoder}", "--model.finetune=gradual"))
        tags, metrics = run.data.tags, run.data.metrics
        assert tags["finetune_mode"] == "gradual" and tags["family"] == "elmo"
        assert tags["pretrain_run_id"] == ("random" if encoder == "random" else store["pretrain_run_id"])
        assert "·gradual·" in run.info.run_name
        history = MlflowClient(store["uri"]).get_metric_history(run.info.run_id, "lr-AdamW/encoder-0")
        assert history and metrics["lr-AdamW/head"] > metrics["lr-AdamW/encoder-0"] > 0
        assert metrics["unfrozen_groups"] == 1  # 2 epochs: head only, then the top group
        checkpoint = torch.load(
            next((store["directory"] / "checkpoints" / "finetune" / run.info.run_id).glob("*.ckpt")),
            map_location="cpu",
            weights_only=True,
        )
        assert checkpoint["encoder"]["run_id"] == store["pretrain_run_id"]
        assert checkpoint["encoder"]["random_seed"] == (0 if encoder == "random" else None)


def test_a_finetune_run_killed_after_an_epoch_resumes_to_its_uninterrupted_result(store, smoke, tmp_path):
    """``--ckpt_path=last`` on a finetune run: the same run goes on and ends as the uninterrupted smoke
    run did (the checkpoint's hyper-parameters go back to the pair classifier)."""
    flags = [
        "--config",
        str(FINETUNE_SMOKE),
        f"--data.cache_dir={store['directory'] / 'cache'}",
        "--trainer.enable_progress_bar=false",
        f"--model.encoder=runs:/{store['pretrain_run_id']}",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    helpers = str(REPO / "tests" / "pretrain")
    killed = run_module(
        "downstream",
        "fit",
        *flags,
        "--trainer.callbacks+=kill_after_first_epoch.KillAfterFirstEpoch",
        uri=store["uri"],
        cwd=store["directory"],
        mrpc_dir=store["mrpc_dir"],
        PYTHONPATH=f"{helpers}:{REPO}",
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    resumed = run_module(
        "downstream",
        "fit",
        *flags,
        "--ckpt_path=last",
        uri=store["uri"],
        cwd=store["directory"],
        mrpc_dir=store["mrpc_dir"],
    )
    run = finished_run(store, resumed)
    assert run.data.tags["harness.resumed_from"].endswith("last.ckpt")
    assert run.info.run_id in run.data.tags["harness.resumed_from"]
    for metric in METRICS:
        assert run.data.metrics[metric] == smoke["run"].data.metrics[metric], metric
