"""What a pair classifier's outputs are trained toward and read as, by its task's target
(``harness.datasets.task.Task.target``); the heads themselves only output C numbers
(``Task.output_size``).

- ``classes``: C logits, cross-entropy against the (B,) class ids; read out as class
  probabilities (N, C), from which the predictions files take ``prob`` and ``pred``.
- ``graded``: one number, the mean squared error against the (B,) gold scores mapped onto [0, 1]
  by ``Task.scaled``; read out as that number (N,), which ``Task.unscaled`` maps back onto the
  task's own scale for the predictions files.

Why [0, 1]: one scale for every range, so that a head's initialisation, its learning rate and the
size of the loss do not depend on whether a task is scored 0–5 (STS-B) or 1–5 (SICK-R). Plain
regression under squared error is jiant's and the GLUE baseline's choice for STS-B; SentEval instead
classifies into score bins with a KL loss (Tai et al. 2015's SICK-R set-up). The output is not
squashed (no sigmoid), as in those: a prediction may leave the range a little, and the correlations
the task reports do not care.

Shapes: B batch, C outputs, N pairs.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from harness.datasets.task import Task


class ClassTarget(nn.Module):
    """Cross-entropy over class logits (no parameters or buffers: a checkpoint holds none of it)."""

    def __init__(self, task: Task):
        super().__init__()
        self.cross_entropy = nn.CrossEntropyLoss()

    def forward(self, outputs: Tensor, labels: Tensor) -> Tensor:
        """(B, C) logits, (B,) class ids -> 0-dim mean cross-entropy."""
        return self.cross_entropy(outputs, labels)

    def readout(self, outputs: Tensor) -> Tensor:
        """(N, C) logits -> (N, C) class probabilities."""
        return torch.softmax(outputs, dim=-1)


class GradedTarget(nn.Module):
    """Squared error of one output against the gold score on [0, 1] (``Task.scaled``, applied to the
    batch's scores as the affine map it is: its value at 0 and its slope, taken from it once)."""

    def __init__(self, task: Task):
        super().__init__()
        zero, one = task.scaled(np.array([0.0, 1.0]))
        self.offset, self.slope = float(zero), float(one - zero)

    def scaled(self, scores: Tensor) -> Tensor:
        """(B,) gold scores on the task's scale -> (B,) on [0, 1], float32."""
        return self.offset + self.slope * scores.float()

    def forward(self, outputs: Tensor, scores: Tensor) -> Tensor:
        """(B, 1) outputs, (B,) gold scores -> 0-dim mean squared error on [0, 1] (in float32)."""
        return nn.functional.mse_loss(outputs[:, 0].float(), self.scaled(scores))

    def readout(self, outputs: Tensor) -> Tensor:
        """(N, 1) outputs -> (N,) predicted scores on [0, 1] (``Task.unscaled`` gives the task's scale)."""
        return outputs[:, 0].float()


TARGETS: dict[str, type[nn.Module]] = {"classes": ClassTarget, "graded": GradedTarget}


def target_of(task: Task) -> ClassTarget | GradedTarget:
    """The loss and readout of ``task``'s target."""
    return TARGETS[task.target](task)
