"""The data set a command line names is read before the heavy imports: a wrong ``MRPC_DIR``, a
missing or malformed pair file or an unknown data set answers in one line, in about a second,
with the stage's own message; what only the full parse can read is left to it."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli.data_check import data_flags, data_problem
from tests.pair_files import write_three_label_set

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "pytorch_lightning", "mlflow", "transformers")


def test_the_flags_come_from_the_configs_then_the_command_line(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("data:\n  dataset: tsv\n  train: a.tsv\n  batch_size: 8\n  has_header: false\n")
    argv = ["fit", "--config", str(config), "--data.train=b.tsv", "--data.max_split_overlap", "0.5"]
    assert data_flags(argv) == {"dataset": "tsv", "train": "b.tsv", "has_header": False, "max_split_overlap": 0.5}
    assert data_flags(["fit", "--data", "{dataset: tsv}"]) is None  # a mapping: the full parse reads it
    assert data_flags(["fit", "--print_config"]) is None


def test_a_wrong_mrpc_dir_is_the_loaders_own_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MRPC_DIR", str(tmp_path))
    assert data_problem(["fit"]) == (
        f"MRPC_DIR={tmp_path}: msr_paraphrase_train.txt not found; put the MSR files there or unset MRPC_DIR"
    )


def test_pair_files_are_read_and_checked(tmp_path):
    files = write_three_label_set(tmp_path)
    flags = [f"--data.{split}={files[split]}" for split in ("train", "dev", "test")]
    assert data_problem(["fit", "--data.dataset=tsv", *flags]) is None
    missing = tmp_path / "nope.tsv"
    assert data_problem(["fit", "--data.dataset=tsv", *flags, f"--data.test={missing}"]) == (
        f"--data.test={missing}: file not found; give a tab-separated pair file"
    )
    broken = tmp_path / "broken.tsv"
    broken.write_text(Path(files["train"]).read_text() + "only one column\n")
    problem = data_problem(["fit", "--data.dataset=tsv", *flags, f"--data.train={broken}"])
    assert problem.startswith(f"{broken}:") and "\n" not in problem
    assert (
        data_problem(["fit", "--data.dataset=sst2"])
        == "--data.dataset=sst2: expected mrpc, sick-e, sick-r, stsb or tsv"
    )


@pytest.mark.parametrize(
    "stage, config", [("downstream", "configs/downstream/mrpc.yaml"), ("pretrain", "configs/pretrain/smoke.yaml")]
)
def test_wrong_data_is_answered_before_torch_lightning_or_mlflow_load(stage, config, tmp_path):
    probe = (
        "import atexit, runpy, sys\n"
        f"atexit.register(lambda: print('loaded', sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
        f"sys.argv = ['{stage}', 'fit', '--config', '{config}']\n"
        f"runpy.run_module('{stage}', run_name='__main__')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MRPC_DIR": str(tmp_path),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    start = time.monotonic()
    process = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    seconds = time.monotonic() - start
    assert process.returncode == 2
    assert process.stderr.strip() == (
        f"error: MRPC_DIR={tmp_path}: msr_paraphrase_train.txt not found; put the MSR files there or unset MRPC_DIR"
    )
    assert process.stdout.strip() == "loaded []"
    assert seconds < 5 * (1 + (os.getloadavg()[0] > (os.cpu_count() or 1)))  # ≤ 5 s, doubled on a loaded machine
    assert not (tmp_path / "mlflow.db").exists()  # no run, not even a store
