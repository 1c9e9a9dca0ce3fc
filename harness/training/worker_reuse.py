"""What a long-lived benchmark worker keeps between the cells it runs, so that a cell costs its
training and little else: each encoder checkpoint loaded and checked once (``downstream.run.encoder_reuse``),
each feature cache file's checksum verified once per version of the file and each sentence list
tokenised once (``downstream.data.features``), each split's dataset digest computed once
(``downstream.run.ui_views``).

Only inside :func:`reuse_between_cells` (``benchmarks.tasks.cells.finetune`` enters it); anywhere else
every run loads and verifies everything itself, as a fresh process would. What is kept is keyed
on what determines it (a run id, a fingerprint, a file's inode, size and times, a content hash),
never on a name that could point elsewhere later.
"""

from __future__ import annotations

from contextlib import contextmanager

_depth = 0


def reusing() -> bool:
    """Whether the current run may use what earlier cells of this process left."""
    return _depth > 0


@contextmanager
def reuse_between_cells():
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
