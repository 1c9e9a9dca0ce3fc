"""Which finished run a suite may reuse for a cell (found again by its settings hash): never one
of two copies that disagree on a result number, which no start time may settle; on a team server,
only from an experiment the server says is the team's or the user's own.

On a team server any user, a READ one too, may create an experiment (MLflow makes its creator its
manager) and log FINISHED runs there with any tags, ``cell_hash`` and ``mlflow.user`` included. So
the tags never decide: an experiment is trusted when it is one the server's admin creates at start
(``pretrain`` and the default data set's, where only users granted EDIT write), one named in
``$ENCODER_EXPERIMENTS``, or one the server lists the user as managing by a grant of its own (its
creator); anywhere else a suite neither reuses nor logs, and says so in one line."""

from __future__ import annotations

from functools import cache

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from benchmarks.plan.encoders import PRETRAIN_EXPERIMENT, Stage, stage_hashes
from harness.datasets.registry import DATASETS, dataset_name
from harness.errors import UserError
from harness.tracking.runs import ensure_experiment, tracking_uri
from harness.tracking.store import SERVER_SCHEMES, scheme_of, server_request, user_name
from pretrain.encoders.trusted import VARIABLE, encoder_experiments

COPIES_LIMIT = 100
PERMISSIONS_ENDPOINT = "/api/3.0/mlflow/users/current/permissions"  # the user's own grants (any user may ask)


def result_metrics() -> tuple[str, ...]:
    """The run metrics of every registered data set's task (``dev_acc`` … ``test_spearman``): copies
    of one cell (one data digest, so one task) hold those of their own task."""
    names = (name for entry in DATASETS.values() for name in entry.task.run_metrics())
    return tuple(dict.fromkeys(names))


def result_numbers(metrics: dict) -> dict:
    """The metrics two copies of a cell must share (its task's on dev and test)."""
    return {key: float(metrics[key]) for key in result_metrics() if key in metrics}


def headline(metrics: dict) -> str:
    """A copy's first test metric, for a line that names copies: ``test_acc 0.8123``."""
    numbers = result_numbers(metrics)
    name = next((key for key in numbers if key.startswith("test_")), "test_acc")
    return f"{name} {numbers.get(name, float('nan')):.4f}"


def conflicting(runs: list) -> bool:
    """Whether ``runs`` (copies of one cell) disagree on any result number."""
    return len({tuple(sorted(result_numbers(run.data.metrics).items())) for run in runs}) > 1


def finished_run(experiment: str, cell_hash: str, parent_run_id: str | None = None) -> str | None:
    """The newest FINISHED run of ``experiment`` tagged with ``cell_hash``: among the children of
    ``parent_run_id`` first (a resumed benchmark), else anywhere in the experiment (a cell another
    benchmark already ran with the same settings, data and code: the caller links it). Copies with
    other numbers are one line, never a choice."""
    client = MlflowClient(tracking_uri())
    experiment_id = ensure_experiment(experiment)
    problem = untrusted(tracking_uri(), user_name() or "", experiment, experiment_id)
    if problem:
        raise UserError(problem)
    query = f"tags.cell_hash = '{cell_hash}' and attributes.status = 'FINISHED'"
    scopes = [f" and tags.mlflow.parentRunId = '{parent_run_id}'", ""] if parent_run_id else [""]
    for scope in scopes:
        runs = client.search_runs(
            [experiment_id], query + scope, order_by=["attributes.start_time DESC"], max_results=COPIES_LIMIT
        )
        if runs and conflicting(runs):
            numbers = ", ".join(f"{run.info.run_id} ({headline(run.data.metrics)})" for run in runs)
            raise UserError(
                f"cell {cell_hash}: experiment '{experiment}' holds copies with other numbers: {numbers}; "
                f"not reused, none is chosen: `python -m benchmarks duplicates` names them, delete the "
                f"wrong one"
            )
        if runs:
            return runs[0].info.run_id
    return None


def team_experiments() -> tuple[str, ...]:
    """The experiments the team server's admin creates at start, and those ``$ENCODER_EXPERIMENTS`` names."""
    return tuple(dict.fromkeys((*encoder_experiments(), dataset_name({}))))


@cache
def untrusted(uri: str, user: str, experiment: str, experiment_id: str) -> str | None:
    """None when the runs of ``experiment`` may be reused (any store without users, a team
    experiment, one the server lists ``user`` as managing), else one line."""
    if scheme_of(uri) not in SERVER_SCHEMES or not user or experiment in team_experiments():
        return None
    try:
        answer = server_request(uri, PERMISSIONS_ENDPOINT)
    except MlflowException:
        return None  # the server went away: the search that follows says so
    if answer.status_code == 404:
        return None  # a server without users (--no-auth on 127.0.0.1): one user's store
    grants = answer.json() if answer.status_code == 200 else {}
    if any(
        grant.get("resource_type") == "experiment"
        and grant.get("resource_pattern") == experiment_id
        and grant.get("permission") == "MANAGE"
        for grant in grants.get("permissions", [])
    ):
        return None  # a grant on this experiment itself (its creator's), not a wildcard over all of them
    return (
        f"experiment '{experiment}' of {uri} is not the team's ({', '.join(team_experiments())}) and the server "
        f"does not list {user} as its manager (another user created it): its runs are never reused and a suite "
        f"does not log there; choose an experiment of your own (`experiment:` in the config), or name it in "
        f"{VARIABLE} if you trust whoever manages it"
    )


def reused_stages(stages: list[Stage], data_digest: str) -> tuple[int, str | None]:
    """How many leading stages already finished, and the run id of the last of them."""
    run_id = None
    for done, cell_hash in enumerate(stage_hashes(stages, data_digest)):
        found = finished_run(PRETRAIN_EXPERIMENT, cell_hash)
        if found is None:
            return done, run_id
        run_id = found
    return len(stages), run_id
