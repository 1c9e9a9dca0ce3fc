"""Where the study's tasks run: Ray — a local instance sized by ``--jobs`` (started on first use,
stopped at the end, no dashboard), or the cluster ``RAY_ADDRESS`` names — or, with ``--jobs 1``,
this process, one task at a time (for debugging). Both give the executor the same four verbs:
submit, wait, result, cancel.

A cluster is checked before any work starts, each problem one line naming the fix: with more than
one node the tracking store must be a server (a SQLite or file store lives on one machine), and
every node must reach it, run the same code and read the configs and data at the same paths."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.tracking.mlflow_defaults import DEFAULTS
from harness.tracking.runs import tracking_uri
from harness.tracking.store import SERVER_SCHEMES, scheme_of, server_problem
from harness.versioning import source_version

RETRIES = 2  # attempts after the first when a task's worker or node dies
CANCEL_GRACE = 30.0  # seconds cancelled tasks get to mark their runs KILLED before they are killed
OBJECT_STORE_BYTES = 256 * 1024**2  # the tasks pass run ids and one PairData, nothing large
WORKER_VARIABLES = (
    "MRPC_DIR",
    "OMP_WAIT_POLICY",
    "HF_HUB_OFFLINE",
    *DEFAULTS,
)  # DEFAULTS: the driver's MLflow settings
CLUSTER_HELP = "docs/cluster.md"
# Ray's servers listen on every interface (Ray 2.x has no loopback-only setting), so a local
# instance requires a token: a fresh one per instance, in this process's environment only (its
# Ray processes inherit it), never in the runtime environment or a file.
AUTH_VARIABLES = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": ""}


def worker_environment() -> dict[str, str]:
    """What a worker on any node needs from the driver's environment (never credentials: set
    ``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` in each node's own environment)."""
    variables = {"MLFLOW_TRACKING_URI": tracking_uri()}
    variables.update({name: os.environ[name] for name in WORKER_VARIABLES if os.environ.get(name)})
    return variables


def node_problems(paths: list[str], expected_code: str, uri: str) -> list[str]:
    """Run on one node: what keeps it from running the study's tasks."""
    problems = [f"cannot read {path}" for path in paths if not os.access(path, os.R_OK)]
    if source_version() != expected_code:
        problems.append(f"runs other code (version {source_version()}, the driver's is {expected_code})")
    if scheme_of(uri) in SERVER_SCHEMES:
        problem = server_problem(uri)
        if problem:
            problems.append(f"cannot reach the tracking server {uri} ({problem})")
    return problems


@dataclass(eq=False)  # a handle: hashed by identity
class Done:
    """A task run in this process: its value, or the exception it raised."""

    value: Any = None
    error: BaseException | None = None


class InlineEngine:
    """``--jobs 1``: each task runs in this process when it is submitted."""

    def describe(self) -> str:
        return "this process, one task at a time (--jobs 1)"

    def capacity(self) -> int:
        return 1

    def largest_node(self) -> int:
        return os.cpu_count() or 1

    def nodes(self) -> int:
        return 1

    def submit(self, function: Callable, args: tuple, resources: dict) -> Done:
        try:
            return Done(function(*args))
        except Exception as error:  # noqa: BLE001 - raised again by result(), as Ray would
            return Done(error=error)

    def wait(self, handles: list, timeout: float) -> list:
        return list(handles)

    def result(self, handle: Done):
        if handle.error is not None:
            raise handle.error
        return handle.value

    def cancel(self, handles: list) -> None:
        pass

    def close(self) -> None:
        pass


class RayEngine:
    """Tasks of Ray. The local instance starts on the first :meth:`submit`; a cluster is joined and
    checked by :meth:`start` (the suite calls it before opening any run)."""

    def __init__(self, jobs: int, retries: int = RETRIES):
        self.address = os.environ.get("RAY_ADDRESS", "").strip() or None
        self.jobs, self.retries = jobs, retries
        self.started = False
        self.remote_functions: dict[Callable, Any] = {}
        self.saved_environment: dict[str, str | None] = {}

    def start(self, paths: list[str] = ()) -> None:
        if self.started:
            return
        import ray

        options = {
            "runtime_env": {"env_vars": worker_environment()},
            "log_to_driver": False,
            "logging_level": logging.WARNING,
        }
        on_sigterm = signal.getsignal(signal.SIGTERM)  # ray.init replaces it with sys.exit: keep the suite's
        if self.address:
            try:
                ray.init(address=self.address, **options)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise UserError(
                    f"RAY_ADDRESS={self.address}: cannot join that Ray cluster "
                    f"({str(error).splitlines()[0][:200]}); start it with `ray start --head`, "
                    f"or unset RAY_ADDRESS for a local instance"
                ) from None
        else:
            # Ray raises its workers' niceness by 15 so that its own processes stay responsive; here
            # the workers are the study, so they keep the suite's own (`nice make benchmark` still
            # lowers them all)
            self.require_token()
            ray.init(
                address="local",
                num_cpus=self.jobs,
                include_dashboard=False,
                object_store_memory=OBJECT_STORE_BYTES,
                _system_config={"worker_niceness": 0},
                **options,
            )
            print(
                f"  started a local Ray instance (gcs {ray.get_runtime_context().gcs_address}, "
                f"{self.jobs} CPUs; it admits only this study's processes: a fresh token, not a file)",
                flush=True,
            )
        signal.signal(signal.SIGTERM, on_sigterm)
        self.started = True
        try:
            self.check_cluster(list(paths))
        except BaseException:
            self.close()
            raise

    def check_cluster(self, paths: list[str]) -> None:
        """Refuse, in one line, a cluster the study cannot run on (see the module's docstring)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [node for node in ray.nodes() if node["Alive"]]
        if len(nodes) < 2:
            return
        uri = tracking_uri()
        if scheme_of(uri) not in SERVER_SCHEMES:
            raise UserError(
                f"MLFLOW_TRACKING_URI={uri}: the Ray cluster at {self.address} has {len(nodes)} nodes, "
                f"and this store lives on one machine; start a tracking server every node can reach "
                f"(`make server HOST=0.0.0.0`) and set MLFLOW_TRACKING_URI=http://<its host>:5001 "
                f"({CLUSTER_HELP})"
            )
        probe = ray.remote(node_problems)
        reports = {
            node["NodeManagerAddress"]: probe.options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(paths, source_version(), uri)
            for node in nodes
        }
        for address, report in reports.items():
            problems = ray.get(report)
            if problems:
                raise UserError(
                    f"Ray node {address} {problems[0]}: every node needs the same checkout, the data "
                    f"and corpora at the same paths, and the tracking server ({CLUSTER_HELP})"
                )

    def describe(self) -> str:
        if not self.started:
            return "Ray (not started: every task was already done)"
        import ray

        cpus = int(ray.cluster_resources().get("CPU", 0))
        gpus = int(ray.cluster_resources().get("GPU", 0))
        kind = f"Ray cluster {self.address}" if self.address else "a local Ray instance"
        address = ray.get_runtime_context().gcs_address
        return f"{kind} (gcs {address}, {self.nodes()} node(s), {cpus} CPUs" + (f", {gpus} GPUs" if gpus else "") + ")"

    def nodes(self) -> int:
        import ray

        return len([node for node in ray.nodes() if node["Alive"]]) if self.started else 1

    def capacity(self) -> int:
        """CPUs the study may use now: the alive nodes' (nodes come and go), at most ``--jobs``
        on a local instance."""
        import ray

        self.start()
        cpus = int(ray.cluster_resources().get("CPU", 0))
        return max(1, min(cpus, self.jobs) if not self.address else cpus)

    def largest_node(self) -> int:
        """CPUs of the largest alive node (a task asking for more could never be placed)."""
        if not self.address:
            return self.jobs
        import ray

        self.start()
        return max([int(node["Resources"].get("CPU", 0)) for node in ray.nodes() if node["Alive"]] or [1])

    def submit(self, function: Callable, args: tuple, resources: dict):
        import ray

        self.start()
        if function not in self.remote_functions:
            self.remote_functions[function] = ray.remote(function)
        return (
            self.remote_functions[function]
            .options(**resources, max_retries=self.retries, retry_exceptions=False)
            .remote(*args)
        )

    def wait(self, handles: list, timeout: float) -> list:
        import ray

        ready, _ = ray.wait(handles, num_returns=1, timeout=timeout)
        return ready

    def result(self, handle):
        """The task's value; its own exception when it raised one (a UserError stays one)."""
        import ray
        from ray.exceptions import RayTaskError

        try:
            return ray.get(handle)
        except RayTaskError as error:
            cause = error.cause
            if isinstance(cause, UserError):
                raise UserError(str(cause)) from None
            raise

    def cancel(self, handles: list) -> None:
        """Interrupt the tasks (their runs are marked KILLED by the CLI), then kill what is left."""
        import ray

        if not self.started or not handles:
            return
        # only tasks still running: cancelling one that is completing can crash the driver
        # (Ray's "Tried to complete task that was not pending", ray-project/ray#54846)
        _, handles = ray.wait(list(handles), num_returns=len(handles), timeout=0)
        for handle in handles:
            ray.cancel(handle, force=False)
        deadline = time.monotonic() + CANCEL_GRACE
        pending = list(handles)
        while pending and time.monotonic() < deadline:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
        for handle in pending:
            ray.cancel(handle, force=True)

    def close(self) -> None:
        """Stop the local instance (or leave the cluster)."""
        import ray

        if self.started:
            ray.shutdown()
        self.started = False
        self.remote_functions.clear()
        if self.saved_environment:
            for name, value in self.saved_environment.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self.saved_environment = {}
            reload_authentication()

    def require_token(self) -> None:
        """Token authentication for the local instance (any other process on the network could
        otherwise join it and run code as this user)."""
        self.saved_environment = {name: os.environ.get(name) for name in AUTH_VARIABLES}
        os.environ.update({**AUTH_VARIABLES, "RAY_AUTH_TOKEN": secrets.token_hex(32)})
        reload_authentication()


def reload_authentication() -> None:
    """Make this process's Ray read the authentication variables again (it caches them at its first
    use; Ray's own tests reset them the same way)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def paths_to_check(*groups) -> list[str]:
    """Existing absolute file paths among flag values and config paths (what every node must read)."""
    found = []
    for group in groups:
        for argument in group:
            value = argument.partition("=")[2] if argument.startswith("--") else argument
            for candidate in value.strip("[]").split(","):
                path = Path(candidate.strip().strip("'\""))
                if candidate.strip() and path.is_absolute() and path.exists():
                    found.append(str(path))
    return list(dict.fromkeys(found))
