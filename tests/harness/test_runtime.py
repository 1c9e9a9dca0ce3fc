"""Process tuning: a block runs with the intra-op thread count asked for, and the previous count
comes back afterwards, also when the block raises."""

import pytest
import torch

from harness.cli.runtime import intra_op_threads


def test_the_thread_count_applies_inside_and_is_restored_after_an_error():
    before = torch.get_num_threads()
    inside = 2 if before == 1 else 1
    with intra_op_threads(inside):
        assert torch.get_num_threads() == inside
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), intra_op_threads(inside):
        raise ValueError("a failing cell")
    assert torch.get_num_threads() == before
