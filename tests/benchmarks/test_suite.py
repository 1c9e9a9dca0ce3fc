"""The benchmark suite: config checks and the cell plan (fast), then the real
``python -m benchmarks.suite`` on the quick config against a throw-away MLflow store, its tasks on
a local Ray instance the suite starts and stops — what the parent run and its cells hold, the
results table, resuming, re-running a lost cell in the suite's own process (``--jobs 1``: the
same metrics), and Ctrl-C, which leaves nothing RUNNING."""

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from benchmarks.plan.cells import expand_mixes, plan
from benchmarks.plan.matrix import load_config, parse_matrix, with_budget
from benchmarks.stats.gaps import METRICS
from harness.cli.precision import default_precision
from harness.errors import UserError
from harness.machine import cpu_model, usable_cpus
from tests import preloaded
from tests.helpers import all_runs

REPO = Path(__file__).resolve().parents[2]
QUICK = REPO / "configs" / "benchmarks" / "quick.yaml"
CONTRACT_COLUMNS = (
    ["method", "n_seeds"]
    + [
        f"{split}_{metric}_{statistic}"
        for split in ("dev", "test")
        for metric in ("acc", "f1")
        for statistic in ("mean", "std", "min", "max")
    ]
    + ["p_value_vs_random"]
)
QUICK_METHODS = [
    "elmo-average-pool-mlp",
    "random-average-pool-mlp",
    "elmo-scalar-pool-mlp",
    "random-scalar-pool-mlp",
    "elmo-top-pool-mlp",
    "random-top-pool-mlp",
    "elmo-layer:0-pool-mlp",
    "random-layer:0-pool-mlp",
    "elmo-layer:1-pool-mlp",
    "random-layer:1-pool-mlp",
    "elmo-scalar-pool-mlp@0.1",
    "random-scalar-pool-mlp@0.1",
    "majority",
    "tfidf-lr",
    "majority@0.1",
    "tfidf-lr@0.1",  # the baselines at 0.1: on the curve seed's subset
]


# ── expand_mixes and plan ──────────────────────────────────────────────────────────────────────

ENCODER = {"name": "elmo", "run_id": "abc123", "num_layers": 3}


def test_expand_mixes_spells_out_the_single_layers_below_the_top():
    assert expand_mixes(["average", "layers", "top"], 3) == ["average", "layer:0", "layer:1", "top"]
    assert expand_mixes(["layers"], 4) == ["layer:0", "layer:1", "layer:2"]
    assert expand_mixes(["layer:1", "layers", "scalar", "scalar"], 3) == ["layer:1", "layer:0", "scalar"]


def suite_config(**overrides) -> dict:
    config = {
        "mixes": ["average", "layers"],
        "heads": ["pool-mlp"],
        "seeds": 2,
        "random_control": True,
        "baselines": ["majority", "tfidf-lr"],
        "learning_curve": {"fractions": [0.1, 1.0], "mix": "scalar", "head": "pool-mlp", "seeds": 1},
    }
    return parse_matrix({**config, **overrides})


def test_plan_pairs_every_pretrained_cell_with_its_random_control():
    cells = plan(suite_config(), [ENCODER], ["--trainer.max_epochs=1"])
    finetune = [cell for cell in cells if cell.kind != "baseline"]
    pretrained = [cell for cell in finetune if cell.kind == "pretrained"]
    random = [cell for cell in finetune if cell.kind == "random"]
    # average, layer:0, layer:1 at two seeds + the 0.1 curve point at one seed
    assert len(pretrained) == len(random) == 3 * 2 + 1
    for cell in pretrained:
        assert cell.encoder == "elmo" and cell.encoder_run == "abc123" and cell.args == ["--trainer.max_epochs=1"]
        controls = [other for other in random if (other.method, other.seed) == (cell.control, cell.seed)]
        assert len(controls) == 1 and controls[0] is cells[cells.index(cell) + 1]  # right after what it controls
        (control,) = controls
        assert cell.method.startswith("elmo-") and control.method == "random-" + cell.method.removeprefix("elmo-")
        assert (control.mix, control.head, control.train_fraction, control.seed, control.encoder_run) == (
            cell.mix,
            cell.head,
            cell.train_fraction,
            cell.seed,
            cell.encoder_run,
        )
    assert all(cell.control == "" for cell in random)
    assert [(cell.method, cell.seed) for cell in pretrained] == [
        ("elmo-average-pool-mlp", 0),
        ("elmo-average-pool-mlp", 1),
        ("elmo-layer:0-pool-mlp", 0),
        ("elmo-layer:0-pool-mlp", 1),
        ("elmo-layer:1-pool-mlp", 0),
        ("elmo-layer:1-pool-mlp", 1),
        ("elmo-scalar-pool-mlp@0.1", 0),
    ]


def test_plan_learning_curve_adds_fractions_below_one_only():
    cells = plan(suite_config(mixes=["scalar"]), [ENCODER], [])
    curve = [cell for cell in cells if cell.train_fraction < 1 and cell.kind != "baseline"]
    assert [(cell.method, cell.train_fraction, cell.seed) for cell in curve] == [
        ("elmo-scalar-pool-mlp@0.1", 0.1, 0),
        ("random-scalar-pool-mlp@0.1", 0.1, 0),
    ]
    assert all(cell.mix == "scalar" and cell.head == "pool-mlp" for cell in curve)
    # the 1.0 point is the matrix's own scalar cell: not a second copy, no "@1" method
    full = [(cell.method, cell.seed) for cell in cells if cell.kind != "baseline" and cell.train_fraction == 1.0]
    assert full == [
        ("elmo-scalar-pool-mlp", 0),
        ("random-scalar-pool-mlp", 0),
        ("elmo-scalar-pool-mlp", 1),
        ("random-scalar-pool-mlp", 1),
    ]
    assert not any("@1" in cell.method for cell in cells)


def test_plan_appends_baselines_with_no_twin():
    cells = plan(suite_config(), [ENCODER], ["--x"])
    baselines = cells[-4:]  # whole train split once, then the curve's 0.1 on its seed's subset
    assert [(cell.method, cell.kind, cell.seed, cell.train_fraction) for cell in baselines] == [
        ("majority", "baseline", 0, 1.0),
        ("tfidf-lr", "baseline", 0, 1.0),
        ("majority@0.1", "baseline", 0, 0.1),
        ("tfidf-lr@0.1", "baseline", 0, 0.1),
    ]
    assert all(cell.control == "" for cell in baselines)  # a baseline is compared with nothing
    assert all(cell.kind != "baseline" for cell in cells[:-4])


def test_plan_without_control_or_baselines_and_with_several_encoders():
    alone = plan(suite_config(random_control=False, baselines=[]), [ENCODER], [])
    assert alone and all(cell.kind == "pretrained" and cell.control == "" for cell in alone)
    other = {"name": "big", "run_id": "def456", "num_layers": 2}
    cells = plan(suite_config(mixes=["top"], learning_curve=None, seeds=1, baselines=[]), [ENCODER, other], [])
    assert [(cell.method, cell.control, cell.encoder_run) for cell in cells] == [
        ("elmo-top-pool-mlp", "random(elmo)-top-pool-mlp", "abc123"),
        ("random(elmo)-top-pool-mlp", "", "abc123"),
        ("big-top-pool-mlp", "random(big)-top-pool-mlp", "def456"),
        ("random(big)-top-pool-mlp", "", "def456"),
    ]


# ── load_config ────────────────────────────────────────────────────────────────────────────────

GOOD = {"encoders": [{"name": "elmo", "run": "latest"}]}


def write_config(tmp_path: Path, content) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return path


def test_load_config_fills_defaults_and_reads_the_shipped_configs(tmp_path):
    config = load_config(write_config(tmp_path, GOOD))
    assert (config.name, config.experiment, config.seeds) == ("suite", "mrpc", (0, 1, 2, 3, 4))
    assert (config.finetune_config, config.finetune_args) == ("configs/downstream/mrpc.yaml", ())
    study = REPO / "configs" / "benchmarks" / "families.yaml"
    assert with_budget(load_config(study), study).name == "families-budget"  # its mixes and heads parse
    for name in ("quick", "default"):
        shipped = load_config(REPO / "configs" / "benchmarks" / f"{name}.yaml")
        assert shipped.name == name
        assert (REPO / shipped.finetune_config).is_file()
        assert all((REPO / e["pretrain"]["config"]).is_file() for e in shipped.encoders if "pretrain" in e)


@pytest.mark.parametrize(
    "content, fragment",
    [
        ({**GOOD, "seed": 3}, "unknown key(s) ['seed']"),
        ({"encoders": [{"name": "elmo"}]}, "`run`"),
        ({"encoders": [{"run": "latest"}]}, "`name`"),
        ({**GOOD, "baselines": ["majority", "bert"]}, "unknown baseline 'bert'"),
        ({"mixes": ["scalar"]}, "encoders"),
        ("encoders: [unclosed", "not valid YAML"),
        (
            {**GOOD, "mixes": ["scalar", "scaler"]},
            "`mixes`: mix=scaler: unknown mix; choose average, scalar, top or layer:K",
        ),
        ({**GOOD, "heads": ["pool-mlp", "esim"]}, "`heads`: head=esim: unknown head; choose one of pool-mlp"),
        ({**GOOD, "learning_curve": {"fractions": [0.5], "mix": "layer:one"}}, "`learning_curve.mix`: mix=layer:one"),
        (
            {**GOOD, "transfers": {"gpt": [{"name": "tuned", "heads": ["clss"]}]}},
            "`transfers.gpt.tuned.heads`: head=clss",
        ),
        ({**GOOD, "budget": {"mixes": ["avg"]}}, "`mixes`: mix=avg"),
    ],
    ids=[
        "unknown-key",
        "encoder-without-run",
        "encoder-without-name",
        "unknown-baseline",
        "no-encoders",
        "bad-yaml",
        "mix",
        "head",
        "curve-mix",
        "transfer-head",
        "budget-mix",
    ],
)
def test_load_config_errors_are_one_line_naming_the_file(tmp_path, content, fragment):
    path = write_config(tmp_path, content)
    with pytest.raises(UserError) as raised:
        config = load_config(path)
        with_budget(config, path) if config.budget else None
    message = str(raised.value)
    assert "\n" not in message and str(path) in message and fragment in message, message


def test_a_layer_the_encoder_lacks_stops_the_plan_before_any_cell():
    with pytest.raises(UserError, match=r"^encoder 'elmo': mix=layer:3: the encoder has layers 0\.\.2 \(L=3\)"):
        plan(parse_matrix({"mixes": ["scalar", "layer:3"], "heads": ["pool-mlp"], "seeds": 1}), [ENCODER], [])


def test_load_config_missing_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(UserError, match="no such file") as raised:
        load_config(missing)
    assert str(missing) in str(raised.value) and "\n" not in str(raised.value)


# ── the real suite, end to end ─────────────────────────────────────────────────────────────────


def suite_command(root: Path, jobs: int = 2) -> list[str]:
    scratch = f"--trainer.default_root_dir={root / 'lightning'}"  # checkpoints stay out of the repo
    return [
        sys.executable,
        "-m",
        "benchmarks.suite",
        "--config",
        str(QUICK),
        "--results-dir",
        str(root / "results"),
        "--jobs",
        str(jobs),
        "--pretrain-args",
        f"--data.max_sentences=800 --trainer.limit_val_batches=5 --model.hidden_size=16 {scratch}",
        "--finetune-args",
        f"--data.max_pairs=150 --trainer.max_epochs=1 --data.cache_dir={root / 'cache'} {scratch}",
    ]


def run_suite(root: Path, mrpc_dir: Path, command: list[str] | None = None, timeout: int = 1800):
    """The suite to its end; ``timeout`` only keeps a hung suite from hanging the tests (a quick
    matrix takes minutes on a loaded 2-core machine)."""
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
        "MRPC_DIR": str(mrpc_dir),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    return subprocess.run(
        preloaded.as_preloaded(command or suite_command(root), env),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def benchmark_parents(uri: str) -> list:
    return [run for run in all_runs(uri) if run.data.tags.get("stage") == "benchmark"]


def children(uri: str, parent: str) -> list:
    return [run for run in all_runs(uri, ViewType.ACTIVE_ONLY) if run.data.tags.get("mlflow.parentRunId") == parent]


def cell_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.lstrip().startswith("[") and f"/{len(QUICK_METHODS)}]" in line]


@pytest.fixture(scope="module")
def first(tmp_path_factory, real_mrpc_dir):
    """One quick benchmark from scratch: pretraining, 12 finetune cells, 4 baselines (2 at 0.1 of the labels)."""
    root = tmp_path_factory.mktemp("suite")
    process = run_suite(root, real_mrpc_dir)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    runs = all_runs(uri) if (root / "mlflow.db").exists() else []
    yield {
        "root": root,
        "mrpc_dir": real_mrpc_dir,
        "uri": uri,
        "process": process,
        "runs": runs,
        "results": (root / "results" / "results.csv").read_text() if process.returncode == 0 else None,
    }
    # load_encoder caches checkpoints under the repo's .cache/encoders/<run id>: remove this store's
    for run in runs:
        if run.data.tags.get("stage") == "pretrain":
            shutil.rmtree(REPO / ".cache" / "encoders" / run.info.run_id, ignore_errors=True)


@pytest.fixture(scope="module")
def parent_run(first):
    assert first["process"].returncode == 0, first["process"].stderr[-5000:]
    (parent,) = [run for run in first["runs"] if run.data.tags.get("stage") == "benchmark"]
    return parent


@pytest.mark.slow
def test_suite_finishes_with_a_parent_run_holding_the_outputs(first, parent_run, tmp_path):
    assert parent_run.info.status == "FINISHED"
    client, parent = MlflowClient(first["uri"]), parent_run.info.run_id
    top = {artifact.path for artifact in client.list_artifacts(parent)}
    assert {"results.csv", "report.md", "figures"} <= top
    figures = [artifact.path for artifact in client.list_artifacts(parent, "figures")]
    assert figures and all(path.startswith("figures/") and path.endswith(".png") for path in figures)
    results_dir = first["root"] / "results"
    for name in ["results.csv", "report.md", *figures]:
        assert (results_dir / name).is_file(), name
    logged = Path(client.download_artifacts(parent, "results.csv", str(tmp_path))).read_text()
    assert logged == first["results"] == (results_dir / "results.csv").read_text()
    report = (results_dir / "report.md").read_text()
    assert report.startswith("# Benchmark report: quick") and parent in report
    stdout = first["process"].stdout
    assert f"parent run {parent}" in stdout and "reused" not in stdout and "2 at a time" in stdout
    assert len(cell_lines(stdout)) == len(QUICK_METHODS)
    assert "ran on     a local Ray instance" in stdout and "2 CPUs" in stdout
    assert len(re.findall(r"started a local Ray instance \(gcs ", stdout)) == 1
    (stage_log,) = (results_dir / "logs").glob("pretrain-*.log")  # plain progress lines, then why it stopped
    assert re.search(r"^epoch 1/\d+ .*train_loss", stage_log.read_text(), re.MULTILINE), stage_log.read_text()[-2000:]


def ray_processes(stdout: str) -> list[str]:
    """Processes still alive of the Ray instance whose address a suite printed."""
    address = re.findall(r"\(gcs ([\d.]+:\d+)[,)]", stdout)[0]
    alive = []
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if address in command:
            alive.append(command[:120])
    return alive


@pytest.mark.slow
def test_the_suite_stops_the_local_ray_instance_it_started(first, parent_run):
    assert ray_processes(first["process"].stdout) == []


@pytest.mark.slow
def test_every_cell_is_a_tagged_child_of_the_parent(first, parent_run):
    cells = children(first["uri"], parent_run.info.run_id)
    assert sorted(run.data.tags["method"] for run in cells) == sorted(QUICK_METHODS)
    for run in cells:
        tags = run.data.tags
        assert run.info.status == "FINISHED"
        assert tags["seed"] == "0" and tags["cell_hash"]
        assert tags["stage"] == (
            "baseline" if tags["method"].partition("@")[0] in ("majority", "tfidf-lr") else "finetune"
        )
        for metric in ("dev_acc", "dev_f1", "test_acc", "test_f1"):
            assert 0 <= run.data.metrics[metric] <= 1, (tags["method"], metric)
    pretrain_runs = [run for run in first["runs"] if run.data.tags.get("stage") == "pretrain"]
    assert len(pretrain_runs) == 1 and pretrain_runs[0].info.status == "FINISHED"
    for run in cells:
        if run.data.tags["stage"] == "finetune":
            expected = "random" if run.data.tags["method"].startswith("random") else pretrain_runs[0].info.run_id
            assert run.data.tags["pretrain_run_id"] == expected
    # nothing but the pretraining, the parent and its cells
    assert len(first["runs"]) == 1 + 1 + len(QUICK_METHODS)


@pytest.mark.slow
def test_results_table_follows_the_contract(first, parent_run):
    results = pd.read_csv(first["root"] / "results" / "results.csv")
    assert list(results.columns) == CONTRACT_COLUMNS + [
        "collapsed_runs",
        "gap_vs_random",
        "gap_ci_low",
        "gap_ci_high",
        "mde_vs_random",
        "paired_seeds",
        "paired_items",
        "gap_test",
        "p_adjusted",
        "gap_vs_tfidf",
        "gap_vs_tfidf_ci_low",
        "gap_vs_tfidf_ci_high",
        "p_vs_tfidf",
        "p_vs_tfidf_adjusted",
        "control_ok",
        "control_reason",
        "tfidf_reference",
        "n_pretrainings",
        "train_steps_mean",
    ]
    assert results["method"].tolist() == QUICK_METHODS
    assert (results["n_seeds"] == 1).all()
    statistics = results[CONTRACT_COLUMNS[2:-1]]
    assert statistics.notna().all().all() and ((statistics >= 0) & (statistics <= 1)).all().all()
    for method, row in results.set_index("method").iterrows():
        if method.startswith("elmo-"):  # one seed pair: the paired gap, no CI or p (no seed replication)
            assert -1 <= row["gap_vs_random"] <= 1 and row["gap_test"] == "no seed replication", method
        else:  # random twins and baselines have no twin of their own
            assert math.isnan(row["gap_vs_random"]), method
        assert math.isnan(row["p_value_vs_random"]) and math.isnan(row["p_adjusted"]), method


@pytest.fixture(scope="module")
def second(first, parent_run):
    """The same command again: everything is found, nothing retrains."""
    process = run_suite(first["root"], first["mrpc_dir"])
    return {"process": process, "runs": all_runs(first["uri"])}


@pytest.mark.slow
def test_rerun_reuses_every_cell_and_the_parent(first, parent_run, second):
    process = second["process"]
    assert process.returncode == 0, process.stderr[-5000:]
    lines = cell_lines(process.stdout)
    assert len(lines) == len(QUICK_METHODS) and all(line.endswith("(reused)") for line in lines), "\n".join(lines)
    assert "pretraining encoder" not in process.stdout
    assert sorted(run.info.run_id for run in second["runs"]) == sorted(run.info.run_id for run in first["runs"])
    (parent,) = benchmark_parents(first["uri"])
    assert parent.info.run_id == parent_run.info.run_id and parent.info.status == "FINISHED"
    assert (first["root"] / "results" / "results.csv").read_text() == first["results"]


@pytest.fixture(scope="module")
def killed(first, parent_run, second):
    """A benchmark that lost three cells: one run deleted, one left FAILED, one left RUNNING by a
    process that died (as kill -9 leaves it), and the parent KILLED. Re-running must mark the
    dead one KILLED and redo exactly those three cells. The first run ran its cells two at a time in
    worker processes; this one runs them one at a time in the suite's process."""
    client, parent = MlflowClient(first["uri"]), parent_run.info.run_id
    by_method = {run.data.tags["method"]: run.info.run_id for run in children(first["uri"], parent)}
    client.delete_run(by_method["elmo-top-pool-mlp"])
    client.set_terminated(by_method["random-layer:0-pool-mlp"], "FAILED")
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    client.update_run(by_method["elmo-average-pool-mlp"], status="RUNNING")
    for key, value in {
        "harness.host": socket.gethostname(),
        "harness.pid": exited.stdout.strip(),
        "harness.pid_started": "1000000000.00",
    }.items():
        client.set_tag(by_method["elmo-average-pool-mlp"], key, value)
    client.set_terminated(parent, "KILLED")
    before = {run.info.run_id for run in all_runs(first["uri"])}
    process = run_suite(first["root"], first["mrpc_dir"], suite_command(first["root"], jobs=1))
    new = [run for run in all_runs(first["uri"]) if run.info.run_id not in before]
    return {"process": process, "new": new, "lost": by_method}


@pytest.mark.slow
def test_rerun_after_a_kill_redoes_only_the_lost_cells(first, parent_run, killed):
    process = killed["process"]
    assert process.returncode == 0, process.stderr[-5000:]
    lost = ["elmo-average-pool-mlp", "elmo-top-pool-mlp", "random-layer:0-pool-mlp"]
    assert sorted(run.data.tags["method"] for run in killed["new"]) == lost
    assert all(
        run.info.status == "FINISHED" and run.data.tags["mlflow.parentRunId"] == parent_run.info.run_id
        for run in killed["new"]
    )
    lines = cell_lines(process.stdout)
    redone = [line for line in lines if not line.endswith("(reused)")]
    assert len(lines) == len(QUICK_METHODS) and len(redone) == 3, "\n".join(lines)
    for method in lost:
        assert any(f"{method} " in line for line in redone), method
    client = MlflowClient(first["uri"])
    for run in killed["new"]:  # a cell's result does not depend on where it ran (worker or suite process)
        before = client.get_run(killed["lost"][run.data.tags["method"]]).data.metrics
        assert {key: run.data.metrics[key] for key in METRICS} == {key: before[key] for key in METRICS}
    (parent,) = benchmark_parents(first["uri"])
    assert parent.info.run_id == parent_run.info.run_id and parent.info.status == "FINISHED"
    active = children(first["uri"], parent.info.run_id)
    assert not [run.data.tags["method"] for run in active if run.info.status == "RUNNING"]
    dead = MlflowClient(first["uri"]).get_run(killed["lost"]["elmo-average-pool-mlp"])
    assert dead.info.status == "KILLED" and "died" in dead.data.tags["harness.ended"]
    finished = [run for run in active if run.info.status == "FINISHED"]
    assert sorted(run.data.tags["method"] for run in finished) == sorted(QUICK_METHODS)
    results = pd.read_csv(first["root"] / "results" / "results.csv")
    assert results["method"].tolist() == QUICK_METHODS


@pytest.mark.slow
def test_bad_suite_config_exits_2_with_one_error_line(tmp_path):
    bad = write_config(tmp_path, {**GOOD, "mixess": ["scalar"]})
    command = [sys.executable, "-m", "benchmarks.suite", "--config", str(bad), "--results-dir", str(tmp_path / "out")]
    process = run_suite(tmp_path, Path(os.environ.get("MRPC_DIR", "")), command, timeout=120)
    assert process.returncode == 2, process.stderr[-3000:]
    assert "Traceback" not in process.stderr
    lines = process.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == [lines[-1]], process.stderr[-3000:]
    assert str(bad) in lines[-1] and "mixess" in lines[-1]
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "mlflow.db").exists() or all_runs(f"sqlite:///{tmp_path / 'mlflow.db'}") == []


@pytest.fixture(scope="module")
def interrupted(first, parent_run, tmp_path_factory):
    """A copy of the first benchmark's store; the quick matrix again with other finetune flags
    (new cells, the encoder reused), interrupted with Ctrl-C once its first cell has finished and a later one
    has reported that it started (tests/benchmarks/hold.py: it then waits to be cancelled)."""
    return interrupt(first, tmp_path_factory.mktemp("interrupted"), signal.SIGINT)


@pytest.fixture(scope="module")
def terminated(first, parent_run, tmp_path_factory):
    """The same, stopped with SIGTERM (``kill``, a scheduler's stop)."""
    return interrupt(first, tmp_path_factory.mktemp("terminated"), signal.SIGTERM)


def interrupt(first, root: Path, signal_number: int) -> dict:
    shutil.copy(first["root"] / "mlflow.db", root / "mlflow.db")
    hold = (
        f"--trainer.callbacks+=tests.benchmarks.hold.HoldLaterCells "
        f"--trainer.callbacks.init_args.folder={root / 'hold'}"
    )
    command = [
        f"{argument} {hold}" if argument.startswith("--data.max_pairs") else argument
        for argument in suite_command(root)
    ]
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
        "MRPC_DIR": str(first["mrpc_dir"]),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }  # the cells' callback
    errors = (root / "stderr.txt").open("w")  # a file: a full pipe would stall the suite while stdout is read
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
    hang_guard = threading.Timer(1800, process.kill)  # only a suite that hangs meets it, never a slow one
    hang_guard.start()
    try:
        lines = []
        for line in process.stdout:  # the suite's progress: a line per finished cell
            lines.append(line)
            if line.lstrip().startswith("[") and "pool-mlp" in line:
                break
        while not list((root / "hold").glob("waiting-*")):  # a later cell has started and waits
            assert process.poll() is None, "".join(lines)[-3000:]
            time.sleep(0.1)
        process.send_signal(signal_number)
        stdout, _ = process.communicate(timeout=600)
    finally:
        hang_guard.cancel()
        if process.poll() is None:  # a failure above: nothing of the suite outlives the test
            process.kill()
            process.communicate()
        errors.close()
    return {
        "process": process,
        "stdout": "".join(lines) + stdout,
        "stderr": (root / "stderr.txt").read_text(),
        "uri": f"sqlite:///{root / 'mlflow.db'}",
    }


@pytest.mark.slow
def test_ctrl_c_cancels_the_tasks_and_leaves_nothing_running(parent_run, interrupted):
    assert interrupted["process"].returncode == 130, interrupted["stderr"][-3000:]
    assert interrupted["stderr"].strip().splitlines()[-1].startswith("error: interrupted (Ctrl-C)")
    runs = all_runs(interrupted["uri"])
    assert not [run.data.tags.get("method", run.data.tags.get("stage")) for run in runs if run.info.status == "RUNNING"]
    (parent,) = [run for run in benchmark_parents(interrupted["uri"]) if run.info.run_id != parent_run.info.run_id]
    assert parent.info.status == "KILLED" and parent.data.tags["harness.ended"].startswith("interrupted (Ctrl-C)")
    cells = children(interrupted["uri"], parent.info.run_id)
    statuses = {run.info.status for run in cells}
    assert "FINISHED" in statuses and "KILLED" in statuses, statuses  # one done, the one running cancelled
    assert all(run.data.tags.get("harness.ended") for run in cells if run.info.status == "KILLED")
    assert not [run for run in cells if run.info.status == "FINISHED" and "harness.ended" in run.data.tags]
    assert len(cells) < len(QUICK_METHODS)  # the rest never started
    assert ray_processes(interrupted["stdout"]) == []  # the local instance went down with the suite


# ── results as files: the quick benchmark exported, imported elsewhere, reported from the folder ─


def benchmarks_command(uri: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        preloaded.command("benchmarks", *args, env=env), cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def exported(first, parent_run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("exported") / "quick"
    process = benchmarks_command(first["uri"], "export", "--benchmark", "quick", "--out", str(folder))
    assert process.returncode == 0, process.stderr[-3000:]
    return folder


@pytest.mark.slow
def test_a_report_from_the_exported_folder_alone_equals_the_suites(first, exported, tmp_path):
    assert len(list((exported / "cells").glob("*.json"))) == len(QUICK_METHODS)
    readme = (exported / "README.md").read_text()
    assert readme.startswith("# quick\n") and f"- **cells**: {len(QUICK_METHODS)}, " in readme
    assert "- **machine**: `" in readme
    assert json.loads((exported / "benchmark.json").read_text())["corpora"] == {}  # quick reads MRPC alone
    process = benchmarks_command(
        "sqlite:///" + str(tmp_path / "unused.db"), "report", str(exported), "--out", str(tmp_path / "report")
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert (tmp_path / "report" / "results.csv").read_text() == first["results"]
    assert not (tmp_path / "unused.db").exists()  # no store was opened


@pytest.mark.slow
def test_the_exported_folder_records_the_machine_the_wall_time_and_each_cells_precision(exported):
    """What a cost read from the folder holds for: the CPU model, threads, tasks at once and
    precision of the suite, its wall time; each cell the precision it trained in, which its flags
    (and so its hash) name."""
    benchmark = json.loads((exported / "benchmark.json").read_text())
    precision = default_precision("cpu")
    # jobs: the suite's last run on this parent, --jobs 2, or 1 once the kill-and-rerun test continued it
    assert benchmark["machine"]["jobs"] in (1, 2)
    assert benchmark["machine"] == {
        "cpu_model": cpu_model(),
        "cpus": usable_cpus(),
        "jobs": benchmark["machine"]["jobs"],
        "cluster": False,
        "finetune_threads": 1,
        "pretrain_threads": benchmark["machine"]["pretrain_threads"],
        "precision": precision,
    }
    assert benchmark["machine"]["pretrain_threads"] >= 1 and benchmark["wall_seconds"] > 0
    cells = [json.loads(path.read_text()) for path in (exported / "cells").glob("*.json")]
    trained = [cell for cell in cells if cell["cell"]["kind"] in ("pretrained", "random")]
    assert trained and all(cell["precision"] == precision for cell in trained)
    assert all(f"--trainer.precision={precision}" in cell["spec"]["args"] for cell in trained)
    assert all(cell["precision"] is None for cell in cells if cell["cell"]["kind"] == "baseline")


@pytest.mark.slow
def test_an_imported_folder_exports_back_to_the_same_files(exported, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    imported = benchmarks_command(uri, "import", str(exported))
    assert imported.returncode == 0, imported.stderr[-3000:]
    runs = all_runs(uri)
    assert len([run for run in runs if run.data.tags.get("cell_hash")]) == len(QUICK_METHODS)
    assert all(run.info.status == "FINISHED" for run in runs)
    again = benchmarks_command(uri, "export", "--benchmark", "quick", "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr[-3000:]
    for path in sorted(exported.rglob("*")):
        if path.is_file():
            assert (tmp_path / "again" / path.relative_to(exported)).read_bytes() == path.read_bytes(), path.name


@pytest.mark.slow
def test_a_suite_on_a_fresh_store_goes_on_from_the_folder_without_training(first, exported, tmp_path):
    command = [*suite_command(tmp_path), "--results", str(exported)]
    process = run_suite(tmp_path, first["mrpc_dir"], command)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "every cell is in the results folders; not pretrained again" in process.stdout
    assert len([line for line in cell_lines(process.stdout) if "(from results quick)" in line]) == len(QUICK_METHODS)
    assert (tmp_path / "results" / "results.csv").read_text() == first["results"]
    assert not [
        run for run in all_runs(f"sqlite:///{tmp_path / 'mlflow.db'}") if run.data.tags.get("stage") == "pretrain"
    ]


@pytest.mark.slow
def test_sigterm_is_handled_like_ctrl_c(parent_run, terminated):
    """Not Ray's own handler, which exits at once (the parent FAILED, a cell FAILED, a C++ stack dump)."""
    assert terminated["process"].returncode == 143, terminated["stderr"][-3000:]
    assert terminated["stderr"].strip().splitlines()[-1].startswith("error: interrupted (SIGTERM)")
    assert "Traceback" not in terminated["stderr"] and "*** " not in terminated["stderr"]  # no Python or C++ stack
    runs = all_runs(terminated["uri"])
    assert not [run.data.tags.get("method", run.data.tags.get("stage")) for run in runs if run.info.status == "RUNNING"]
    (parent,) = [run for run in benchmark_parents(terminated["uri"]) if run.info.run_id != parent_run.info.run_id]
    assert parent.info.status == "KILLED" and parent.data.tags["harness.ended"].startswith("interrupted (SIGTERM)")
    statuses = {run.info.status for run in children(terminated["uri"], parent.info.run_id)}
    assert "FAILED" not in statuses and "KILLED" in statuses, statuses
    assert ray_processes(terminated["stdout"]) == []
