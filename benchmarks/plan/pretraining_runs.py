"""``pretraining_runs:`` on an encoder entry: pretraining is a random variable, so the entry stands
for one encoder per run, ``<name>+run<r>``, each pretrained with its own seed; the cells of all runs
form the entry's one method (``benchmarks.plan.cells``), and a results file names the run in its
encoder record."""

from __future__ import annotations

import re

from benchmarks.plan.matrix_values import seeds_of
from harness.errors import UserError

RUN_OF, RUN_INDEX = "runs_of", "pretraining_run"  # keys of one pretraining run's encoder


def pretraining_runs_of(encoder: dict, where: str) -> list[dict]:
    """An encoder entry as the encoders it stands for: itself, or with ``pretraining_runs: N`` (runs
    0..N-1) or ``[r, ...]`` (those runs: a chunk of a study may hold some of them) one encoder per run
    ``<name>+run<r>``, each pretraining with ``--seed_everything=<r>`` added to every stage (its own
    stage hashes), whose cells form the one method ``<name>-…`` (``RUN_OF`` names it)."""
    if "pretraining_runs" not in encoder:
        return [encoder]
    key = f"encoders.{encoder['name']}.pretraining_runs"
    if "pretrain" not in encoder or "run" in encoder:
        raise UserError(f"{where}: `{key}` needs `pretrain` (and no `run`): each run is pretrained here")
    runs = seeds_of(encoder["pretraining_runs"], where, key)
    stages = encoder["pretrain"] if isinstance(encoder["pretrain"], list) else [encoder["pretrain"]]
    entry = {name: value for name, value in encoder.items() if name != "pretraining_runs"}
    return [
        {
            **entry,
            "name": run_name(encoder["name"], run),
            RUN_OF: encoder["name"],
            RUN_INDEX: run,
            "pretrain": [{**stage, "args": [*stage.get("args", []), f"--seed_everything={run}"]} for stage in stages],
        }
        for run in runs
    ]


def run_name(name: str, run: int) -> str:
    """The encoder of pretraining run ``run`` of the entry ``name``: ``<name>+run<r>``."""
    return f"{name}+run{run}"


def entry_name(encoder_name: str) -> str:
    """The entry an encoder belongs to: ``<name>`` for a run ``<name>+run<r>`` (:func:`run_name`),
    else the name itself."""
    return re.sub(r"\+run\d+$", "", encoder_name)


def is_run_of(encoder_name: str, name: str) -> bool:
    """Whether ``encoder_name`` is one pretraining run of the entry ``name`` (:func:`run_name`)."""
    return encoder_name != name and entry_name(encoder_name) == name


def method_encoder(encoder: dict) -> str:
    """The encoder name an encoder's methods carry: its own, or for one pretraining run of several
    the entry's (``<name>``, not ``<name>+run<r>``)."""
    return encoder.get(RUN_OF, encoder["name"])
