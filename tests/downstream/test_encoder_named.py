"""A finetune names the encoder it resolved in its first lines, before it trains; an encoder from
a smoke pretraining (``configs/pretrain/smoke.yaml``) is tagged and named as one, and so are the
runs made with it, so that they never pass for runs of a real encoder in the UI."""

import subprocess
from pathlib import Path

import pytest

from tests.helpers import all_runs, run_module, store_uri

REPO = Path(__file__).resolve().parents[2]
PRETRAIN = [
    "pretrain",
    "fit",
    "--config",
    str(REPO / "configs/pretrain/smoke.yaml"),
    "--trainer.limit_train_batches=3",
    "--trainer.limit_val_batches=2",
    "--samples_every_n_steps=0",
    "--trainer.enable_progress_bar=false",
]

pytestmark = pytest.mark.slow


def run(store: Path, mrpc_dir: Path, *command: str) -> subprocess.CompletedProcess:
    process = run_module(*command, uri=store_uri(store), cwd=store, mrpc_dir=mrpc_dir)
    assert process.returncode == 0, process.stderr[-3000:]
    return process


def finetune(store: Path, mrpc_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return run(
        store,
        mrpc_dir,
        "downstream",
        "fit",
        "--config",
        str(REPO / "configs/downstream/smoke.yaml"),
        "--trainer.max_epochs=1",
        "--data.max_pairs=100",
        f"--data.cache_dir={store / 'cache'}",
        "--trainer.enable_progress_bar=false",
        *flags,
    )


def newest(store: Path, stage: str):
    return max(
        (found for found in all_runs(store) if found.data.tags.get("stage") == stage),
        key=lambda found: found.info.start_time,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory, mrpc_dir) -> dict:
    """A smoke pretraining, a finetune on `latest` (the smoke one: nothing else finished); then a
    real pretraining (the same tiny one, ``--smoke=false``) and the random twin of `latest`."""
    folder = tmp_path_factory.mktemp("named")
    found = {"folder": folder}
    run(folder, mrpc_dir, *PRETRAIN)
    found["smoke"] = newest(folder, "pretrain")
    found["on_smoke"] = finetune(folder, mrpc_dir, "--model.encoder=latest")
    found["on_smoke_run"] = newest(folder, "finetune")
    run(folder, mrpc_dir, *PRETRAIN, "--smoke=false")
    found["real"] = newest(folder, "pretrain")
    found["twin"] = finetune(folder, mrpc_dir, "--model.encoder=random")
    found["twin_run"] = newest(folder, "finetune")
    return found


def first_lines(process: subprocess.CompletedProcess) -> list[str]:
    """What the command printed before training began (Lightning's device lines come then)."""
    lines = (process.stdout + process.stderr).splitlines()
    return lines[: next(index for index, line in enumerate(lines) if line.startswith("GPU available"))]


def test_a_smoke_pretraining_is_tagged_and_named_as_one(store):
    assert store["smoke"].data.tags["smoke"] == "true" and "·smoke·" in store["smoke"].info.run_name
    assert "smoke" not in store["real"].data.tags and "smoke" not in store["real"].info.run_name


def test_a_finetune_names_the_smoke_encoder_latest_fell_back_to_before_it_trains(store):
    smoke = store["smoke"].info.run_id
    lines = first_lines(store["on_smoke"])
    assert any(line.startswith("note: latest: only smoke pretrain runs are finished") for line in lines), lines
    (named,) = [line for line in lines if line.startswith("encoder: ")]
    assert named.startswith(f"encoder: elmo 2x32, run {smoke}, corpus mrpc, finished ") and "val_ppl " in named
    assert "a smoke run" in named
    finetuned = store["on_smoke_run"]
    assert finetuned.data.tags["pretrain_run_id"] == smoke and finetuned.data.tags["smoke"] == "true"
    assert finetuned.info.run_name == "elmo-smoke·scalar·pool-mlp·s0"


def test_latest_prefers_the_real_encoder_and_the_twin_names_the_run_it_copies(store):
    real = store["real"].info.run_id
    (named,) = [line for line in first_lines(store["twin"]) if line.startswith("encoder: ")]
    assert named.startswith("encoder: random twin (untrained, seed ") and f"of elmo 2x32, run {real}, " in named
    assert "smoke" not in named
    twin = store["twin_run"]
    assert twin.info.run_name == "random·scalar·pool-mlp·s0" and "smoke" not in twin.data.tags
    assert twin.data.tags["encoder"] == f"random-elmo-2x32-{real[:8]}"
