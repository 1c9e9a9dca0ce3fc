"""A team's tracking server, end to end and as an attacker would try it: ``python -m pretrain.team_server``
(what ``make server`` runs) starts a closed PostgreSQL cluster from Debian's binaries in a
temporary folder and ``mlflow server`` with MLflow's basic-auth app on it, on free local ports;
``python -m harness.server.users`` (``make server-user``) adds an EDIT and a READ user.

- every request needs a user; the old default admin password and anonymous sign-up get nowhere;
- the EDIT user's smoke pipeline (``latest``, ``runs:/``, ``models:/``, two finetune runs at
  once, a tiny benchmark) finishes through the HTTP API; the READ user can search its runs, but
  a pretrain as that user exits 2 in one line naming the permission, leaving no run; only the
  admin deletes a run;
- the database refuses a connection without the password (also as the OS user ``nobody``), and
  with it the MLflow role can neither run a program (``COPY … TO PROGRAM``) nor read a server file;
- an encoder checkpoint replaced through the artifact API is refused on download in one line;
- no password or key appears in the server's console, in any run's params or tags, or in the
  saved config artifacts; Ctrl-C stops the server and the database.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
import psycopg
import pytest
import requests
import torch
from mlflow.tracking import MlflowClient

from harness.digests import DIGEST_PARAM, sha256_of
from harness.server.postgres import postgres_bin
from harness.server.tracking_server import stop_process_group, wait_healthy
from pretrain.encoders.loading import ENCODER_CACHE
from tests import preloaded
from tests.ui.stores import CONSOLE, FINETUNE_SMOKE, PRETRAIN_FLAGS, PRETRAIN_SMOKE, cli_env, free_port, link, pipeline

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
PASSWORD_LINE = re.compile(r"export MLFLOW_TRACKING_PASSWORD=(\S+)")


def add_user(server: dict, name: str, role: str) -> dict[str, str]:
    """``make server-user NAME=name ROLE=role``; returns the credentials it printed."""
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.server.users",
            name,
            "--role",
            role,
            "--url",
            server["url"],
            "--secrets-dir",
            str(server["secrets"]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr[-2000:]
    server["printed"].append(process.stdout)
    return {"MLFLOW_TRACKING_USERNAME": name, "MLFLOW_TRACKING_PASSWORD": PASSWORD_LINE.search(process.stdout)[1]}


def as_user(credentials: dict[str, str]) -> MlflowClient:
    os.environ.update(credentials)  # MLflow's client reads them per request; tests restore them
    return MlflowClient(os.environ["MLFLOW_TRACKING_URI"])


@pytest.fixture(scope="module")
def team_server(postgres_binaries, tmp_path_factory) -> dict:
    """``python -m pretrain.team_server`` on free ports with its users; the cluster's folder is readable
    by the unprivileged user PostgreSQL runs as (pytest's own temporary folders are root-only)."""
    base = Path(tempfile.mkdtemp(prefix="team-server-"))
    base.chmod(0o755)
    port, log = free_port(), tmp_path_factory.mktemp("server-log") / "server.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pretrain.team_server",
                "--port",
                str(port),
                "--postgres-dir",
                str(base / "postgres"),
                "--secrets-dir",
                str(base / "secrets"),
                "--artifacts-destination",
                str(base / "artifacts"),
                "--workers",
                "1",
            ],
            start_new_session=True,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    saved = {
        name: os.environ.get(name)
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
    }
    try:
        wait_healthy(url, process, timeout=900)  # a cap against a hang; the event is its answer
        server = {"url": url, "process": process, "base": base, "log": log, "secrets": base / "secrets", "printed": []}
        while "Ctrl-C stops" not in log.read_text():  # the server checked its own door and made the experiments
            assert process.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
        server["admin"] = {
            "MLFLOW_TRACKING_USERNAME": "admin",
            "MLFLOW_TRACKING_PASSWORD": (base / "secrets" / "admin.password").read_text().strip(),
        }
        server["editor"] = add_user(server, "editor", "edit")
        server["reader"] = add_user(server, "reader", "read")
        os.environ["MLFLOW_TRACKING_URI"] = url
        yield server
    except Exception:  # noqa: BLE001 - whatever stopped the start, the server goes and the log shows why
        stop_everything(process, port, base)
        pytest.fail(f"make server did not come up: {log.read_text()[-3000:]}")
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
        stop_everything(process, port, base)
        subprocess.run(["rm", "-rf", str(base)], check=False)


def stop_everything(process: subprocess.Popen, port: int, base: Path) -> None:
    """What ``make server`` started, stopped even after a failed test: the server's own shutdown
    first (Ctrl-C: the MLflow server, then the cluster), then whatever it left, each killed."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            stop_process_group(process, grace=0)
    for leftover in psutil.process_iter(["pid", "cmdline"]):  # the MLflow server runs in its own group
        command = leftover.info["cmdline"] or []
        if "mlflow" in " ".join(command) and "server" in command and str(port) in command:
            with contextlib.suppress(ProcessLookupError, psutil.Error):
                os.killpg(os.getpgid(leftover.info["pid"]), signal.SIGKILL)
    postmaster = base / "postgres" / "data" / "postmaster.pid"
    with contextlib.suppress(OSError, ValueError, IndexError):
        os.kill(int(postmaster.read_text().split()[0]), signal.SIGQUIT)  # PostgreSQL's immediate shutdown


@pytest.fixture(scope="module")
def through_server(team_server, mrpc_dir, tmp_path_factory) -> dict:
    """The smoke pipeline as the EDIT user, its console output kept for the secrets check."""
    directory = tmp_path_factory.mktemp("team-client")
    os.environ.update(team_server["editor"])
    return pipeline(team_server["url"], mrpc_dir, directory, random_like="models:/elmo-encoder-smoke@newest")


def run_cli(team_server, who: str, mrpc_dir, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**cli_env(team_server["url"], mrpc_dir), **team_server[who]}
    process = subprocess.run(
        preloaded.command(*args, env=env), cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    team_server["printed"] += [process.stdout, process.stderr]
    return process


def one_error_line(process: subprocess.CompletedProcess) -> str:
    lines = process.stderr.strip().splitlines()
    assert process.returncode == 2 and "Traceback" not in process.stderr, process.stderr[-3000:]
    assert [line for line in lines if line.startswith("error:")] == [lines[-1]]
    return lines[-1]


def running_runs(team_server) -> list:
    client = as_user(team_server["admin"])
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    return client.search_runs(experiments, "attributes.status = 'RUNNING'")


def test_every_request_needs_a_user_and_no_one_signs_up(team_server):
    url, reader = team_server["url"], team_server["reader"]
    search = f"{url}/api/2.0/mlflow/experiments/search?max_results=5"
    assert requests.get(search, timeout=10).status_code == 401
    assert requests.post(f"{url}/api/2.0/mlflow/experiments/create", json={"name": "x"}, timeout=10).status_code == 401
    assert requests.get(search, auth=("admin", "password1234"), timeout=10).status_code == 401  # the old default
    assert requests.get(search, auth=("admin", "wrong-password"), timeout=10).status_code == 401
    # sign-up: the page, the form's target and the REST call, anonymous and as a mere READ user
    reader_auth = (reader["MLFLOW_TRACKING_USERNAME"], reader["MLFLOW_TRACKING_PASSWORD"])
    attempts = [
        ("get", "/signup", {}),
        (
            "post",
            "/api/2.0/mlflow/users/create-ui",
            {"data": {"username": "mallory", "password": "mallory-password-1"}},
        ),
        ("post", "/api/2.0/mlflow/users/create", {"json": {"username": "mallory", "password": "mallory-password-1"}}),
    ]
    for method, path, body in attempts:
        assert getattr(requests, method)(url + path, timeout=10, **body).status_code == 401, path
        assert getattr(requests, method)(url + path, timeout=10, auth=reader_auth, **body).status_code in (400, 403), (
            path
        )
    assert requests.get(search, auth=("mallory", "mallory-password-1"), timeout=10).status_code == 401
    # the health check tells a missing from a rejected password
    down = {**cli_env(url, Path(".")), "MLFLOW_TRACKING_USERNAME": "", "MLFLOW_TRACKING_PASSWORD": ""}
    wrong = {**down, "MLFLOW_TRACKING_USERNAME": "reader", "MLFLOW_TRACKING_PASSWORD": "not-the-password"}
    check = "from harness.tracking.store import check_uri, tracking_uri; check_uri(tracking_uri())"
    for env, expected in (
        (down, "needs credentials (401): export MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"),
        (wrong, "rejected the password of MLFLOW_TRACKING_USERNAME=reader (401)"),
    ):
        process = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60)
        assert expected in process.stderr.strip().splitlines()[-1]


def test_the_pipeline_runs_through_the_http_server_as_an_edit_user(team_server, through_server, tmp_path):
    url, ids = team_server["url"], through_server["ids"]
    client = as_user(team_server["editor"])
    assert "postgresql://mlflow@127.0.0.1:" in team_server["log"].read_text()  # the store is the local cluster
    pretrain = client.get_run(ids["pretrain"])
    assert pretrain.info.status == "FINISHED" and pretrain.info.artifact_uri.startswith("mlflow-artifacts:/")
    version = client.get_model_version_by_alias("elmo-encoder-smoke", "newest")  # a smoke run's own model
    assert version.run_id == ids["pretrain"]
    downloaded = client.download_artifacts(ids["pretrain"], "checkpoint/encoder.ckpt", str(tmp_path / "pretrain"))
    assert pretrain.data.params[DIGEST_PARAM] == sha256_of(downloaded)
    # `latest` and models:/…@newest both resolved to the pretrain run, over HTTP
    pretrained, random = client.get_run(ids["finetune-latest"]), client.get_run(ids["finetune-random"])
    assert pretrained.data.tags["pretrain_run_id"] == ids["pretrain"]
    assert random.data.params["model.encoder"] == f"random:runs:/{ids['pretrain']}@0"
    # two finetune runs at once: both finished, each with its own artifacts, stored by the server
    for run in (pretrained, random):
        assert run.info.status == "FINISHED" and len(run.data.params[DIGEST_PARAM]) == 64
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
        next(c for c in cells if c.data.tags["kind"] == "pretrained").data.metrics["test_acc"]
    )
    assert "## Remarks" in parent.data.tags["mlflow.note.content"]
    assert link(through_server["benchmark"], "runs").startswith(url)  # the printed links open this server's UI


def test_a_read_user_searches_runs_but_cannot_log_a_run_or_delete_one(team_server, through_server, mrpc_dir, tmp_path):
    ids = through_server["ids"]
    reader = as_user(team_server["reader"])
    pretrain_experiment = reader.get_experiment_by_name("pretrain").experiment_id
    found = reader.search_runs([pretrain_experiment], "tags.stage = 'pretrain'")
    assert ids["pretrain"] in {run.info.run_id for run in found}
    before = len(reader.search_runs([pretrain_experiment]))
    process = run_cli(
        team_server, "reader", mrpc_dir, tmp_path, "pretrain", "fit", "--config", str(PRETRAIN_SMOKE), *PRETRAIN_FLAGS
    )
    line = one_error_line(process)
    assert line == (
        "error: MLFLOW_TRACKING_USERNAME=reader has READ permission on experiment 'pretrain' of "
        f"{team_server['url']}; logging a run needs EDIT: ask the server's admin "
        "(make server-user NAME=reader ROLE=edit)"
    )
    assert not (tmp_path / "checkpoints").exists()  # refused before any local work
    assert len(reader.search_runs([pretrain_experiment])) == before and not running_runs(team_server)
    # deleting: the READ and the EDIT user are refused, the admin may
    victim = as_user(team_server["admin"]).create_run(pretrain_experiment, tags={"stage": "scratch"}).info.run_id
    for who in ("reader", "editor"):
        as_user(team_server[who])
        auth = (team_server[who]["MLFLOW_TRACKING_USERNAME"], team_server[who]["MLFLOW_TRACKING_PASSWORD"])
        answer = requests.post(
            f"{team_server['url']}/api/2.0/mlflow/runs/delete", json={"run_id": victim}, auth=auth, timeout=10
        )
        assert answer.status_code == 403, who
    admin = as_user(team_server["admin"])
    admin.delete_run(victim)
    assert admin.get_run(victim).info.lifecycle_stage == "deleted"
    # the EDIT user registered versions of elmo-encoder-smoke, but the server's admin owns the model: no deleting it
    editor = team_server["editor"]
    answer = requests.delete(
        f"{team_server['url']}/api/2.0/mlflow/registered-models/delete",
        json={"name": "elmo-encoder-smoke"},
        timeout=10,
        auth=(editor["MLFLOW_TRACKING_USERNAME"], editor["MLFLOW_TRACKING_PASSWORD"]),
    )
    assert answer.status_code == 403 and admin.get_registered_model("elmo-encoder-smoke").name == "elmo-encoder-smoke"


def test_a_read_user_cannot_choose_anyone_elses_encoder(team_server):
    """Any user may create an experiment: a READ user's own FINISHED ``stage=pretrain`` run there,
    newer than every other, with its own checkpoint digest, was what everyone's ``latest`` (and a
    model name the user registered first) loaded. Now neither leaves the trusted experiments."""
    from harness.errors import UserError
    from pretrain.encoders.loading import latest_pretrain_run, resolve
    from pretrain.encoders.references import Source

    reader = as_user(team_server["reader"])
    own = reader.create_experiment("reader-own")
    planted = reader.create_run(own, tags={"stage": "pretrain", "family": "elmo"}).info.run_id
    reader.set_terminated(planted, "FINISHED")
    reader.create_registered_model("reader-encoder")
    reader.create_model_version("reader-encoder", f"runs:/{planted}/checkpoint", run_id=planted)
    as_user(team_server["editor"])
    try:
        assert latest_pretrain_run() != planted
    except UserError as error:  # no pretrain run of the team's yet
        assert "experiments pretrain" in str(error)
    with pytest.raises(UserError, match=r"experiment 'reader-own', run by .*runs:/" + planted):
        resolve(Source.parse("models:/reader-encoder/1"))


def test_a_cell_a_read_user_planted_is_never_reused(team_server):
    """A READ user created the experiment an editor's own-data suite logs to and planted a FINISHED
    run with the cell's hash (and the editor's name in ``mlflow.user``): the suite's lookup found it
    as done. Now the server's grants decide: the editor's own experiment and the team's are reused,
    the reader's is refused in one line."""
    from benchmarks.tasks.reuse import finished_run
    from harness.errors import UserError

    def planted(client, experiment: str, cell_hash: str) -> str:
        run = client.create_run(
            client.create_experiment(experiment)
            if client.get_experiment_by_name(experiment) is None
            else client.get_experiment_by_name(experiment).experiment_id,
            tags={"cell_hash": cell_hash, "mlflow.user": "editor", "stage": "finetune"},
        )
        client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    planted(as_user(team_server["reader"]), "own", "cell-planted")
    as_user(team_server["editor"])
    with pytest.raises(UserError) as refused:
        finished_run("own", "cell-planted")
    message = str(refused.value)
    assert "\n" not in message and "experiment 'own'" in message and "never reused" in message
    mine = planted(as_user(team_server["editor"]), "editor-own", "cell-mine")
    assert finished_run("editor-own", "cell-mine") == mine
    team = planted(as_user(team_server["editor"]), "mrpc", "cell-team")
    assert finished_run("mrpc", "cell-team") == team


def test_the_database_is_closed_to_other_local_users(team_server):
    secrets, log = team_server["secrets"], team_server["log"].read_text()
    port = int(re.search(r"postgresql://mlflow@127\.0\.0\.1:(\d+)/mlflow", log)[1])
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in secrets.iterdir()} == {
        name: 0o600
        for name in (
            "admin.password",
            "flask-secret.key",
            "basic_auth.ini",
            "pgpass",
            "postgres-mlflow.password",
            "postgres-superuser.password",
        )
    }
    for user in ("mlflow", "postgres"):  # no password: refused, whoever asks
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(
                host="127.0.0.1",
                port=port,
                user=user,
                dbname="mlflow",
                connect_timeout=5,
                passfile="/nonexistent",
                password="",
            )
    psql = postgres_bin() / "psql"
    if os.geteuid() == 0 and psql.is_file():  # the attack of the issue: psql as the OS user nobody, no password
        process = subprocess.run(
            [
                "runuser",
                "-u",
                "nobody",
                "--",
                "env",
                "-u",
                "PGPASSFILE",
                str(psql),
                "-w",
                f"postgresql://mlflow@127.0.0.1:{port}/mlflow",
                "-c",
                "select 1",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert process.returncode != 0 and "no password supplied" in process.stderr, process.stderr
    password = (secrets / "postgres-mlflow.password").read_text().strip()
    with psycopg.connect(
        host="127.0.0.1", port=port, user="mlflow", password=password, dbname="mlflow", autocommit=True
    ) as connection:
        assert connection.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user"
        ).fetchone() == (False, False, False)
        owner = connection.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'mlflow'")
        assert owner.fetchone() == ("mlflow",)
        marker = Path(tempfile.gettempdir()) / f"pwned-{os.getpid()}"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            connection.execute(f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'")
        assert not marker.exists()
        for query in (
            "SELECT pg_read_file('/etc/passwd')",
            "SELECT pg_ls_dir('.')",
            "COPY (SELECT 1) TO '/tmp/pwned-copy'",
            "SELECT lo_import('/etc/passwd')",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                connection.execute(query)
    superuser = (secrets / "postgres-superuser.password").read_text().strip()
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", password=superuser, dbname="postgres") as admin:
        rules = admin.execute("SELECT type, auth_method FROM pg_hba_file_rules").fetchall()
    assert rules and {method for _, method in rules} <= {"scram-sha-256", "reject"}, rules


def negated(data: bytes) -> bytes:
    checkpoint = torch.load(io.BytesIO(data), weights_only=True)
    checkpoint["state_dict"] = {
        key: -value if value.is_floating_point() else value for key, value in checkpoint["state_dict"].items()
    }
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    return buffer.getvalue()


def test_a_checkpoint_swapped_through_the_artifact_api_is_refused_on_download(
    team_server, through_server, mrpc_dir, tmp_path
):
    """The issue's attack, by a user who may write artifacts: PUT other bytes (the weights negated)
    at the pretrain run's checkpoint/encoder.ckpt. Runs after the pipeline test: it spoils the run."""
    run_id, editor = through_server["ids"]["pretrain"], team_server["editor"]
    run = as_user(editor).get_run(run_id)
    path = (
        f"{team_server['url']}/api/2.0/mlflow-artifacts/artifacts/"
        f"{run.info.artifact_uri.removeprefix('mlflow-artifacts:/')}/checkpoint/encoder.ckpt"
    )
    auth = (editor["MLFLOW_TRACKING_USERNAME"], editor["MLFLOW_TRACKING_PASSWORD"])
    genuine = requests.get(path, auth=auth, timeout=30)
    assert genuine.status_code == 200
    assert requests.put(path, data=negated(genuine.content), timeout=30).status_code == 401  # anonymous: no
    assert requests.put(path, data=negated(genuine.content), auth=auth, timeout=30).status_code == 200
    shutil.rmtree(ENCODER_CACHE / run_id, ignore_errors=True)  # this machine's genuine cached copy
    for source in (f"runs:/{run_id}", "models:/elmo-encoder-smoke@newest"):
        process = run_cli(
            team_server,
            "editor",
            mrpc_dir,
            tmp_path,
            "downstream",
            "fit",
            "--config",
            str(FINETUNE_SMOKE),
            f"--model.encoder={source}",
            "--trainer.max_epochs=1",
            f"--data.cache_dir={tmp_path / 'features'}",
            "--trainer.enable_progress_bar=false",
        )
        line = one_error_line(process)
        assert line.startswith(
            f"error: --model.encoder={source}: run {run_id}'s checkpoint/encoder.ckpt is not the "
            f"checkpoint the run recorded"
        ), line
        if source.startswith("runs:/"):
            break  # one CLI start is enough to show the run; models:/ resolves through the same download
    assert not running_runs(team_server)


def test_nothing_secret_reaches_the_console_the_runs_or_their_config(team_server, through_server, tmp_path):
    secrets = [
        path.read_text().strip()
        for path in team_server["secrets"].iterdir()
        if "password" in path.name or path.name.endswith(".key")
    ]
    secrets += [team_server[who]["MLFLOW_TRACKING_PASSWORD"] for who in ("editor", "reader")]
    assert len(secrets) == 6 and all(len(value) >= 12 for value in secrets)
    console = team_server["log"].read_text() + "".join(CONSOLE)  # the pipeline's stdout and stderr
    console += "".join(
        team_server["printed"][2:]
    )  # the CLIs run as users (add_user's own output shows a password once)
    texts = {"console": console}
    client = as_user(team_server["admin"])
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    for run in client.search_runs(experiments):
        texts[f"run {run.info.run_id} params/tags"] = repr(run.data.params) + repr(run.data.tags)
        names = [item.path for item in client.list_artifacts(run.info.run_id) if item.path.startswith("config")]
        for name in names:
            texts[f"run {run.info.run_id} {name}"] = Path(
                client.download_artifacts(run.info.run_id, name, str(tmp_path / run.info.run_id))
            ).read_text()
    assert any("config" in where for where in texts), list(texts)
    leaks = [(where, secret[:4]) for where, text in texts.items() for secret in secrets if secret in text]
    assert not leaks


def test_ctrl_c_stops_the_server_and_the_database(team_server, through_server):
    """Last in this module: SIGINT, as Ctrl-C sends it, ends the MLflow server and the cluster."""
    process, data = team_server["process"], team_server["base"] / "postgres" / "data"
    assert (data / "postmaster.pid").is_file()
    os.kill(process.pid, signal.SIGINT)
    # the event is the server's exit; pg_ctl's stop waits for the database's shutdown checkpoint (seconds,
    # minutes on a loaded host): the cap only keeps a hung shutdown from hanging the suite
    assert process.wait(timeout=900) == 0, team_server["log"].read_text()[-3000:]
    assert not (data / "postmaster.pid").exists()  # pg_ctl stopped the cluster
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # nothing left of its process group
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{team_server['url']}/health", timeout=5)  # nor of the MLflow server (its own group)
    assert "stopping" in team_server["log"].read_text()
