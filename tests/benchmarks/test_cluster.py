"""The study beyond one machine: families-quick on a two-node Ray cluster on this machine
(``ray.cluster_utils.Cluster``, one CPU a node) against a tracking server on loopback. Its cells
run on both nodes; the second node is removed while a cell runs on it, and the study still
finishes with every cell hash once FINISHED and nothing RUNNING; the graph holds (no cell starts
before its encoder's last stage has finished, independent encoders pretrain side by side). A
SQLite store with two nodes is refused in one line before any run exists. Then the study resumed
on a local Ray instance redoes two deleted cells with the same metrics."""

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import requests
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient
from ray._private import ray_constants

from benchmarks.plan.cells import plan
from benchmarks.plan.matrix import load_config
from benchmarks.stats.gaps import METRICS
from tests import preloaded

REPO = Path(__file__).resolve().parents[2]
QUICK = REPO / "configs" / "benchmarks" / "families-quick.yaml"
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``mlflow server`` on loopback with a SQLite backend and proxied artifacts."""
    root = tmp_path_factory.mktemp("server")
    port = free_port()
    log = (root / "server.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/health", timeout=2).ok:
                break
        except requests.RequestException:
            time.sleep(0.5)
    else:
        process.kill()
        pytest.fail(f"mlflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
    yield {"url": url, "root": root}
    process.terminate()
    process.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def cluster():
    """A head and a second node, one CPU each."""
    from ray.cluster_utils import Cluster

    two = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = two.add_node(num_cpus=1)
    two.wait_for_nodes()
    yield {"cluster": two, "worker": worker, "head": two.head_node}
    two.shutdown()


def suite_env(uri: str, mrpc_dir: Path, address: str | None) -> dict:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "MRPC_DIR": str(mrpc_dir),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.pop("RAY_ADDRESS", None)
    return {**env, "RAY_ADDRESS": address} if address else env


def suite_command(root: Path, *extra: str) -> list[str]:
    scratch = f"--trainer.default_root_dir={root}"
    return [
        sys.executable,
        "-m",
        "benchmarks.suite",
        "--config",
        str(QUICK),
        "--results-dir",
        str(root / "results"),
        f"--pretrain-args={scratch}",
        f"--finetune-args={scratch} --data.cache_dir={root / 'cache'}",
        *extra,
    ]


def all_runs(uri: str) -> list:
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    return client.search_runs(experiments, run_view_type=ViewType.ALL, max_results=10_000) if experiments else []


def planned_cells() -> int:
    config = load_config(QUICK)
    stand_ins = [
        {"name": e["name"], "run_id": f"run-{e['name']}", "family": e["name"], "num_layers": 3} for e in config.encoders
    ]
    return len(plan(config, stand_ins, []))


def test_a_sqlite_store_with_two_nodes_is_refused_before_anything_runs(cluster, tmp_path, mrpc_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = suite_env(uri, mrpc_dir, cluster["cluster"].address)
    process = subprocess.run(
        preloaded.as_preloaded(suite_command(tmp_path), env),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert process.returncode == 2, process.stderr[-3000:]
    lines = process.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == [lines[-1]], process.stderr[-3000:]
    assert "Traceback" not in process.stderr
    assert lines[-1].startswith(f"error: MLFLOW_TRACKING_URI={uri}: the Ray cluster") and "2 nodes" in lines[-1]
    assert "make server" in lines[-1]
    assert all_runs(uri) == [] and not (tmp_path / "results").exists()


def node_processes(node) -> list[psutil.Process]:
    """The raylet of a cluster node and every process under it (its workers)."""
    raylet = psutil.Process(node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid)
    return [raylet, *raylet.children(recursive=True)]


def signal_all(processes: list[psutil.Process], signum: int) -> None:
    for process in processes:
        try:
            process.send_signal(signum)
        except psutil.NoSuchProcess:
            pass


def remove_when_busy(cluster: dict, uri: str, stop: threading.Event, removed: list) -> None:
    """Remove the second node once it has finished a cell while another runs on it. The node is
    frozen (SIGSTOP) before the second look, so a cell still RUNNING then cannot finish before the
    node goes: its attempt is lost for certain, however fast cells are."""
    client = MlflowClient(uri)
    node_id = cluster["worker"].node_id

    def cells() -> list:
        experiment = client.get_experiment_by_name("mrpc")
        if experiment is None:
            return []
        runs = client.search_runs(
            [experiment.experiment_id], f"tags.`harness.node` LIKE '%{node_id}'", max_results=1000
        )
        return [run for run in runs if run.data.tags.get("stage") == "finetune"]

    def busy() -> bool:
        found = cells()
        return any(run.info.status == "FINISHED" for run in found) and any(
            run.info.status == "RUNNING" for run in found
        )

    while not stop.is_set():
        if busy():
            frozen = node_processes(cluster["worker"])
            signal_all(frozen, signal.SIGSTOP)
            time.sleep(0.5)  # a request already sent lands before the second look
            if busy():
                cluster["cluster"].remove_node(cluster["worker"], allow_graceful=False)
                removed.append(time.time())
                signal_all(frozen, signal.SIGKILL)  # the node's agents outlive its raylet, frozen
                return
            signal_all(frozen, signal.SIGCONT)
        stop.wait(0.2)


@pytest.fixture(scope="module")
def study(cluster, server, tmp_path_factory, mrpc_dir):
    root = tmp_path_factory.mktemp("study")
    uri = server["url"]
    stop, removed = threading.Event(), []
    watcher = threading.Thread(target=remove_when_busy, args=(cluster, uri, stop, removed), daemon=True)
    watcher.start()
    try:
        env = suite_env(uri, mrpc_dir, cluster["cluster"].address)
        process = subprocess.run(
            preloaded.as_preloaded(suite_command(root), env),
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,  # a 2-core machine under load took 900 s; CI has 90 minutes
        )
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-4000:]
    runs = all_runs(uri)
    (parent,) = [run for run in runs if run.data.tags.get("stage") == "benchmark"]
    return {
        "root": root,
        "uri": uri,
        "mrpc_dir": mrpc_dir,
        "process": process,
        "runs": runs,
        "parent": parent,
        "removed": removed,
    }


def cells_of(runs: list, parent) -> list:
    return [run for run in runs if run.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def test_the_study_ran_on_both_nodes_and_survived_losing_one(study, cluster):
    assert study["removed"], "the second node never ran a cell while another had finished on it"
    cells = cells_of(study["runs"], study["parent"])
    finished = [run for run in cells if run.info.status == "FINISHED"]
    nodes = {run.data.tags["harness.node"].rpartition("/")[2] for run in finished}
    assert {cluster["head"].node_id, cluster["worker"].node_id} <= nodes
    lost = [run for run in cells if run.info.status == "KILLED"]
    assert lost and all(cluster["worker"].node_id in run.data.tags["harness.node"] for run in lost)
    assert all("attempt lost" in run.data.tags["harness.ended"] for run in lost)
    by_hash = Counter(run.data.tags["cell_hash"] for run in finished)
    assert len(by_hash) == planned_cells() and set(by_hash.values()) == {1}  # every cell hash once FINISHED
    assert not [run.info.run_id for run in study["runs"] if run.info.status == "RUNNING"]
    assert study["parent"].info.status == "FINISHED"
    assert "ran on     Ray cluster" in study["process"].stdout
    families = Counter(run.data.tags.get("family") for run in finished if run.data.tags["stage"] == "finetune")
    assert families == {"elmo": 8, "ulmfit": 8, "gpt": 8}
    report = (study["root"] / "results" / "report.md").read_text()
    assert "## Transfer study" in report and "### ulmfit" in report and "| gradual | concat-pool |" in report
    assert (study["root"] / "results" / "figures" / "gap_by_fraction.png").is_file()


def test_no_cell_starts_before_its_encoder_and_encoders_pretrain_side_by_side(study):
    pretrain = [
        run for run in study["runs"] if run.data.tags.get("stage") == "pretrain" and run.info.status == "FINISHED"
    ]
    stages = {(run.data.tags["family"], run.data.tags["lm_stage"]) for run in pretrain}
    assert stages == {("elmo", "general"), ("ulmfit", "general"), ("ulmfit", "task"), ("gpt", "general")}
    ready = {}  # encoder (= family here) → when its last stage ended
    for run in pretrain:
        ready[run.data.tags["family"]] = max(ready.get(run.data.tags["family"], 0), run.info.end_time)
    cells = [run for run in cells_of(study["runs"], study["parent"]) if run.data.tags["stage"] == "finetune"]
    assert cells and all(run.info.start_time >= ready[run.data.tags["suite_encoder"]] for run in cells)
    node = {(run.data.tags["family"], run.data.tags["lm_stage"]): run.data.tags["harness.node"] for run in pretrain}
    together = stages_in_flight_together(study["process"].stdout)
    assert any(node[first] != node[second] for first, second in together), (together, node)


def stages_in_flight_together(stdout: str) -> list[tuple]:
    """Pairs of stages (family, lm_stage) the suite had dispatched at once, read from its
    "pretraining …" and "pretrained …" lines in order. Two such stages on different one-CPU nodes
    ran side by side, a node each; their MLflow runs need not overlap, since a run starts only
    after its stage's setup, which outlasts a tiny stage's training on a loaded machine."""
    in_flight, pairs = [], []
    for line in stdout.splitlines():
        found = re.match(r"\s+pretrain(ing|ed) encoder '([^']+)' stage (\d+)", line)
        if found:
            stage = (found[2], "general" if found[3] == "1" else "task")  # a later stage continues
            if found[1] == "ing":
                pairs += [(other, stage) for other in in_flight]
                in_flight.append(stage)
            else:
                in_flight.remove(stage)
    return pairs


def test_the_study_resumed_on_a_local_instance_redoes_lost_cells_alike(study):
    client = MlflowClient(study["uri"])
    cells = [run for run in cells_of(study["runs"], study["parent"]) if run.info.status == "FINISHED"]
    lost = {
        run.data.tags["method"]: run
        for run in cells
        if run.data.tags["method"] in ("elmo-frozen-pool-mlp", "gpt-full-cls@0.5")
    }
    for run in lost.values():
        client.delete_run(run.info.run_id)
    env = suite_env(study["uri"], study["mrpc_dir"], None)
    process = subprocess.run(
        preloaded.as_preloaded(suite_command(study["root"], "--jobs", "2"), env),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-4000:]
    assert process.stdout.count("(reused)") == planned_cells() - 2
    assert "started a local Ray instance" in process.stdout and "pretraining encoder" not in process.stdout
    redone = [
        run
        for run in cells_of(all_runs(study["uri"]), study["parent"])
        if run.info.status == "FINISHED"
        and run.data.tags["method"] in lost
        and run.info.run_id not in {old.info.run_id for old in lost.values()}
    ]
    assert sorted(run.data.tags["method"] for run in redone) == sorted(lost)
    for run in redone:  # the same numbers, on the cluster or the local instance
        before = lost[run.data.tags["method"]].data.metrics
        assert {key: run.data.metrics[key] for key in METRICS} == {key: before[key] for key in METRICS}
