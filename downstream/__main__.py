"""``python -m downstream fit --config configs/downstream/mrpc.yaml --model.encoder=runs:/<id>``."""

import sys

from downstream.cli import FinetuneCLI
from harness.tracked_cli import run_cli

if __name__ == "__main__":
    sys.exit(run_cli(FinetuneCLI))
