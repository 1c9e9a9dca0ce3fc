"""The resumable batch sampler: a resumed epoch hands out exactly the batches the uninterrupted one
had left, and leaves the torch RNG where the uninterrupted fit had it at the save."""

import torch
from torch.utils.data import RandomSampler

from harness.training.batching import BucketBatchSampler
from harness.training.resumable_batches import EpochPosition, ResumableBatchSampler


def bucketed(position: EpochPosition) -> BucketBatchSampler:
    lengths = [1 + (7 * i) % 23 for i in range(200)]
    return BucketBatchSampler(RandomSampler(lengths), 8, False, lengths, pool_batches=5, position=position)


def test_a_resumed_epoch_continues_the_uninterrupted_one_and_its_rng():
    torch.manual_seed(3)
    position = EpochPosition()
    sampler = bucketed(position)
    epoch = iter(sampler)
    seen = [next(epoch) for _ in range(7)]
    torch.rand(5)  # the training steps' own draws (dropout)
    saved = {"order_rng": position.order_rng.clone(), "skip": 7, "rng": torch.get_rng_state()}
    rest, after, next_epoch = list(epoch), torch.rand(3), list(sampler)

    torch.manual_seed(99)  # a new process: another RNG state, another sampler
    position = EpochPosition(resume=saved)
    resumed_sampler = bucketed(position)
    resumed = list(resumed_sampler)
    assert resumed == rest and len(seen) + len(resumed) == len(sampler)
    assert torch.equal(torch.rand(3), after)
    assert list(resumed_sampler) == next_epoch


def test_without_a_resume_the_order_is_the_plain_batch_samplers():
    torch.manual_seed(5)
    plain = list(torch.utils.data.BatchSampler(RandomSampler(range(50)), 4, False))
    torch.manual_seed(5)
    assert list(ResumableBatchSampler(RandomSampler(range(50)), 4, False)) == plain
