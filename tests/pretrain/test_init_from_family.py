"""``--model.init_from`` is checked once, before anything is built: a run of another family (an
ELMo run under ``ulmfit-task.yaml``, a ULMFiT run under a GPT config) ends in one line, exit 2,
no run created, and the data module never adopts the other family's tokenizer; a run of the same
family is continued under its resolved ``runs:/<id>``."""

import functools
import shutil
import time
from pathlib import Path

import pytest
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from benchmarks.plan.encoders import describe_encoder
from harness.cli.tracked_cli import run_cli
from harness.errors import UserError
from pretrain.cli import PretrainCLI
from pretrain.corpus.datamodule import CorpusDataModule

REPO = Path(__file__).resolve().parents[2]
ULMFIT_TASK = REPO / "configs" / "pretrain" / "ulmfit-task.yaml"
GPT_TINY = REPO / "configs" / "pretrain" / "gpt-tiny.yaml"
QUICK = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--data.max_sentences=60",
    "--samples_every_n_steps=0",
    "--trainer.enable_progress_bar=false",
]


@pytest.fixture
def store(tmp_path, monkeypatch, save_encoder, mrpc_dir) -> dict:
    """A finished ELMo and a finished ULMFiT general-LM pretrain run (tiny, untrained)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.setattr("pretrain.encoders.loading.ENCODER_CACHE", tmp_path / "encoders")
    monkeypatch.chdir(tmp_path)
    client = MlflowClient(uri)
    experiment = client.create_experiment("pretrain", artifact_location=(tmp_path / "artifacts").as_uri())
    runs = {"uri": uri, "client": client}
    for family in ("elmo", "ulmfit"):
        checkpoint, _ = save_encoder(family, tmp_path)
        run = client.create_run(experiment, tags={"stage": "pretrain", "family": family, "lm_stage": "general"})
        client.log_param(run.info.run_id, "data.corpus", "mrpc+reuters")
        client.log_param(run.info.run_id, "train_words", "1000")
        staged = tmp_path / "staged" / run.info.run_id
        staged.mkdir(parents=True)
        shutil.copy(checkpoint, staged / "encoder.ckpt")
        client.log_artifact(run.info.run_id, str(staged / "encoder.ckpt"), "checkpoint")
        client.set_terminated(run.info.run_id, "FINISHED")
        runs[family] = run.info.run_id
        runs[f"{family}_file"] = checkpoint
        time.sleep(0.01)
    return runs


def all_runs(uri: str) -> list:
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    return client.search_runs(experiments, run_view_type=ViewType.ALL)


@pytest.mark.parametrize("config, theirs, ours", [(ULMFIT_TASK, "elmo", "ulmfit"), (GPT_TINY, "ulmfit", "gpt")])
@pytest.mark.slow
def test_another_familys_run_is_refused_in_one_line_before_anything_is_built(
    store, capsys, monkeypatch, config, theirs, ours
):
    built = []
    original = CorpusDataModule.__init__

    @functools.wraps(original)  # the signature stays: the CLI builds its --data.* flags from it
    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(CorpusDataModule, "__init__", counting)
    source = f"runs:/{store[theirs]}"
    code = run_cli(PretrainCLI, ["fit", "--config", str(config), f"--model.init_args.init_from={source}", *QUICK])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err and "Union subtypes" not in err, err[-3000:]
    article = "an" if theirs[0] in "aeiou" else "a"
    assert lines[-1].startswith(
        f"error: --model.init_from={source}: that is {article} {theirs} encoder; this model is {ours}"
    ), lines[-1]
    assert built == []  # no data module: no tokenizer adopted from the other family
    before_test_runs = [
        run for run in all_runs(store["uri"]) if run.info.run_id not in (store["elmo"], store["ulmfit"])
    ]
    assert before_test_runs == []


@pytest.mark.slow
def test_the_data_module_refuses_a_tokenizer_of_another_kind(store, mrpc_dir):
    with pytest.raises(UserError) as raised:
        CorpusDataModule(
            mrpc_dir=str(mrpc_dir), tokenizer="subword", init_from=str(store["ulmfit_file"]), max_sentences=50
        )
    assert "that run's tokenizer is word, not --data.tokenizer=subword" in str(raised.value)


@pytest.mark.slow
def test_a_run_of_the_same_family_is_continued_under_its_resolved_id(store, capsys, monkeypatch):
    # the tiny encoder's vocabulary was built on a handful of sentences, not on MRPC: its coverage
    # check (tests/pretrain/test_vocab_sizes.py) is not what this test is about
    monkeypatch.setattr("pretrain.tokenization.vocabulary_checks.MIN_KNOWN_SHARE", 0.0)
    code = run_cli(
        PretrainCLI, ["fit", "--config", str(ULMFIT_TASK), "--model.init_args.init_from=latest:ulmfit:general", *QUICK]
    )
    assert code == 0, capsys.readouterr().err[-3000:]
    (task,) = [run for run in all_runs(store["uri"]) if run.data.tags.get("lm_stage") == "task"]
    assert task.info.status == "FINISHED" and task.data.tags["init_run_id"] == store["ulmfit"]
    assert task.data.params["model.init_from"] == f"runs:/{store['ulmfit']}"  # never latest
    described = describe_encoder(
        {"name": "ulmfit", "pretrain": [{"config": "general.yaml"}, {"config": str(ULMFIT_TASK)}]}, task.info.run_id
    )
    assert [stage["run_id"] for stage in described["stages"]] == [store["ulmfit"], task.info.run_id]
    assert described["corpus"] == f"mrpc+reuters → {task.data.params['data.corpus']}"
    assert described["train_words"] == 1000 + int(task.data.params["train_words"])
