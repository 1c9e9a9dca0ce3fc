"""``python -m downstream fit --config configs/downstream/mrpc.yaml --model.encoder=runs:/<id>``.
The command line and the data set it names are checked before the heavy imports."""

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import sys

from downstream.run.cli_flags import CLASSES, FLAGS, LEAVES
from harness.cli.data_check import data_hint, data_problem
from harness.cli.preflight import preflight
from harness.entry_point import run_main
from pretrain.encoders.reference_hints import encoder_hint

MODEL_HINT = "--model.encoder picks the encoder: runs:/<id>, latest[:<family>], hf:<folder>, random, …"


def main() -> int:
    preflight(
        sys.argv[1:],
        FLAGS,
        LEAVES,
        {"model.encoder": encoder_hint, "model.random_like": encoder_hint},
        CLASSES,
        {"model": MODEL_HINT, "data": data_hint()},
    )
    problem = data_problem(sys.argv[1:])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from downstream.run.cli import FinetuneCLI
    from harness.cli.tracked_cli import run_cli

    return run_cli(FinetuneCLI)


if __name__ == "__main__":
    run_main(main)
