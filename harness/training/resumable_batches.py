"""Training batches that a checkpoint written in the middle of an epoch resumes exactly.

A long pretraining epoch (GPT on all shared corpora: hours on a CPU) is checkpointed every few
minutes, so that a stopped study loses minutes, not the epoch. Lightning resumes a mid-epoch
checkpoint faithfully only if the data can say where it was. Here a training batch sampler draws
its whole epoch's order when the epoch starts and remembers the torch RNG state it drew it from
(:class:`EpochPosition`, shared with the data module, which stores it in every checkpoint beside
the number of batches trained and the RNG state at the save). A resumed fit draws the same order
from the same state, skips the batches already trained and puts the RNG back as it was at the
save, so the fit goes on with the very draws (dropout, the next epoch's order) the uninterrupted
fit made.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import BatchSampler


@dataclass
class EpochPosition:
    """Where the current training epoch stands: the RNG state its order was drawn from, and, until
    the next epoch starts, the resume a checkpoint asked for (``order_rng``, ``skip``, ``rng``)."""

    order_rng: torch.Tensor | None = None
    resume: dict | None = None


class ResumableBatchSampler(BatchSampler):
    """A batch sampler whose epoch can be resumed at any batch (see the module's docstring).
    Subclasses give the epoch's batches in :meth:`epoch_batches`; this one's are the plain
    ``BatchSampler``'s."""

    def __init__(self, sampler, batch_size: int, drop_last: bool, position: EpochPosition | None = None):
        super().__init__(sampler, batch_size, drop_last)
        self.position = position if position is not None else EpochPosition()

    def epoch_batches(self) -> list[list[int]]:
        return list(super().__iter__())

    def __iter__(self):
        resume, self.position.resume = self.position.resume, None
        if resume is None:
            self.position.order_rng = torch.get_rng_state()
            yield from self.epoch_batches()
            return
        torch.set_rng_state(resume["order_rng"])
        self.position.order_rng = resume["order_rng"]
        batches = self.epoch_batches()
        torch.set_rng_state(resume["rng"])
        yield from batches[resume["skip"] :]


def mid_epoch_state(position: EpochPosition, trainer) -> dict:
    """What a checkpoint written now needs to resume the epoch at the next batch; empty at an
    epoch's end (the next epoch starts afresh) or before any epoch began."""
    loop = trainer.fit_loop.epoch_loop if trainer is not None else None
    if loop is None or position.order_rng is None or loop._num_ready_batches_reached():
        return {}
    return {
        "order_rng": position.order_rng.clone(),
        "skip": int(loop.batch_progress.current.processed),
        "rng": torch.get_rng_state(),
    }
