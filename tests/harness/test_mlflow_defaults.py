"""The harness's MLflow defaults: telemetry off (MLflow 3 otherwise writes an installation id under
``~/.config/mlflow`` as soon as it is imported) and bounded HTTP retries; a user's own values win."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, os
import pretrain.__main__  # what `python -m pretrain` imports first (its main block does not run)
import mlflow
names = ["MLFLOW_DISABLE_TELEMETRY", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"]
print(json.dumps({name: os.environ.get(name) for name in names}))
"""


def probe(home: Path, **settings: str) -> dict:
    """Import the harness in a clean environment (no CI or pytest variables, which turn MLflow's
    telemetry off by themselves) with ``home`` as the home folder."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "PYTHONPATH": str(REPO), **settings}
    process = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=home, env=env, capture_output=True, text=True, timeout=120
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_telemetry_is_off_and_retries_are_bounded_by_default(tmp_path):
    seen = probe(tmp_path)
    assert seen == {
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    }
    assert not (tmp_path / ".config" / "mlflow").exists()


@pytest.mark.slow
def test_the_users_settings_win(tmp_path):
    seen = probe(tmp_path, MLFLOW_DISABLE_TELEMETRY="false", MLFLOW_HTTP_REQUEST_MAX_RETRIES="9")
    assert seen["MLFLOW_DISABLE_TELEMETRY"] == "false" and seen["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "9"
    assert (tmp_path / ".config" / "mlflow" / "telemetry.json").is_file()  # telemetry back on, as asked
