"""``python -m pretrain fit --config configs/pretrain/elmo.yaml``: pretrain a biLM, tracked in MLflow."""

import sys

from pretrain.cli import PretrainCLI
from harness.tracked_cli import run_cli

if __name__ == "__main__":
    sys.exit(run_cli(PretrainCLI))
