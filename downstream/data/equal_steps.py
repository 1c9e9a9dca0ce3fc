"""Equal optimisation across label fractions (``--data.equal_steps``): a training epoch on a
``train_fraction`` subset draws about as many pairs as an epoch on the whole training split, by
repeating the subset, so a 10% run takes the optimiser steps of a 100% run instead of a tenth of
them. Epochs, gradual unfreezing and the slanted triangular schedule's length are unchanged.

Dev is validated on the schedule every run shares (``downstream.data.validation_schedule``): the same
number of times an epoch, so at the same optimiser steps as a 100% run, whatever the fraction.

The epoch's pairs are the subset repeated ``ceil(full / subset)`` times (at most ``max_repeats``),
each repeat a seeded permutation, trimmed to the full split's size; the data loader shuffles the
whole epoch again every epoch. The seed is the subset's own, so a pretrained cell and its
random-init twin (same seed) see the same pairs in the same repeats.
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_MAX_REPEATS = 10  # a 10% subset reaches the full set's steps; a 5% one half of them


def epoch_size(full: int, subset: int, max_repeats: int = DEFAULT_MAX_REPEATS) -> int:
    """Pairs per training epoch: the full split's ``full``, but no more than ``max_repeats``
    passes over the ``subset`` (and never fewer than one pass)."""
    if max_repeats < 1:
        raise ValueError(f"max_repeats={max_repeats}: must be at least 1")
    if subset < 1:
        raise ValueError("epoch_size: the subset is empty")
    return max(subset, min(full, max_repeats * subset))


def repeated_indices(subset: int, size: int, seed: int) -> list[int]:
    """``size`` indices into a subset of ``subset`` pairs: ``ceil(size / subset)`` seeded
    permutations of ``range(subset)`` one after the other, trimmed to ``size``; every pair appears
    ``size // subset`` or one more times. Drawn from a generator of its own (the global random
    stream, which seeds the head, is left untouched)."""
    generator = np.random.default_rng(seed)
    repeats = math.ceil(size / subset)
    order = np.concatenate([generator.permutation(subset) for _ in range(repeats)])[:size]
    return order.tolist()
