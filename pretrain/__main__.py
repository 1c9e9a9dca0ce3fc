"""``python -m pretrain fit --config configs/pretrain/elmo.yaml``: pretrain a language model, tracked in
MLflow; ``python -m pretrain export --encoder runs:/<id> --out <folder>``: a gpt-family run as a
``transformers`` folder (``pretrain.export``)."""

import sys

from harness.tracked_cli import run_cli

if __name__ == "__main__":
    if sys.argv[1:2] == ["export"]:
        from pretrain.export import main

        sys.exit(main(sys.argv[2:]))
    from pretrain.cli import PretrainCLI

    sys.exit(run_cli(PretrainCLI))
