"""``make ui [HOST=…] [PORT=…]`` (``python -m harness.tracking.ui --host … --port …``): the MLflow UI on the
local run store, after a link per experiment at the address it serves on. The address is recorded
(:mod:`harness.tracking.ui_address`), so the links later commands print open this UI. A tracking server
(``MLFLOW_TRACKING_URI=http(s)://…``) is its own UI: its links are printed and nothing is started.
"""

from __future__ import annotations

import argparse
import os
import sys

from mlflow.exceptions import MlflowException

from harness.entry_point import run_main
from harness.errors import UserError
from harness.tracking.links import store_links, ui_base
from harness.tracking.runs import tracking_uri
from harness.tracking.store import SERVER_SCHEMES, auth_denial, check_uri, scheme_of
from harness.tracking.ui_address import DEFAULT_HOST, DEFAULT_PORT, link_address, record_address


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default=DEFAULT_HOST, help="the interface to listen on (0.0.0.0: every one)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    return parser.parse_args(argv)


def ui_command(uri: str, host: str, port: int) -> list[str]:
    """``mlflow ui`` on the store of ``uri`` at ``host``:``port``, run by this interpreter."""
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", host, "--port", str(port)]


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    uri = tracking_uri()
    server = scheme_of(uri) in SERVER_SCHEMES
    base = ui_base(uri) if server else link_address(args.host, args.port)
    try:
        check_uri(uri)
        lines = store_links(base=base)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except MlflowException as error:
        denied = auth_denial(error)
        if not denied:
            raise
        print(f"error: {denied}", file=sys.stderr)
        return 2
    print(f"MLflow UI at {base}:")
    print("\n".join(lines) if lines else "  (no experiments yet: run `make pretrain` or `make finetune`)")
    if server:
        print("  (the tracking server serves its own UI: nothing to start)")
        return 0
    record_address(uri, base)
    sys.stdout.flush()
    env = {
        **os.environ,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": os.environ.get("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false"),
    }
    command = ui_command(uri, args.host, args.port)
    os.execve(command[0], command, env)  # the UI takes over this process: Ctrl-C stops it
    return 0  # not reached


if __name__ == "__main__":
    run_main(main)
