"""Where a training step's time goes: making its inputs (the feature cache's collation or the token
ids of a fine-tuning step; a pretraining batch from its loader), the forward pass with its loss,
the backward pass and the optimiser step (with gradient clipping where the run clips), each timed
apart on batches of its row. A row far below its precision's matmul peak is read with it:
time spent making inputs, or dispatching many small operators, is not arithmetic that a faster
kernel or ``torch.compile`` of the model could shorten."""

from __future__ import annotations

import time
from contextlib import nullcontext

PHASES = ("inputs", "forward", "backward", "optimizer")


def train_step(classifier, batch, optimizer, autocast=None) -> list[float]:
    """One training step of ``LitPairClassifier`` on ``batch`` (its inputs made): forward and loss
    under ``autocast``'s forward context (a precision plugin; None: float32), backward, the
    optimiser's step. Returns ``time.perf_counter()`` after the forward, the backward and the step."""
    with autocast.forward_context() if autocast else nullcontext():
        loss = classifier.loss(classifier(classifier.inputs(*batch[:4])), batch[4])
    forward = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    backward = time.perf_counter()
    optimizer.step()
    return [forward, backward, time.perf_counter()]


def step_phases(classifier, batches, inputs, optimizer, autocast=None) -> dict[str, float]:
    """``{phase: its share of the steps' time}`` over ``batches`` (pair-index lists; the first is a
    warm-up), ``inputs`` making a step's tensors from one, and ``step_ms``: the mean step in ms."""
    return timed_phases(
        batches,
        lambda pair_indices: (inputs(pair_indices),),
        lambda batch: train_step(classifier, batch, optimizer, autocast),
    )


def timed_phases(sources, make, step) -> dict[str, float]:
    """The phases of ``step`` over ``sources`` (the first a warm-up): ``make(source)`` makes a
    step's inputs, ``step(*made)`` trains on them and returns the ends of its forward, backward and
    optimiser step. ``{phase: its share of the time}`` and ``step_ms``, the mean step in ms."""
    totals = dict.fromkeys(PHASES, 0.0)
    steps = 0
    for index, source in enumerate(sources):
        start = time.perf_counter()
        made = make(source)
        marks = [start, time.perf_counter(), *step(*made)]
        if index:
            steps += 1
            for phase, begin, end in zip(PHASES, marks, marks[1:]):
                totals[phase] += end - begin
    total = sum(totals.values())
    return {**{phase: totals[phase] / total for phase in PHASES}, "step_ms": 1000 * total / steps}


def phases_text(phases: dict[str, float]) -> str:
    """``inputs 4, forward 36, backward 59, optimizer 2 of 240.0 ms``: a row's ``phases`` in one line."""
    shares = ", ".join(f"{phase} {100 * phases[phase]:.0f}" for phase in PHASES)
    return f"{shares} of {phases['step_ms']:.1f} ms"
