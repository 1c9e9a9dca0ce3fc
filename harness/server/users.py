"""Users of the team server (``make server-user NAME=… [ROLE=read|edit|manage] [EXPERIMENTS=…]``).

Run on the server's machine by whoever started it: it logs in as the admin (the password in
``.cache/server/admin.password``) through MLflow's auth API, creates the user with a generated
password, shown once and stored nowhere, and grants the role:

- ``read``: nothing to grant, every user reads every experiment and encoder (the server's
  default permission, READ); an earlier edit or manage grant is taken back;
- ``edit``: EDIT on the experiments (all of them, today's and future ones, unless
  ``EXPERIMENTS`` names some) and on every registered encoder: log runs, register encoders;
- ``manage``: MANAGE on the same: also delete runs and grant others.

An existing user keeps their password (``--reset-password`` makes a new one) and gets the role's
grants. Creating a new experiment of one's own needs no grant in MLflow: its creator manages it.
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
import os
import re
import sys
import warnings
from pathlib import Path

from mlflow.exceptions import MlflowException

from harness.entry_point import run_main
from harness.errors import UserError
from harness.server.auth import ADMIN, AuthFiles
from harness.server.postgres import SECRETS_DIR
from harness.server.secret_files import generate_password, read_secret
from harness.tracking.store import ensure_experiment, server_problem

ROLES = {"read": "READ", "edit": "EDIT", "manage": "MANAGE"}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{2,63}$")  # 3-64 characters, as --help and the docs say
EVERY = "*"  # a wildcard grant: every experiment (or registered model), future ones too


def as_admin(secrets: Path) -> None:
    """Make this process's MLflow clients log in as the admin (its own environment only)."""
    os.environ["MLFLOW_TRACKING_USERNAME"] = ADMIN
    os.environ["MLFLOW_TRACKING_PASSWORD"] = read_secret(AuthFiles(secrets).admin_password)


def experiment_ids(url: str, names: list[str]) -> list[str]:
    """The ids of the named experiments, created (as the admin, so the admin owns them) when missing."""
    return [ensure_experiment(name, url) for name in names]


def grant(auth, name: str, permission: str, experiments: list[str]) -> None:
    targets = [("experiment", experiment) for experiment in experiments] + [("registered_model", EVERY)]
    for resource_type, resource_id in targets:
        if permission == "READ":  # the default: take back what a stronger role granted
            try:
                auth.revoke_user_permission(name, resource_type, resource_id)
            except MlflowException:
                pass
        else:
            auth.grant_user_permission(name, resource_type, resource_id, permission)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="add a user to the team server, or change their role")
    parser.add_argument("name", help="user name (3-64 letters, digits, . _ @ -)")
    parser.add_argument("--role", choices=ROLES, default="read")
    parser.add_argument(
        "--experiments",
        default="",
        help="experiment names (comma or space separated) the role applies to; default: all",
    )
    parser.add_argument(
        "--url",
        default=f"http://127.0.0.1:{os.environ.get('PORT') or 5001}",
        help="the server, as this machine reaches it",
    )
    parser.add_argument("--secrets-dir", type=Path, default=SECRETS_DIR)
    parser.add_argument("--reset-password", action="store_true", help="give an existing user a new password")
    args = parser.parse_args(argv)
    try:
        if not NAME.match(args.name) or args.name == ADMIN:
            raise UserError(f"NAME={args.name}: use 3-64 letters, digits or . _ @ - (and not {ADMIN!r})")
        problem = server_problem(args.url)
        if problem:
            raise UserError(
                f"{args.url}: the server does not answer ({problem}); start it with `make server` "
                f"(or pass PORT=… / --url)"
            )
        as_admin(args.secrets_dir)
        with warnings.catch_warnings():  # the auth client imports MLflow's server app, which warns about Starlette
            warnings.simplefilter("ignore")
            from mlflow.server.auth.client import AuthServiceClient
        auth = AuthServiceClient(args.url)
        names = [name for name in re.split(r"[,\s]+", args.experiments) if name]
        experiments = experiment_ids(args.url, names) if names else [EVERY]
        password = None
        try:
            auth.get_user(args.name)
            exists = True
        except MlflowException:
            exists = False
        if not exists:
            password = generate_password()
            auth.create_user(args.name, password)
        elif args.reset_password:
            password = generate_password()
            auth.update_user_password(args.name, password)
        grant(auth, args.name, ROLES[args.role], experiments)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except MlflowException as error:
        first = str(error.message).strip().splitlines()[0]
        print(f"error: {args.url}: {first}", file=sys.stderr)
        return 2
    scope = "every experiment" if experiments == [EVERY] else "experiments " + ", ".join(names)
    what = {
        "read": "reads every experiment and encoder",
        "edit": f"EDIT on {scope} and every registered encoder",
        "manage": f"MANAGE on {scope} and every registered encoder",
    }[args.role]
    print(f"user {args.name} {'created' if not exists else 'updated'}: {args.role} ({what})")
    if password:
        print(
            "\n".join(
                [
                    "  give the user these lines, privately; the password is shown only now and stored nowhere:",
                    f"    export MLFLOW_TRACKING_URI=<this server, e.g. http://{os.uname().nodename}:"
                    f"{args.url.rsplit(':', 1)[-1]}>",
                    f"    export MLFLOW_TRACKING_USERNAME={args.name}",
                    f"    export MLFLOW_TRACKING_PASSWORD={password}",
                ]
            )
        )
    else:
        print("  password unchanged (--reset-password makes a new one)")
    return 0


if __name__ == "__main__":
    run_main(main)
