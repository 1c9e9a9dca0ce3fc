"""ResumeState: what it stores survives a weights-only round trip and puts the generators, the
pending plateau step and ``should_stop`` back."""

import io
import random
from types import SimpleNamespace

import numpy as np
import torch

from harness.training.resume import ResumeState, rng_state, set_rng_state


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def weights_only_round_trip(state: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_rng_state_round_trips_through_a_weights_only_checkpoint():
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.randn()  # leaves a cached gaussian in NumPy's state
    saved = weights_only_round_trip(rng_state())
    expected = draws()
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    set_rng_state(saved)
    assert draws() == expected


def test_resume_puts_back_the_plateau_step_and_should_stop():
    scheduler_steps = []
    plateau = SimpleNamespace(
        reduce_on_plateau=True, interval="epoch", scheduler=SimpleNamespace(step=scheduler_steps.append)
    )
    other = SimpleNamespace(reduce_on_plateau=False, interval="epoch", scheduler=None)
    callback = ResumeState("run")
    callback.load_state_dict(
        weights_only_round_trip({"run_id": "run", "rng": rng_state(), "plateau_metrics": [529.1], "should_stop": True})
    )
    trainer = SimpleNamespace(lr_scheduler_configs=[other, plateau], should_stop=False)
    callback.on_train_start(trainer, pl_module=None)
    assert scheduler_steps == [529.1] and trainer.should_stop is True
    callback.on_train_start(trainer, pl_module=None)  # only once
    assert scheduler_steps == [529.1]


def test_a_fresh_fit_changes_nothing_at_train_start():
    trainer = SimpleNamespace(lr_scheduler_configs=[], should_stop=False)
    ResumeState("run").on_train_start(trainer, pl_module=None)
    assert trainer.should_stop is False
