"""Learning-rate schedules and discriminative parameter groups shared by pretraining and
fine-tuning: multipliers for ``torch.optim.lr_scheduler.LambdaLR`` and AdamW groups (torch only)."""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch

Schedule = Literal["constant", "plateau", "cosine", "stlr"]  # --model.schedule; --help lists them
SCHEDULES = get_args(Schedule)


def slanted_triangular(step: int, total_steps: int, cut_fraction: float = 0.1, ratio: float = 32.0) -> float:
    """ULMFiT's slanted triangular learning-rate multiplier (Howard & Ruder 2018, eq. 3): a linear
    rise over the first ``cut_fraction`` of the steps from 1/ratio to 1, then a linear decay back to
    1/ratio at the last step."""
    cut = max(1, math.floor(total_steps * cut_fraction))
    if step < cut:
        progress = step / cut
    else:
        progress = 1 - (step - cut) / max(1, cut * (1 / cut_fraction - 1))
    return (1 + max(0.0, progress) * (ratio - 1)) / ratio


def warmup_cosine(step: int, total_steps: int, warmup_fraction: float = 0.1) -> float:
    """Linear warm-up over ``warmup_fraction`` of the steps, then cosine decay to 0."""
    warmup = max(1, math.floor(total_steps * warmup_fraction))
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return 0.5 * (1 + math.cos(math.pi * progress))


def discriminative_groups(groups: list[list[torch.nn.Parameter]], learning_rate: float, decay: float) -> list[dict]:
    """Optimizer groups for parameters listed input → top: the top group gets ``learning_rate``,
    each lower one the one above it divided by ``decay`` (ULMFiT: 2.6)."""
    depth = len(groups)
    return [
        {"params": params, "lr": learning_rate / decay ** (depth - 1 - index), "name": f"group{index}"}
        for index, params in enumerate(groups)
        if params
    ]


def scheduler_lambda(schedule: str, total_steps: int, warmup_fraction: float, stlr_ratio: float):
    """The per-step multiplier of a ``stlr`` or ``cosine`` schedule over ``total_steps``."""
    if schedule == "stlr":
        return lambda step: slanted_triangular(step, total_steps, warmup_fraction, stlr_ratio)
    return lambda step: warmup_cosine(step, total_steps, warmup_fraction)
