"""``python -m pretrain.team_server`` (``make server``): the team tracking server of
:mod:`harness.server.tracking_server`, told what to create as its admin at start: the pretraining experiment, the
default data set's (where finetune runs go), and ``<family>-encoder`` and ``<family>-task-encoder``
(and their smoke runs' ``…-smoke`` models) for every family of the registry that this harness
pretrains. A new family needs no edit here.
"""

from __future__ import annotations

import sys

from harness.datasets.registry import dataset_name
from harness.entry_point import run_main
from harness.server.tracking_server import Team, main
from pretrain.cli import PretrainCLI
from pretrain.encoders.references import LM_STAGES
from pretrain.encoders.registry import model_description, model_name
from pretrain.families import pretrained_families


def team() -> Team:
    """The experiments and encoder models of the stages, as the registry holds them now."""
    return Team(
        experiments=(PretrainCLI.experiment, dataset_name({})),
        models={
            model_name(family, stage, smoke): model_description(family, stage, smoke)
            for family in pretrained_families()
            for stage in LM_STAGES
            for smoke in (False, True)
        },
    )


if __name__ == "__main__":
    run_main(lambda: main(sys.argv[1:], team()))
