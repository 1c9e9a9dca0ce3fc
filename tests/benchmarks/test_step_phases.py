"""A step's time split into its phases lands in the phase that spent it: a slow input maker in
``inputs``, a slow backward hook in ``backward``; the shares add up to the step, which trains."""

import time

import pytest
import torch

from benchmarks.speed.step_phases import PHASES, step_phases

BATCHES = [[0, 1, 2, 3]] * 4  # a warm-up and three timed steps


class Tiny(torch.nn.Module):
    """The classifier's three calls a step makes, on a linear layer."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 2)

    def inputs(self, features, *_):
        return features

    def forward(self, features):
        return self.linear(features)

    def loss(self, logits, labels):
        return torch.nn.functional.cross_entropy(logits, labels)


def inputs(indices, pause=0.0):
    time.sleep(pause)
    return torch.ones(len(indices), 4), None, None, None, torch.zeros(len(indices), dtype=torch.long)


def phases_of(model, make_inputs=inputs):
    return step_phases(model, BATCHES, make_inputs, torch.optim.SGD(model.parameters(), lr=0.1))


def test_the_shares_add_up_to_the_step_and_the_step_trains():
    model = Tiny()
    before = model.linear.weight.detach().clone()
    phases = phases_of(model)
    assert set(phases) == {*PHASES, "step_ms"} and all(phases[phase] >= 0 for phase in PHASES)
    assert sum(phases[phase] for phase in PHASES) == pytest.approx(1) and phases["step_ms"] > 0
    assert not torch.equal(model.linear.weight, before)


def test_slow_inputs_are_counted_as_inputs():
    phases = phases_of(Tiny(), lambda indices: inputs(indices, pause=0.02))
    assert phases["inputs"] > 0.8 and phases["step_ms"] >= 20


def test_a_slow_backward_is_counted_as_backward():
    model = Tiny()
    model.linear.weight.register_hook(lambda grad: time.sleep(0.05))
    phases = phases_of(model)
    assert phases["backward"] > 0.8 and phases["inputs"] < 0.1
