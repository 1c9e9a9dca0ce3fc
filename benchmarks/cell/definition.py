"""A cell of a benchmark: one finetune, baseline or probe run of the matrix, as plain settings, and
what defines its result (``Cell.spec``, whose hash finds a finished cell again), never where files
lie on this machine."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.datasets.spec import PATH_KEYS


@dataclass
class Cell:
    """One finetune or baseline run of the matrix."""

    method: str
    kind: str  # pretrained | random | baseline | probe
    seed: int
    encoder: str = ""  # encoder name in the suite config
    encoder_run: str = ""  # run id of the pretrained encoder (or the one random copies); a published
    # encoder's source instead (hf:<folder>, reference:<name>)
    mix: str = ""
    head: str = ""
    train_fraction: float = 1.0
    control: str = ""  # method name of this cell's random control
    args: list[str] = field(default_factory=list)
    config: str = ""  # the finetune config of this cell ("": the suite's)
    transfer: str = ""  # the transfer setting's name (transfers matrices), e.g. frozen, gradual
    family: str = ""  # the encoder's family
    encoder_identity: str = ""  # what decides the encoder's outputs (benchmarks.plan.encoders.encoder_identity)
    probe_of: str = ""  # a linear probe's encoder: pretrained | random (the twin at this seed)
    grid_of: str = ""  # a learning-rate grid point's arm (the method it is chosen for); its rate is in args
    learning_rate: float | None = None  # that grid point's rate, or the rate picked for its arm (recipe_from)
    recipe_from: str = ""  # the selection's results folder whose pick set its head and rate ("": none)
    record: dict = field(default_factory=dict, compare=False)  # the suite's context for results files:
    # ``order`` (its place in the plan) and ``encoder`` (the encoder as described); no part of the result

    def fields(self) -> dict:
        """The cell's settings as plain values (``record`` aside)."""
        return {key: value for key, value in asdict(self).items() if key != "record"}

    def spec(self) -> dict:
        """What defines the result: settings and the encoder's identity, never where files lie or
        which run holds the encoder (the method name does not either; the suite adds the config's
        text and the data's digest)."""
        return {
            "kind": self.kind,
            "seed": self.seed,
            "encoder": self.encoder_identity,
            "mix": self.mix,
            "head": self.head,
            "train_fraction": self.train_fraction,
            "args": portable_args(self.args),
            "config": self.config,
            **({"probe_of": self.probe_of} if self.probe_of else {}),
        }


# Flags that say where files lie on this machine, not what is computed: the pair data's content is
# in its digest (and named corpora's in the stage's), caches are keyed by content.
DATA_LOCATION_FLAGS = (
    *(f"--data.{key}=" for key in (*PATH_KEYS, "corpora_dir", "cache_dir")),
    "--trainer.default_root_dir=",
)


def portable_args(args: list[str]) -> list[str]:
    """``args`` without the flags that only locate data on this machine."""
    return [argument for argument in args if not argument.startswith(DATA_LOCATION_FLAGS)]


def file_digests(args: list[str]) -> dict[str, str]:
    """sha256 of every existing file an argument names (``--data.corpus=<file>``, lists of files):
    a corpus edited in place is other pretraining text."""
    digests = {}
    for argument in args:
        value = argument.partition("=")[2] if argument.startswith("--") else argument
        for candidate in value.strip("[]").split(","):
            path = Path(candidate.strip().strip("'\""))
            if candidate.strip() and path.is_file():
                digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests
