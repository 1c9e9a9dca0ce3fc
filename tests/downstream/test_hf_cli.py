"""``python -m downstream fit --model.encoder=hf:<folder>`` end to end on a few hundred MRPC pairs and
a tmp store: the published encoder frozen, its random twin, BERT's joint input fine-tuned; runs tagged
``family=hf`` with the encoder tag naming the model; a refused folder is one line, exit 2, no run."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests import preloaded

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--data.max_pairs=200",
    "--trainer.max_epochs=1",
    "--trainer.enable_progress_bar=false",
    "--model.hidden_size=16",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory, mrpc_dir) -> dict:
    directory = tmp_path_factory.mktemp("hf-cli")
    return {"directory": directory, "uri": f"sqlite:///{directory / 'mlflow.db'}", "mrpc_dir": mrpc_dir}


def finetune(store: dict, config: str, *flags: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": store["uri"],
        "MRPC_DIR": str(store["mrpc_dir"]),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        preloaded.command(
            "downstream",
            "fit",
            "--config",
            str(REPO / config),
            f"--data.cache_dir={store['directory'] / 'cache'}",
            *TINY,
            *flags,
            env=env,
        ),
        cwd=store["directory"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def finished(store: dict, process: subprocess.CompletedProcess):
    assert process.returncode == 0, process.stderr[-4000:]
    run_id = re.search(r"^  run +([0-9a-f]{32})\b", process.stdout, re.MULTILINE).group(1)
    run = MlflowClient(store["uri"]).get_run(run_id)
    assert run.info.status == "FINISHED" and 0 <= run.data.metrics["test_acc"] <= 1
    return run


def test_a_published_encoder_and_its_twin_through_the_cli(store, tiny_bert):
    source = f"hf:{tiny_bert}"
    frozen = finished(
        store, finetune(store, "configs/downstream/mrpc.yaml", f"--model.encoder={source}", "--model.head=pool-mlp")
    )
    tags, params = frozen.data.tags, frozen.data.params
    label = f"hf-2x16-{tiny_bert.name}"
    assert tags["family"] == "hf" and tags["encoder"] == label and tags["pretrain_run_id"] == source
    assert params["model.encoder"] == source and params["encoder_layers"] == "3"
    twin = finished(
        store,
        finetune(
            store,
            "configs/downstream/mrpc.yaml",
            "--model.encoder=random",
            f"--model.random_like={source}",
            "--model.head=pool-mlp",
        ),
    )
    assert twin.data.tags["encoder"] == f"random-{label}" and twin.data.tags["pretrain_run_id"] == "random"
    assert twin.data.params["model.encoder"] == f"random:{source}@0"  # the twin as the flag takes it back
    assert twin.data.params["encoder_fingerprint"] != params["encoder_fingerprint"]
    joint = finished(store, finetune(store, "configs/downstream/hf.yaml", f"--model.encoder={source}"))
    assert joint.data.tags["head"] == "cls" and joint.data.tags["finetune_mode"] == "full"
    assert "train_acc" in joint.data.metrics and "train_lm_loss" not in joint.data.metrics  # no LM head: no λ loss


def test_a_refused_folder_is_one_line_and_leaves_no_run(store, tiny_bert, tmp_path):
    pickled = shutil.copytree(tiny_bert, tmp_path / "pickled")
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    done = finetune(store, "configs/downstream/mrpc.yaml", f"--model.encoder=hf:{pickled}")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: --model.encoder=hf:{pickled}: holds only pickled weights"), done.stderr[-2000:]
    client = MlflowClient(store["uri"])
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    assert not client.search_runs(experiments, "attributes.status = 'RUNNING'")
