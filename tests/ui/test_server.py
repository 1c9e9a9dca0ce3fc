"""A team's tracking server, end to end: ``python -m harness.server`` (what ``make server`` runs)
starts a PostgreSQL cluster from Debian's binaries in a temporary folder and ``mlflow server``
on it with proxied artifacts, on free local ports; the smoke pipeline runs through its HTTP API
(``latest``, ``runs:/`` and ``models:/`` resolution, two finetune runs at once, artifacts stored
by the server and downloaded back); Ctrl-C stops both. A server that is down at start is one
line within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import requests
from mlflow.tracking import MlflowClient

from harness.server import stop_process_group, wait_healthy
from tests.ui.stores import PRETRAIN_FLAGS, PRETRAIN_SMOKE, cli_env, free_port, link, pipeline

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def team_server(postgres_binaries, tmp_path_factory) -> dict:
    """``python -m harness.server`` on free ports; the cluster's folder is readable by the
    unprivileged user PostgreSQL runs as (pytest's own temporary folders are root-only)."""
    base = Path(tempfile.mkdtemp(prefix="team-server-"))
    base.chmod(0o755)
    port, log = free_port(), tmp_path_factory.mktemp("server-log") / "server.log"
    with log.open("w") as output:
        process = subprocess.Popen([sys.executable, "-m", "harness.server", "--port", str(port), "--postgres-dir",
                                    str(base / "postgres"), "--artifacts-destination", str(base / "artifacts"),
                                    "--workers", "1"],
                                   start_new_session=True, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, timeout=180)
    except Exception:
        stop_process_group(process)
        pytest.fail(f"make server did not come up: {log.read_text()[-3000:]}")
    yield {"url": url, "process": process, "base": base, "log": log}
    stop_process_group(process)
    subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.fixture(scope="module")
def through_server(team_server, mrpc_dir, tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("team-client")
    return pipeline(team_server["url"], mrpc_dir, directory, random_like="models:/elmo-encoder@newest")


def test_the_pipeline_runs_through_the_http_server_on_postgres(team_server, through_server, tmp_path):
    url, ids = team_server["url"], through_server["ids"]
    client = MlflowClient(url)
    assert "postgresql://mlflow@127.0.0.1:" in team_server["log"].read_text()  # the store is the local cluster
    pretrain = client.get_run(ids["pretrain"])
    assert pretrain.info.status == "FINISHED" and pretrain.info.artifact_uri.startswith("mlflow-artifacts:/")
    version = client.get_model_version_by_alias("elmo-encoder", "newest")
    assert version.run_id == ids["pretrain"]
    # `latest` and models:/…@newest both resolved to the pretrain run, over HTTP
    pretrained, random = client.get_run(ids["finetune-latest"]), client.get_run(ids["finetune-random"])
    assert pretrained.data.tags["pretrain_run_id"] == ids["pretrain"]
    assert random.data.params["model.encoder"] == f"random:runs:/{ids['pretrain']}@0"
    # two finetune runs at once: both finished, each with its own artifacts, stored by the server
    for run in (pretrained, random):
        assert run.info.status == "FINISHED"
        path = client.download_artifacts(run.info.run_id, "predictions/test.csv", str(tmp_path / run.info.run_id))
        frame = pd.read_csv(path)
        assert (frame["pred"] == frame["label"]).mean() == pytest.approx(run.data.metrics["test_acc"], abs=1e-12)
        stored = team_server["base"] / "artifacts" / run.info.experiment_id / run.info.run_id / "artifacts"
        assert (stored / "predictions" / "test.csv").is_file()
    # the benchmark resolved `latest`, ran its cells with runs:/<id>, and summarised them on its parent
    parent_id = link(through_server["benchmark"], "parent").split("/runs/")[1].split("?")[0]
    parent = client.get_run(parent_id)
    assert parent.info.status == "FINISHED" and parent.data.tags["stage"] == "benchmark"
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'")
    assert len(children) == 3 and all(child.info.status == "FINISHED" for child in children)
    cells = [child for child in children if child.data.tags["stage"] == "finetune"]
    assert {child.data.tags["encoder_source"] for child in cells} == {f"runs:/{ids['pretrain']}"}
    assert parent.data.metrics["elmo-scalar-pool-mlp/test_acc_mean"] == pytest.approx(
        next(c for c in cells if c.data.tags["kind"] == "pretrained").data.metrics["test_acc"])
    assert "## Remarks" in parent.data.tags["mlflow.note.content"]
    assert link(through_server["benchmark"], "runs").startswith(url)  # the printed links open this server's UI


def test_a_server_that_is_down_is_one_line_within_seconds(mrpc_dir, tmp_path):
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = cli_env(down, mrpc_dir)
    try:
        process = subprocess.run([sys.executable, "-m", "pretrain", "fit", "--config", str(PRETRAIN_SMOKE),
                                  *PRETRAIN_FLAGS], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=30)  # a hang guard: MLflow's own retries alone take minutes
    except subprocess.TimeoutExpired:
        pytest.fail(f"still waiting for {down} after 30 s")
    lines = process.stderr.strip().splitlines()
    assert process.returncode == 2 and "Traceback" not in process.stderr, process.stderr[-3000:]
    assert lines[-1].startswith("error:") and down in lines[-1], lines[-1]


def test_ctrl_c_stops_the_server_and_the_database(team_server, through_server):
    """Last in this module: SIGINT, as Ctrl-C sends it, ends the MLflow server and the cluster."""
    process, data = team_server["process"], team_server["base"] / "postgres" / "data"
    assert (data / "postmaster.pid").is_file()
    os.kill(process.pid, signal.SIGINT)
    assert process.wait(timeout=60) == 0, team_server["log"].read_text()[-3000:]
    assert not (data / "postmaster.pid").exists()  # pg_ctl stopped the cluster
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # nothing left of its process group
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{team_server['url']}/health", timeout=5)  # nor of the MLflow server (its own group)
    assert "stopping" in team_server["log"].read_text()
