"""``python -m pretrain fit --config configs/pretrain/elmo.yaml``: pretrain a language model, tracked in
MLflow; ``python -m pretrain export --encoder runs:/<id> --out <folder>``: a gpt-family run as a
``transformers`` folder (``pretrain.encoders.export``). The command line and the pair data set it
names are checked before the heavy imports."""

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import sys

from harness.cli.data_check import data_hint, data_problem
from harness.cli.preflight import preflight
from harness.entry_point import run_main
from pretrain.cli_flags import CLASSES, FLAGS, LEAVES
from pretrain.encoders.reference_hints import encoder_hint


def main() -> int:
    if sys.argv[1:2] == ["export"]:
        from pretrain.encoders.export import main as export

        return export(sys.argv[2:])
    preflight(
        sys.argv[1:],
        FLAGS,
        LEAVES,
        {"model.init_from": encoder_hint, "model.init_args.init_from": encoder_hint},
        CLASSES,
        {"data": data_hint()},
    )
    problem = data_problem(sys.argv[1:])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from harness.cli.tracked_cli import run_cli
    from pretrain.cli import PretrainCLI

    return run_cli(PretrainCLI)


if __name__ == "__main__":
    run_main(main)
