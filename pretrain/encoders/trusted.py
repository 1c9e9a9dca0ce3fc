"""Which encoders a reference may pick without naming them: on a team server (any user may create
an experiment and log a FINISHED ``stage=pretrain`` run with its own checkpoint and digest there),
``latest`` and ``models:/…`` resolve only to runs of the trusted experiments — ``pretrain``, which
the server's admin creates and users log to as granted, and those named in ``$ENCODER_EXPERIMENTS``
(comma-separated). A run elsewhere is used only when named as ``runs:/<id>``, and a note says
whose it is. A local store (SQLite, files) is its user's own: every experiment is trusted there
unless ``$ENCODER_EXPERIMENTS`` names some."""

from __future__ import annotations

import os
import sys

from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.tracking.runs import tracking_uri
from harness.tracking.store import SERVER_SCHEMES, scheme_of

VARIABLE = "ENCODER_EXPERIMENTS"
DEFAULT = ("pretrain",)


def encoder_experiments() -> tuple[str, ...]:
    """``pretrain`` and the experiments ``$ENCODER_EXPERIMENTS`` names."""
    named = tuple(name.strip() for name in os.environ.get(VARIABLE, "").split(",") if name.strip())
    return tuple(dict.fromkeys(DEFAULT + named))


def trusted_names() -> tuple[str, ...] | None:
    """The trusted experiments' names; None: every experiment (a local store without the variable)."""
    if not os.environ.get(VARIABLE, "").strip(" ,") and scheme_of(tracking_uri()) not in SERVER_SCHEMES:
        return None
    return encoder_experiments()


def trusted_experiment_ids(client: MlflowClient) -> list[str] | None:
    """The ids of the trusted experiments that exist (None: every experiment)."""
    names = trusted_names()
    if names is None:
        return None
    found = [client.get_experiment_by_name(name) for name in names]
    return [
        experiment.experiment_id
        for experiment in found
        if experiment is not None and experiment.lifecycle_stage == "active"
    ]


def describe_owner(client: MlflowClient, run) -> str:
    """``experiment 'x', run by <user>`` for notes and errors."""
    experiment = client.get_experiment(run.info.experiment_id)
    return f"experiment '{experiment.name}', run by {run.data.tags.get('mlflow.user') or run.info.user_id or '?'}"


def check_trusted(client: MlflowClient, run_id: str, source: str) -> None:
    """Refuse a run that ``source`` (``models:/…``) resolved to outside the trusted experiments."""
    trusted = trusted_experiment_ids(client)
    run = client.get_run(run_id)
    if trusted is not None and run.info.experiment_id not in trusted:
        raise UserError(
            f"{source}: names run {run_id} ({describe_owner(client, run)}), outside the experiments "
            f"trusted for encoders ({', '.join(trusted_names())}); use it only as "
            f"--model.encoder=runs:/{run_id}, or add its experiment to {VARIABLE}"
        )


def note_untrusted(client: MlflowClient, run, source: str) -> None:
    """One line on stderr when an explicitly named run lies outside the trusted experiments."""
    trusted = trusted_experiment_ids(client)
    if trusted is not None and run.info.experiment_id not in trusted:
        print(
            f"note: {source} is run {run.info.run_id} of {describe_owner(client, run)}, outside the experiments "
            f"trusted for encoders ({', '.join(trusted_names())}): used because it was named",
            file=sys.stderr,
        )
