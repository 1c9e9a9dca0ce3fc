"""Shared by the browser and tracking-server tests: the real CLIs in subprocesses, a tiny
benchmark config, the smoke pipeline, and an MLflow UI/server process on a free port."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.server.tracking_server import free_port, stop_process_group, wait_healthy
from tests import helpers, preloaded
from tests.helpers import RUN_ID

__all__ = ["free_port", "Server", "pipeline", "link", "run_id_of", "cli_env", "start", "finish", "CONSOLE"]

REPO = Path(__file__).resolve().parents[2]
PRETRAIN_SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
FINETUNE_SMOKE = REPO / "configs" / "downstream" / "smoke.yaml"
PRETRAIN_FLAGS = [
    "--trainer.max_epochs=1",
    "--trainer.limit_val_batches=2",
    "--data.max_sentences=200",
    "--trainer.enable_progress_bar=false",
]
SCREENSHOTS = REPO / "tests" / "ui" / "screenshots"  # git-ignored; CI keeps them as artifacts
CONSOLE: list[str] = []  # stdout and stderr of every CLI run through finish(), for the secrets check


def cli_env(uri: str, mrpc_dir: Path, ui: str | None = None) -> dict:
    """A CLI's environment (``tests.helpers.cli_env``); with ``ui``, summaries link to the UI the test serves."""
    return helpers.cli_env(uri, mrpc_dir, **({"MLFLOW_UI_URL": ui} if ui else {}))


def start(module: str, *args: str, env: dict, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        preloaded.command(module, *args, env=env),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen, timeout: float = 600) -> str:
    """Wait for a CLI; returns its stdout, failing the test with its stderr's tail if it failed."""
    stdout, stderr = process.communicate(timeout=timeout)
    CONSOLE.extend([stdout, stderr])
    assert process.returncode == 0, stderr[-4000:]
    return stdout


def run_id_of(stdout: str) -> str:
    found = RUN_ID.search(stdout)
    assert found, stdout[-2000:]
    return found.group(1)


def link(stdout: str, label: str) -> str:
    """The URL on the summary line ``label`` (``run page``, ``runs``, ``compare``, ``parent``)."""
    found = re.search(rf"^  {re.escape(label)} +.*?(https?://\S+)", stdout, re.MULTILINE)
    assert found, (label, stdout[-2000:])
    return found.group(1)


def tiny_benchmark(directory: Path, cache: Path) -> Path:
    """A benchmark of three cells: the newest pretrain run and its random twin on the smoke
    finetune config, one epoch, and the majority baseline."""
    path = directory / "tiny.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: tiny
        encoders:
          - name: elmo
            run: latest
        finetune:
          config: {FINETUNE_SMOKE}
          args: ["--trainer.max_epochs=1", "--data.cache_dir={cache}"]
        mixes: [scalar]
        heads: [pool-mlp]
        seeds: 1
        random_control: true
        baselines: [majority]
        """)
    )
    return path


def pipeline(uri: str, mrpc_dir: Path, directory: Path, ui: str | None = None, random_like: str = "latest") -> dict:
    """pretrain smoke → finetune pretrained (``latest``) and random (the twin of ``random_like``),
    at once → the tiny benchmark (``run: latest``, cells ``runs:/<id>``). Returns each command's
    stdout and run ids."""
    env = cli_env(uri, mrpc_dir, ui)
    cache = directory / "features"
    outputs = {
        "pretrain": finish(
            start("pretrain", "fit", "--config", str(PRETRAIN_SMOKE), *PRETRAIN_FLAGS, env=env, cwd=directory)
        )
    }
    finetunes = {
        encoder: start(
            "downstream",
            "fit",
            "--config",
            str(FINETUNE_SMOKE),
            f"--model.encoder={encoder}",
            f"--model.random_like={random_like}",
            f"--data.cache_dir={cache}-{encoder}",
            "--trainer.enable_progress_bar=false",
            env=env,
            cwd=directory,
        )
        for encoder in ("latest", "random")
    }
    outputs.update({f"finetune-{encoder}": finish(process) for encoder, process in finetunes.items()})
    outputs["benchmark"] = finish(
        start(
            "benchmarks.suite",
            "--config",
            str(tiny_benchmark(directory, cache)),
            "--results-dir",
            str(directory / "results"),
            env=env,
            cwd=directory,
        )
    )
    outputs["ids"] = {name: run_id_of(text) for name, text in outputs.items() if name.startswith(("pre", "fine"))}
    return outputs


class Server:
    """An ``mlflow ui``/``mlflow server`` process group on a free port, stopped by :meth:`stop`."""

    def __init__(self, command: list[str], port: int, log: Path):
        self.url = f"http://127.0.0.1:{port}"
        self.log = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mlflow", *command, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
            start_new_session=True,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_healthy(self.url, self.process)

    def stop(self) -> None:
        stop_process_group(self.process, grace=5)
        self.log.close()
