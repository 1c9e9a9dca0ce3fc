"""The real CLIs on a full or read-only disk: one line naming the flag, exit 2, no run left
RUNNING, nothing half-written. A tiny tmpfs stands in for the full disk where mounting is allowed
(root with CAP_SYS_ADMIN; skipped elsewhere); a fake free-space function where a check must be
passed to reach the write itself."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from harness.cli.tracked_cli import run_cli
from pretrain.cli import PretrainCLI
from tests import preloaded

REPO = Path(__file__).resolve().parents[1]
PRETRAIN_SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
FINETUNE_SMOKE = REPO / "configs" / "downstream" / "smoke.yaml"
QUICK = [
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--data.max_sentences=100",
    "--samples_every_n_steps=0",
    "--trainer.enable_progress_bar=false",
]

pytestmark = pytest.mark.slow


def mount(directory: Path, options: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or result.returncode})")
    return directory


@pytest.fixture
def mounts():
    """``mount(directory, options)``; every mount is undone at the end of the test."""
    made = []

    def make(directory: Path, options: str) -> Path:
        made.append(mount(directory, options))
        return directory

    yield make
    for directory in reversed(made):
        subprocess.run(["umount", "-l", str(directory)], check=False)


def all_runs(uri: str) -> list:
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    return client.search_runs(experiments, run_view_type=ViewType.ALL) if experiments else []


def last_error(text: str) -> str:
    lines = text.strip().splitlines()
    assert "Traceback" not in text, text[-3000:]
    assert [line for line in lines if line.startswith("error:")] == [lines[-1]], text[-3000:]
    return lines[-1]


def leftovers(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if ".tmp" in path.name)


def test_finetune_on_a_full_cache_disk_is_one_line_not_sigbus(tmp_path, mounts, mrpc_dir, save_encoder):
    encoder_path, _ = save_encoder("elmo", tmp_path)
    cache = mounts(tmp_path / "full", "size=64k")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MRPC_DIR": str(mrpc_dir), "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "downstream",
        "fit",
        "--config",
        str(FINETUNE_SMOKE),
        f"--model.encoder={encoder_path}",
        f"--data.cache_dir={cache}",
        "--data.max_pairs=100",
        "--trainer.enable_progress_bar=false",
    ]
    process = subprocess.run(
        preloaded.as_preloaded(command, env), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert process.returncode == 2, (process.returncode, process.stderr[-3000:])  # was 135: SIGBUS
    line = last_error(process.stderr)
    assert line.startswith(f"error: --data.cache_dir={cache}: needs ") and "free" in line, line
    assert list(cache.iterdir()) == []  # no .<key>.tmp-<pid> folder for a re-run to trip over
    assert [run.info.status for run in all_runs(uri)] == ["FAILED"]


@pytest.fixture
def pretrain_in(tmp_path, monkeypatch, mrpc_dir):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.chdir(tmp_path)

    def pretrain(root: Path, capsys, *extra: str) -> tuple[int, str]:
        code = run_cli(
            PretrainCLI, ["fit", "--config", str(PRETRAIN_SMOKE), *QUICK, *extra, f"--trainer.default_root_dir={root}"]
        )
        return code, last_error(capsys.readouterr().err)

    return pretrain


def test_pretraining_into_a_read_only_root_is_refused_before_the_run(tmp_path, mounts, pretrain_in, capsys):
    root = mounts(tmp_path / "ro", "ro,size=1m")
    code, line = pretrain_in(root, capsys)
    assert code == 2 and line.startswith("error: --trainer.default_root_dir: cannot write checkpoints under "), line
    assert "read-only filesystem" in line
    assert all_runs(f"sqlite:///{tmp_path / 'mlflow.db'}") == []


def test_pretraining_that_fills_the_disk_fails_its_run_and_leaves_no_partial_checkpoint(
    tmp_path, mounts, pretrain_in, capsys, monkeypatch
):
    """The free-space check is told the disk is large, so the first checkpoint really meets the
    full tmpfs: the write fails as a whole, in one line, and the run is FAILED."""
    root = mounts(tmp_path / "full", "size=512k")
    monkeypatch.setattr("harness.diskspace.free_bytes", lambda path: 2**40)
    # a checkpoint of several MB, over the 512 KB disk whatever the vocabulary (synthetic MRPC's is small)
    code, line = pretrain_in(root, capsys, "--model.hidden_size=256")
    assert code == 2 and line.startswith("error: --trainer.default_root_dir: cannot write checkpoint "), line
    assert "no space left" in line
    runs = all_runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert [run.info.status for run in runs] == ["FAILED"]
    assert leftovers(root) == [] and not list(root.rglob("*.ckpt"))


def test_a_run_store_on_a_full_disk_is_one_line(tmp_path, mounts, monkeypatch, capsys, mrpc_dir):
    """SQLite says "database or disk is full" through SQLAlchemy and MLflow: still one line naming the store."""
    store = mounts(tmp_path / "store", "size=160k")  # room for the file, not for MLflow's tables
    uri = f"sqlite:///{store / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.chdir(tmp_path)
    code = run_cli(PretrainCLI, ["fit", "--config", str(PRETRAIN_SMOKE), *QUICK])
    line = last_error(capsys.readouterr().err)
    assert code == 2 and line.startswith(f"error: the run store {uri}: no space left"), line
