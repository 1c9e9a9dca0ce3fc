"""Will a training step fit in memory? An estimate made before the run starts, so that a batch
that cannot fit is refused in one line instead of swapping the machine or being OOM-killed.

The estimate measures rather than models: it runs the language model forward on two small
probe batches (all tokens real, dropout on) and adds up the bytes autograd keeps for the
backward pass, then extrapolates to the longest batch, per token and per token² (attention).
Parameters, their gradients and two AdamW moments come on top, and the backward pass briefly
needs about as much again as the largest single saved tensor (the logits, usually). The
activations get 20% headroom for what the extrapolation misses.

Shapes: B batch, T tokens.
"""

from __future__ import annotations

import psutil
import torch
from torch import nn

PROBE_BATCH = 2
PROBE_STEPS = (16, 32)
HEADROOM = 1.2  # on the activations: allocator slack and what the probe's extrapolation misses
GIB = 2**30


def saved_bytes(model: nn.Module, vocab_size: int, batch_size: int, steps: int) -> tuple[int, int]:
    """Bytes autograd saves for one forward pass of ``model`` on a (batch_size, steps) batch of
    real tokens, and the largest single saved tensor. Parameters saved for backward are not counted."""
    parameters = {parameter.untyped_storage().data_ptr() for parameter in model.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    lengths = torch.full((batch_size,), steps)  # (B,)
    was_training = model.training
    model.train()
    # the probe's random ids and dropout masks must not move the generators training draws from
    with torch.random.fork_rng(devices=[]), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        token_ids = torch.randint(4, max(vocab_size, 5), (batch_size, steps))  # (B, T)
        sums = model(token_ids, lengths)
        loss = sum(sums[key] for key in model.objective.nll_keys)
    del loss, sums
    model.train(was_training)
    return sum(storages.values()), max(storages.values(), default=0)


def step_bytes(model: nn.Module, vocab_size: int, batch_size: int, steps: int) -> int:
    """Estimated peak bytes of one training step on a (batch_size, steps) batch.

    Returns:
        parameters × 4 (weights, gradients, AdamW's two moments) + (saved activations + the
        largest saved tensor once more, its gradient during backward) × HEADROOM, extrapolated
        from probes.
    """
    (short_total, short_largest), (long_total, long_largest) = (
        saved_bytes(model, vocab_size, PROBE_BATCH, probe) for probe in PROBE_STEPS
    )
    first, second = PROBE_STEPS
    # per sequence: saved(T) = a·T + b·T² through both probes (b ≈ 0 for recurrent models)
    per_short, per_long = short_total / PROBE_BATCH, long_total / PROBE_BATCH
    quadratic = max(0.0, (per_long / second - per_short / first) / (second - first))
    linear = max(0.0, per_short / first - quadratic * first)
    activations = batch_size * (linear * steps + quadratic * steps**2)
    largest = long_largest / (PROBE_BATCH * second) * batch_size * steps
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return int(4 * parameter_bytes + HEADROOM * (activations + largest))


def available_bytes(device: str) -> int:
    """Free memory of the device training will run on: the GPU's, else the machine's available RAM."""
    if device == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info()[0])
    return int(psutil.virtual_memory().available)


def training_device(accelerator: str | None) -> str:
    """``cuda`` when Lightning will train on a GPU with this ``--trainer.accelerator``, else ``cpu``."""
    if str(accelerator) in ("gpu", "cuda") or (str(accelerator) == "auto" and torch.cuda.is_available()):
        return "cuda"
    return "cpu"
