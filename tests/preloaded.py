"""A preloaded Python for the tests that run the real CLIs: ``python -m <module> <args>`` as a fork
of a server that has already imported torch, Lightning, MLflow, scipy, scikit-learn, pandas and
transformers, so a CLI under test starts in a fraction of a second instead of spending seconds of
CPU on imports, which dominated the slow tests on 2 cores.

The command a test runs is ``python tests/preloaded.py <module> <args>``: a stdlib-only client
that hands its standard streams, working directory, environment and arguments to the server over a
Unix socket, relays SIGINT/SIGTERM/SIGHUP to the forked CLI and exits as it did (its code, or the
signal that ended it). The fork runs the module the way ``python -m`` does (``__main__``,
``sys.path[0]`` the working directory, a fresh ``random`` seed); the project's own modules are
imported afresh in it, only third-party libraries come preloaded. If the client dies (a test's
timeout kills it) the fork's process group is killed with it.

The libraries read some variables when imported (threads, Python, Hugging Face, CUDA, MLflow
telemetry): a server serves only environments that agree with its own on those (others get exit
75), and :func:`command` starts one server per such view. ``TESTS_FRESH_PROCESSES=1`` runs plain
``python -m`` instead (what to try when a test's failure might be the preloading's).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import tempfile

PRELOAD = (
    "torch",
    "pytorch_lightning",
    "torchmetrics",
    "mlflow",
    "mlflow.tracking",
    "scipy.stats",
    "sklearn.linear_model",
    "sklearn.metrics",
    "pandas",
    "matplotlib",
    "transformers",
    "jsonargparse",
    "tokenizers",
)
IMPORT_TIME_PREFIXES = (
    "OMP_",
    "MKL_",
    "PYTHON",
    "HF_",
    "TRANSFORMERS",
    "TOKENIZERS",
    "TORCH",
    "CUDA",
    "LD_",
    "MPLBACKEND",
    "MLFLOW_DISABLE_TELEMETRY",
)
REFUSED = 75  # EX_TEMPFAIL: the request's environment differs where the preloaded imports read it
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def import_time_view(env: dict) -> dict:
    """The variables that libraries read when imported, as a preloaded import would have seen them."""
    view = {key: value for key, value in env.items() if key.startswith(IMPORT_TIME_PREFIXES)}
    view.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # what harness.tracking.mlflow_defaults sets
    return view


# ---------------------------------------------------------------------------------------- client
def client(socket_path: str, module: str, args: list[str]) -> int:
    """Run ``module`` in a fork of the server at ``socket_path``; the fork's exit code, or 75."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    request = {"module": module, "args": args, "cwd": os.getcwd(), "env": dict(os.environ)}
    socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
    replies = connection.makefile("r")
    first = replies.readline().split()
    if first[:1] != ["pid"]:
        return REFUSED if first[:1] == ["refused"] else 1
    pid = int(first[1])
    for signum in RELAYED:
        signal.signal(signum, lambda received, _frame: os.kill(pid, received))
    status = replies.readline().split()
    if status[:1] == ["signal"]:
        signum = int(status[1])
        if signum != signal.SIGKILL:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return int(status[1]) if status[:1] == ["exit"] else 1


# ---------------------------------------------------------------------------------------- server
def serve(socket_path: str) -> None:
    """Import the heavy libraries, then fork a supervisor for every connection until the parent dies."""
    import importlib

    sys.path[0] = ""  # not this script's folder, tests/, whose sub-packages shadow the project's
    before = dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    added = {key: value for key, value in os.environ.items() if key not in before}  # set by the imports
    expected = import_time_view(before)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".tmp")
    os.rename(socket_path + ".tmp", socket_path)  # the path appears once the server accepts
    listener.listen(16)
    listener.settimeout(2.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the kernel
    parent = os.getppid()
    while os.getppid() == parent:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        connection.setblocking(True)
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            supervise(connection, expected, added)  # never returns
        connection.close()


def supervise(connection: socket.socket, expected: dict, added: dict) -> None:
    """Fork the CLI for one request, tell the client its pid and then how it ended; kill its
    process group if the client goes away first."""
    message, fds, _, _ = socket.recv_fds(connection, 1 << 22, 3)
    buffer = message
    while not buffer.endswith(b"\n"):
        chunk = connection.recv(1 << 22)
        if not chunk:
            os._exit(0)
        buffer += chunk
    request = json.loads(buffer)
    if import_time_view(request["env"]) != expected:
        connection.sendall(b"refused\n")
        os._exit(0)
    pid = os.fork()
    if pid == 0:
        connection.close()
        run_request(request, fds, added)  # never returns
    for fd in fds:
        os.close(fd)
    connection.sendall(f"pid {pid}\n".encode())
    watched = os.pidfd_open(pid)
    ready, _, _ = select.select([watched, connection], [], [])
    if watched not in ready:  # the client went away (a test's timeout killed it)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    reply = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
    try:
        connection.sendall(reply.encode() + b"\n")
    finally:
        os._exit(0)


def run_request(request: dict, fds: list[int], added: dict) -> None:
    """In the fork: become ``python -m <module> <args>`` in the request's folder and environment
    (plus what the preloaded imports set in theirs, as they would have in a fresh process)."""
    import random
    import runpy

    os.setpgid(0, 0)
    for signum in RELAYED:
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    for target, fd in enumerate(fds):  # sys.stdin/stdout/stderr already read and write fds 0-2
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({**added, **request["env"]})
    sys.path[0] = os.getcwd()
    random.seed()
    import numpy

    numpy.random.seed()
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    sys.exit(0)  # the interpreter's own exit: atexit handlers, flushed streams, joined threads


# ------------------------------------------------------------------------------ test-side helper
_servers: dict = {}  # import-time view (sorted items) → (socket path, server process)


def stop(process) -> None:
    """Kill a server and reap it, so that no process outlives the tests unwaited for."""
    process.kill()
    process.wait()


def socket_path(env: dict) -> str:
    """The socket of this test process's server for ``env``'s import-time view, started on first use."""
    view = tuple(sorted(import_time_view(env).items()))
    if view not in _servers:
        import atexit
        import subprocess
        import time

        folder = tempfile.mkdtemp(prefix="preloaded-")
        path = os.path.join(folder, "socket")
        process = subprocess.Popen(
            [sys.executable, __file__, "--serve", path], cwd=folder, env=env, stdin=subprocess.DEVNULL
        )
        _servers[view] = path, process
        atexit.register(stop, process)
        deadline = time.monotonic() + 300
        while not os.path.exists(path):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the preloaded Python did not start (exit {process.poll()})")
            time.sleep(0.1)
    return _servers[view][0]


def command(module: str, *args: str, env: dict | None = None) -> list[str]:
    """The command that runs ``python -m module args`` in the environment ``env`` (default: this
    process's) through a preloaded server for that environment; a plain interpreter when
    ``TESTS_FRESH_PROCESSES=1``."""
    if os.environ.get("TESTS_FRESH_PROCESSES") == "1":
        return [sys.executable, "-m", module, *args]
    return [sys.executable, __file__, socket_path(dict(os.environ) if env is None else env), module, *args]


def as_preloaded(argv: list[str], env: dict | None = None) -> list[str]:
    """A ``[python, -m, module, *args]`` command as :func:`command` runs it."""
    assert argv[:2] == [sys.executable, "-m"], argv
    return command(argv[2], *argv[3:], env=env)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        sys.exit(client(sys.argv[1], sys.argv[2], sys.argv[3:]))
