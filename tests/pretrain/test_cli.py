"""The real ``python -m pretrain`` CLI on the smoke config: what a run leaves in MLflow, and
how user errors end (one line, exit 2, no run left RUNNING)."""

import math
import subprocess
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.training.batching import pad_batch
from pretrain import load_encoder
from pretrain.corpus.datamodule import encode_sentences
from pretrain.lit_bilm import LitBiLM
from pretrain.tokenization.words import Tokenizer
from tests.helpers import all_runs, assert_one_line_exit, run_module

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
QUICK = ["--trainer.max_epochs=1", "--trainer.limit_val_batches=2", "--data.max_sentences=200"]


def run_pretrain(directory: Path, mrpc_dir: Path, *flags: str) -> tuple[subprocess.CompletedProcess, str]:
    uri = f"sqlite:///{directory / 'mlflow.db'}"
    return run_module("pretrain", "fit", "--config", str(SMOKE), *flags, uri=uri, cwd=directory, mrpc_dir=mrpc_dir), uri


def assert_no_run_left(uri: str, directory: Path) -> None:
    if not (directory / "mlflow.db").exists():
        return  # the store was never touched: no run at all
    runs = all_runs(uri)
    assert not [run for run in runs if run.info.status == "RUNNING"]
    assert runs == [], [(run.info.run_id, run.info.status) for run in runs]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, real_mrpc_dir):
    mrpc_dir = real_mrpc_dir
    directory = tmp_path_factory.mktemp("smoke")
    process, uri = run_pretrain(directory, mrpc_dir, *QUICK)
    assert process.returncode == 0, process.stderr[-5000:]
    runs = all_runs(uri)
    assert len(runs) == 1
    return {"process": process, "uri": uri, "run": runs[0], "directory": directory}


@pytest.mark.slow
def test_smoke_run_finishes_and_prints_a_summary(smoke_run):
    run, stdout = smoke_run["run"], smoke_run["process"].stdout
    assert run.info.status == "FINISHED"
    assert "pretrain finished" in stdout
    assert f"run        {run.info.run_id}" in stdout
    assert f"runs:/{run.info.run_id}" in stdout
    checkpoint = smoke_run["directory"] / "checkpoints" / "pretrain" / run.info.run_id / "encoder.ckpt"
    assert checkpoint.is_file()
    assert f"checkpoint {checkpoint}" in stdout
    assert run.data.metrics["best_epoch"] == 0  # stored as Lightning counts, shown as the log lines count
    assert "epoch 1/1  step" in stdout and "; best epoch 1)" in stdout


@pytest.mark.slow
def test_smoke_run_tags_metrics_and_params(smoke_run):
    run = smoke_run["run"]
    assert run.data.tags["stage"] == "pretrain"
    assert run.data.tags["model"] == "bilm" and run.data.tags["transductive"] == "false"
    assert run.data.tags["family"] == "elmo"
    assert run.info.run_name.startswith("elmo·2x32·full·mrpc")
    metrics = run.data.metrics
    for name in ("train_loss", "val_ppl", "val_ppl_fwd", "val_ppl_bwd"):
        assert name in metrics and math.isfinite(metrics[name]), name
    assert metrics["val_ppl"] > 1 and metrics["val_ppl_fwd"] > 1 and metrics["val_ppl_bwd"] > 1
    # exp of the mean of both directions' mean NLL = geometric mean of the two perplexities
    assert metrics["val_ppl"] == pytest.approx(math.sqrt(metrics["val_ppl_fwd"] * metrics["val_ppl_bwd"]), rel=1e-5)
    assert not [key for key, value in run.data.params.items() if value in ("None", "", "{}", "[]")]
    params = run.data.params
    for name in ("data_hash", "vocab_size", "parameters", "train_tokens", "model.hidden_size"):
        assert name in params, name
    assert params["model.hidden_size"] == "32"
    assert int(params["vocab_size"]) > 100 and int(params["parameters"]) > 0 and int(params["train_tokens"]) > 0
    assert len(params["data_hash"]) == 64


@pytest.mark.slow
def test_smoke_run_artifacts(smoke_run, tmp_path):
    client, run_id = MlflowClient(smoke_run["uri"]), smoke_run["run"].info.run_id
    top = {artifact.path for artifact in client.list_artifacts(run_id)}
    assert {"config.yaml", "vocab.txt", "checkpoint", "samples", "corpus"} <= top  # corpus/: what it read
    assert [a.path for a in client.list_artifacts(run_id, "checkpoint")] == ["checkpoint/encoder.ckpt"]
    samples = [a.path for a in client.list_artifacts(run_id, "samples")]
    assert samples and all(path.startswith("samples/") and path.endswith(".txt") for path in samples)
    sample = Path(client.download_artifacts(run_id, samples[0], str(tmp_path))).read_text()
    assert "tgt: <S>" in sample and "\nfwd: " in sample and "\nbwd: " in sample
    config = Path(client.download_artifacts(run_id, "config.yaml", str(tmp_path))).read_text()
    assert "hidden_size: 32" in config
    vocab = Path(client.download_artifacts(run_id, "vocab.txt", str(tmp_path))).read_text().splitlines()
    assert vocab[:5] == ["<PAD>", "<UNK>", "<S>", "</S>", "<NUM>"]
    assert len(vocab) == int(smoke_run["run"].data.params["vocab_size"])


@pytest.mark.slow
def test_best_checkpoint_numbers_have_their_own_keys(smoke_run):
    """``best_val_ppl*`` hold the best checkpoint's perplexities, recomputed on it over every held-out
    sentence (the smoke run validates on 2 batches only, so they differ from the curve's value); the
    ``val_ppl`` curve keeps one point per validation epoch (no value re-logged after training)."""
    client, run = MlflowClient(smoke_run["uri"]), smoke_run["run"]
    metrics = run.data.metrics
    for name in ("val_ppl", "val_ppl_fwd", "val_ppl_bwd", "val_ppl_word"):
        history = client.get_metric_history(run.info.run_id, name)
        assert len(history) == 1, (name, [(m.step, m.value) for m in history])  # max_epochs=1: one validation
        assert math.isfinite(metrics[f"best_{name}"]) and metrics[f"best_{name}"] > 1, name
    geometric_mean = math.sqrt(metrics["best_val_ppl_fwd"] * metrics["best_val_ppl_bwd"])
    assert metrics["best_val_ppl"] == pytest.approx(geometric_mean, rel=1e-5)
    assert len(client.get_metric_history(run.info.run_id, "best_val_ppl")) == 1


@pytest.mark.slow
def test_encoder_is_registered_and_models_uris_resolve(smoke_run, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", smoke_run["uri"])
    run_id = smoke_run["run"].info.run_id
    client = MlflowClient(smoke_run["uri"])
    version = client.get_model_version_by_alias("elmo-encoder-smoke", "newest")  # a toy: a name of its own
    assert version.run_id == run_id and version.source.endswith(f"{run_id}/artifacts/checkpoint")
    assert [model.name for model in client.search_registered_models()] == ["elmo-encoder-smoke"]
    assert MlflowClient(smoke_run["uri"]).get_run(run_id).data.tags["encoder"] == f"elmo-2x32-{run_id[:8]}"
    assert "models:/elmo-encoder-smoke/1  (= models:/elmo-encoder-smoke@newest)" in smoke_run["process"].stdout
    for uri in (
        "models:/elmo-encoder-smoke@newest",
        "models:/elmo-encoder-smoke/1",
        "models:/elmo-encoder-smoke/latest",
    ):
        encoder = load_encoder(uri)
        assert encoder.run_id == run_id and encoder.source == f"runs:/{run_id}", uri
    for uri, fragment in (
        ("models:/elmo-encoder@newest", "not in the model registry"),
        ("models:/elmo-encoder-smoke@nope", "not in the model registry"),
        ("models:/elmo-encoder-smoke", "name a version or an alias"),
    ):
        with pytest.raises(UserError, match=fragment) as caught:
            load_encoder(uri)
        assert str(caught.value).startswith(uri) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_encoder_loads_from_the_run(smoke_run, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", smoke_run["uri"])
    run_id = smoke_run["run"].info.run_id
    encoder = load_encoder(f"runs:/{run_id}")
    assert encoder.source == f"runs:/{run_id}"
    assert (encoder.num_layers, encoder.dim) == (3, 2 * 32)
    assert len(encoder.tokenizer) == int(smoke_run["run"].data.params["vocab_size"])
    layers, mask = encoder.embed_layers(["He said so.", "Shares fell 3 percent on Monday."])
    assert layers.shape == (3, 2, 7, 64) and mask.sum(1).tolist() == [4, 7]
    latest = load_encoder("latest")
    assert latest.fingerprint == encoder.fingerprint


@pytest.mark.slow
def test_malformed_mrpc_file_fails_in_one_line(tmp_path, real_mrpc_dir):
    mrpc_dir = real_mrpc_dir
    broken = tmp_path / "mrpc"
    broken.mkdir()
    (broken / "msr_paraphrase_test.txt").write_bytes((mrpc_dir / "msr_paraphrase_test.txt").read_bytes())
    lines = (mrpc_dir / "msr_paraphrase_train.txt").read_bytes().split(b"\n")
    lines[9] = b"\t".join(lines[9].split(b"\t")[:4])  # line 10 loses its last field
    (broken / "msr_paraphrase_train.txt").write_bytes(b"\n".join(lines))
    process, uri = run_pretrain(tmp_path, broken, *QUICK)
    message = assert_one_line_exit(process, "msr_paraphrase_train.txt:10", "5 tab-separated fields")
    assert message.startswith("error: ")
    assert_no_run_left(uri, tmp_path)


@pytest.mark.slow
def test_missing_corpus_file_fails_in_one_line(tmp_path, real_mrpc_dir):
    mrpc_dir = real_mrpc_dir
    missing = tmp_path / "nonexistent.txt"
    process, uri = run_pretrain(tmp_path, mrpc_dir, *QUICK, f"--data.corpus={missing}")
    assert_one_line_exit(process, "--data.corpus", str(missing))
    assert_no_run_left(uri, tmp_path)


class MetricNames(pl.loggers.logger.Logger):
    """Collects the names of the metrics a Trainer logs."""

    def __init__(self):
        super().__init__()
        self.names = set()

    name, version = "names", 0

    def log_metrics(self, metrics, step=None):
        self.names.update(metrics)

    def log_hyperparams(self, params, *args, **kwargs):
        pass


def test_short_run_still_logs_train_loss(tmp_path):
    """`make pretrain ARGS="--trainer.max_epochs=1 --trainer.limit_train_batches=20"` (the README's
    example) must still give the run its train_loss."""
    sentences = ["the cat sat .", "a dog ran home .", "he said so ."]
    tokenizer = Tokenizer.build(sentences)
    lit = LitBiLM(vocab_size=len(tokenizer), hidden_size=8, num_layers=1, dropout=0.0)
    lit.tokenizer = tokenizer
    logger = MetricNames()
    loader = torch.utils.data.DataLoader(encode_sentences(tokenizer, sentences), batch_size=2, collate_fn=pad_batch)
    trainer = pl.Trainer(
        max_epochs=1,
        log_every_n_steps=50,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        default_root_dir=tmp_path,
    )
    trainer.fit(lit, loader)
    assert "train_loss" in logger.names, sorted(logger.names)
