"""A study's pretraining stage whose attempt was killed mid-epoch (a lost worker, a study stopped
with its machine's session) goes on from that attempt's last checkpoint when the study runs again:
the same MLflow run, FINISHED, and the task says it resumed. (That the resumed weights equal the
uninterrupted ones is tests/pretrain/test_mid_epoch_resume.py.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import all_runs, cli_env, store_uri

REPO = Path(__file__).resolve().parents[2]
ARGS = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=6",
    "--trainer.limit_val_batches=2",
    "--data.max_sentences=400",
    "--samples_every_n_steps=0",
    "--checkpoint_every_minutes=0",
    "--trainer.callbacks+=kill_mid_epoch.KillAtBatch",
]
SCRIPT = """
import json, sys
from pathlib import Path
from benchmarks.plan.encoders import Stage
from benchmarks.tasks.entry_points import Study, run_stage
stage = Stage("smoke", 1, sys.argv[1], json.loads(sys.argv[2]))
study = Study("stage-resume", "stage-resume", parent="", driver=sys.argv[3], logs=Path("."), data_digest="data")
print(json.dumps(run_stage(stage, None, study, 1)))
"""

pytestmark = pytest.mark.slow


def attempt(directory: Path, mrpc_dir: Path, driver: str, **env: str) -> subprocess.CompletedProcess:
    environment = cli_env(
        store_uri(directory), mrpc_dir, **env, PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "pretrain"), str(REPO)])
    )
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(REPO / "configs" / "pretrain" / "smoke.yaml"), json.dumps(ARGS), driver],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_stage_killed_mid_epoch_resumes_from_its_last_checkpoint(tmp_path, real_mrpc_dir):
    lost = attempt(tmp_path, real_mrpc_dir, "first-driver", KILL_AT_BATCH="0:4")
    assert lost.returncode == -9, lost.stderr[-3000:]
    (killed,) = all_runs(tmp_path)
    assert killed.info.status == "RUNNING"
    again = attempt(tmp_path, real_mrpc_dir, "second-driver")
    assert again.returncode == 0, again.stderr[-3000:]
    outcome = json.loads(again.stdout.strip().splitlines()[-1])
    assert outcome["resumed"] and outcome["run_id"] == killed.info.run_id
    (run,) = all_runs(tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.tags["harness.resumed_from"].endswith(f"{killed.info.run_id}/last.ckpt")
    assert run.data.tags["harness.driver"] == "second-driver"


def test_a_stage_without_a_stopped_attempt_starts_afresh(tmp_path, real_mrpc_dir):
    first = attempt(tmp_path, real_mrpc_dir, "only-driver")
    assert first.returncode == 0, first.stderr[-3000:]
    outcome = json.loads(first.stdout.strip().splitlines()[-1])
    assert not outcome["resumed"] and not outcome["reused"]
    (run,) = all_runs(tmp_path)
    assert "harness.resumed_from" not in run.data.tags
    assert run.data.tags["harness.checkpoint_dir"] == str(
        (tmp_path / "checkpoints" / "pretrain" / run.info.run_id).resolve()
    )
