"""``python -m downstream fit --config configs/downstream/mrpc.yaml --model.encoder=runs:/<id>``.
The command line is checked before the heavy imports."""

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

import sys

from downstream.cli_flags import FLAGS, LEAVES
from harness.cli.preflight import preflight
from pretrain.encoders.reference_hints import encoder_hint

if __name__ == "__main__":
    preflight(sys.argv[1:], FLAGS, LEAVES, {"model.encoder": encoder_hint, "model.random_like": encoder_hint})
    from downstream.cli import FinetuneCLI
    from harness.cli.tracked_cli import run_cli

    sys.exit(run_cli(FinetuneCLI))
