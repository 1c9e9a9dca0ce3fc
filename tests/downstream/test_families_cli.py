"""The families end to end through the real CLIs on a few hundred MRPC pairs and a tmp store:
ULMFiT's three stages (general LM → task LM → classifier) and GPT (pretrain → fine-tune with its
own classifier), linked in MLflow; bad family flags end in one line."""

import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers import printed_run_id, run_module

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=8",
    "--trainer.limit_val_batches=3",
    "--trainer.val_check_interval=1.0",
    "--trainer.max_time=null",
    "--data.max_sentences=300",
    "--data.corpus=mrpc",
    "--trainer.enable_progress_bar=false",
    "--samples_every_n_steps=4",
]
FINETUNE_TINY = ["--trainer.max_epochs=2", "--data.max_pairs=200", "--trainer.enable_progress_bar=false"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory, mrpc_dir) -> dict:
    directory = tmp_path_factory.mktemp("families")
    return {"directory": directory, "uri": f"sqlite:///{directory / 'mlflow.db'}", "mrpc_dir": mrpc_dir}


def run(store: dict, module: str, config: str, *flags: str) -> subprocess.CompletedProcess:
    extra = [f"--data.cache_dir={store['directory'] / 'cache'}"] if module == "downstream" else []
    return run_module(
        module,
        "fit",
        "--config",
        str(REPO / config),
        *extra,
        *flags,
        uri=store["uri"],
        cwd=store["directory"],
        mrpc_dir=store["mrpc_dir"],
    )


def finished(store: dict, process: subprocess.CompletedProcess):
    found = MlflowClient(store["uri"]).get_run(printed_run_id(process))
    assert found.info.status == "FINISHED"
    return found


def test_ulmfit_three_stages_linked_in_mlflow(store):
    general = finished(
        store,
        run(
            store,
            "pretrain",
            "configs/pretrain/ulmfit.yaml",
            *TINY,
            "--model.embedding_size=16",
            "--model.hidden_size=24",
        ),
    )
    assert general.data.tags["family"] == "ulmfit" and general.data.tags["lm_stage"] == "general"
    task = finished(store, run(store, "pretrain", "configs/pretrain/ulmfit-task.yaml", *TINY))
    tags = task.data.tags
    assert tags["lm_stage"] == "task" and tags["init_run_id"] == general.info.run_id
    assert task.data.params["vocab_size"] == general.data.params["vocab_size"]  # stage 1's vocabulary
    assert task.data.params["model.embedding_size"] == "16"  # and architecture
    assert "val_ppl" in task.data.metrics and "lr-AdamW/group0" in task.data.metrics
    for encoder in ("latest:ulmfit:task", "random"):
        classifier = finished(
            store,
            run(store, "downstream", "configs/downstream/ulmfit.yaml", *FINETUNE_TINY, f"--model.encoder={encoder}"),
        )
        tags = classifier.data.tags
        assert tags["family"] == "ulmfit" and tags["finetune_mode"] == "gradual" and tags["head"] == "concat-pool"
        assert tags["pretrain_run_id"] == ("random" if encoder == "random" else task.info.run_id)
        assert 0 <= classifier.data.metrics["test_acc"] <= 1


def test_gpt_pretrain_then_fine_tune_with_its_own_classifier(store):
    pretrained = finished(
        store, run(store, "pretrain", "configs/pretrain/gpt-tiny.yaml", "--trainer.enable_progress_bar=false")
    )
    assert pretrained.data.tags["family"] == "gpt"
    assert {"val_ppl", "val_ppl_fwd", "val_ppl_word"} <= set(pretrained.data.metrics)
    assert "val_ppl_bwd" not in pretrained.data.metrics  # a left-to-right LM has one direction
    for weight in ("0.5", "0.0"):
        tuned = finished(
            store,
            run(
                store,
                "downstream",
                "configs/downstream/gpt.yaml",
                *FINETUNE_TINY,
                f"--model.encoder=runs:/{pretrained.info.run_id}",
                f"--model.lm_weight={weight}",
            ),
        )
        assert tuned.data.tags["head"] == "cls" and tuned.data.tags["finetune_mode"] == "full"
        assert tuned.data.params["model.lm_weight"] == weight
        assert ("train_lm_loss" in tuned.data.metrics) and "mix_weight_0" not in tuned.data.metrics


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--model.finetune=partial"], "--model.finetune=partial: choose one of frozen, full, gradual"),
        (["--model.encoder=latest:bert"], "unknown family 'bert'"),
        (
            ["--model.head=cls"],
            "--model.head=cls: the joint pair classifier needs an encoder that takes a joint pair input",
        ),
    ],
)
def test_bad_family_flags_end_in_one_line(store, flags, fragment, save_encoder):
    path, _ = save_encoder("elmo", store["directory"])
    process = run(store, "downstream", "configs/downstream/smoke.yaml", f"--model.encoder={path}", *flags)
    assert process.returncode == 2 and "Traceback" not in process.stderr, process.stderr[-3000:]
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and fragment in last, last
    runs = MlflowClient(store["uri"]).search_runs(
        [e.experiment_id for e in MlflowClient(store["uri"]).search_experiments()]
    )
    assert not [r for r in runs if r.info.status == "RUNNING"]
