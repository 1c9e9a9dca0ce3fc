"""The preloaded Python the CLI tests run in (``tests/preloaded.py``) behaves like ``python -m``:
the same output, exit code, working folder, environment, arguments and ``sys.path[0]`` as a plain
interpreter for the same module, tracebacks and deaths by signal included; Ctrl-C reaches the CLI,
and a client killed by a test's timeout takes its fork with it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests import preloaded

pytestmark = pytest.mark.slow

PROBE = """import json, os, sys
print(json.dumps({"name": __name__, "argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
                  "probe": os.environ.get("PROBE"), "file": os.path.basename(__file__)}))
print("to stderr", file=sys.stderr)
action = sys.argv[1] if len(sys.argv) > 1 else ""
if action == "raise":
    raise ValueError("from the probe")
if action == "kill":
    os.kill(os.getpid(), 9)
if action == "wait":
    open("started", "w").write(str(os.getpid()))
    import time
    time.sleep(600)
sys.exit(int(action) if action.isdigit() else 0)
"""


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "probe_module.py").write_text(PROBE)
    return tmp_path


def both(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    env = {**os.environ, "PROBE": "value"}
    runs = []
    for command in ([sys.executable, "-m", "probe_module", *args], preloaded.command("probe_module", *args, env=env)):
        runs.append(subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120))
    return runs[0], runs[1]


@pytest.mark.parametrize("args", [(), ("3",), ("raise",), ("kill",), ("an argument", "--flag=x")])
def test_a_module_runs_as_under_python_dash_m(probe, args):
    assert preloaded.command("probe_module", env=dict(os.environ))[1] == preloaded.__file__
    plain, forked = both(probe, *args)
    assert (forked.returncode, forked.stdout) == (plain.returncode, plain.stdout)
    assert forked.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1]
    assert '"name": "__main__"' in forked.stdout and f'"path0": "{probe}"' in forked.stdout


def test_the_libraries_come_preloaded_and_the_project_fresh(tmp_path):
    (tmp_path / "loaded.py").write_text("import sys; print('torch' in sys.modules, 'harness' in sys.modules)")
    env = dict(os.environ)
    forked = subprocess.run(preloaded.command("loaded", env=env), cwd=tmp_path, env=env, capture_output=True, text=True)
    assert forked.stdout.split() == ["True", "False"], forked.stderr


def test_an_environment_read_at_import_gets_a_server_of_its_own(tmp_path):
    (tmp_path / "threads.py").write_text("import torch; print(torch.get_num_threads())")
    for threads in ("1", "2"):
        env = {**os.environ, "OMP_NUM_THREADS": threads}
        forked = subprocess.run(
            preloaded.command("threads", env=env), cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert forked.stdout.strip() == threads, forked.stderr
    refused = subprocess.run(
        preloaded.command("threads", env={**os.environ, "OMP_NUM_THREADS": "1"}),
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "2"},
    )
    assert refused.returncode == preloaded.REFUSED


def test_pythonpath_reaches_the_module(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "beside.py").write_text("WHERE = 'beside'")
    (tmp_path / "uses.py").write_text("import beside; print(beside.WHERE)")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "elsewhere")}
    forked = subprocess.run(preloaded.command("uses", env=env), cwd=tmp_path, env=env, capture_output=True, text=True)
    assert forked.stdout.strip() == "beside", forked.stderr


def started(folder: Path, process: subprocess.Popen) -> int:
    """The pid the probe wrote once it began waiting (not a guess at how long that takes)."""
    deadline = time.monotonic() + 120
    while not (folder / "started").exists() or not (folder / "started").read_text():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    return int((folder / "started").read_text())


def test_ctrl_c_reaches_the_module(probe):
    env = dict(os.environ)
    process = subprocess.Popen(
        preloaded.command("probe_module", "wait", env=env),
        cwd=probe,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started(probe, process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGINT and "KeyboardInterrupt" in stderr


def test_a_killed_client_takes_its_fork_with_it(probe):
    env = dict(os.environ)
    process = subprocess.Popen(
        preloaded.command("probe_module", "wait", env=env),
        cwd=probe,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    fork = psutil.Process(started(probe, process))
    process.kill()
    process.wait()
    fork.wait(timeout=60)  # raises psutil.TimeoutExpired if the fork outlived its client


def test_a_process_that_started_a_server_reaps_it_at_exit():
    """The server is killed and waited for when the test process exits: no ResourceWarning for a
    subprocess still running, no zombie."""
    started = "import os; from tests import preloaded; preloaded.socket_path(dict(os.environ))"
    repo = Path(preloaded.__file__).resolve().parents[1]
    process = subprocess.run(
        [sys.executable, "-X", "dev", "-c", started], cwd=repo, capture_output=True, text=True, timeout=300
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert "ResourceWarning" not in process.stderr, process.stderr[-3000:]
