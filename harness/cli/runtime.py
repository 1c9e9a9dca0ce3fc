"""Process-level tuning shared by the command-line entry points."""

from __future__ import annotations

import contextlib
import ctypes
import sys

# glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def retain_freed_memory() -> None:
    """Keep large freed blocks in the heap for reuse.

    By default glibc serves every allocation above 128 KiB with a fresh ``mmap`` and gives it
    back on free, so each training step page-faults its activations and logits in again.
    Raising the thresholds keeps those blocks, at the price of a higher steady RSS
    (docs/speed.md). A no-op where glibc is not the allocator.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30)
    libc.mallopt(_M_TRIM_THRESHOLD, 1 << 31)


def leave_new_memory_unfilled() -> None:
    """Under ``torch.use_deterministic_algorithms`` (what a run's ``trainer.deterministic`` turns
    on) torch also fills every new tensor with NaN, or the integer maximum, so that a read of
    memory nobody wrote shows up as a different result. No operation of the harness reads such
    memory (``tests/harness/test_runtime.py`` trains every family with and without the fill and
    gets the same weights bit for bit), so the fill is cost alone: one ``fill_`` for every new
    tensor of every step (docs/speed.md)."""
    import torch

    torch.utils.deterministic.fill_uninitialized_memory = False


def release_freed_memory() -> None:
    """Give the heap's free memory back to the system (glibc ``malloc_trim``), e.g. between the
    cells of a benchmark: :func:`retain_freed_memory` keeps up to 2 GiB of freed blocks for the
    next step, which a process that runs many cells in turn would otherwise hold for good."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


@contextlib.contextmanager
def intra_op_threads(count: int):
    """Run the block with ``count`` torch intra-op threads, then restore the previous count.

    For work made of many small operations (a frozen-feature head: tensors of a few MB), a second
    thread gains little and every operation pays a fork/join; on a shared, loaded machine a
    thread waiting at that join for a descheduled partner stalls the whole step (see docs/speed.md).
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
