"""What a checkpoint needs beyond Lightning's own state for a resumed fit to equal the
uninterrupted one: the MLflow run it belongs to, the random number generators, and two things
Lightning drops at an epoch-end checkpoint.

Lightning restores weights, optimiser, schedulers, loop progress and callback state (the
ModelCheckpoint's best score, EarlyStopping's patience), but
- not the global RNGs that draw each epoch's shuffle (the DataLoader iterator's base seed,
  the sampler's seed, the bucket order) and the dropout masks;
- not the ReduceLROnPlateau step of the epoch the checkpoint was written in: that step comes
  after the checkpoint (after validation) and needs a metric the checkpoint lacks, so a resumed
  fit skips it (Lightning's ``update_plateau_schedulers=not self.restarting``);
- not ``trainer.should_stop``, which EarlyStopping (or ``max_time``) set just before the save.
:class:`ResumeState` stores all three, as tensors and plain values so that the checkpoint still
loads with ``weights_only=True``, and puts them back.
"""

from __future__ import annotations

import random

import numpy as np
import pytorch_lightning as pl
import torch

from harness.training.checkpoints import RESUME_STATE_KEY


def rng_state() -> dict:
    """The global RNG states of Python, NumPy, torch (and CUDA when present), as tensors and plain values."""
    version, python_state, gauss = random.getstate()
    _, numpy_keys, numpy_position, has_gauss, cached_gaussian = np.random.get_state()
    state = {
        "python": {"version": version, "state": list(python_state), "gauss": gauss},
        "numpy": {
            "keys": torch.from_numpy(numpy_keys.astype(np.int64)),
            "position": int(numpy_position),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned."""
    python = state["python"]
    random.setstate((python["version"], tuple(python["state"]), python["gauss"]))
    numpy = state["numpy"]
    np.random.set_state(
        (
            "MT19937",
            numpy["keys"].numpy().astype(np.uint32),
            numpy["position"],
            numpy["has_gauss"],
            numpy["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class ResumeState(pl.Callback):
    """Stores the run id, the RNG states, the metric each pending plateau step needs and
    ``should_stop`` in every checkpoint, and puts them back on resume.

    The RNG states are restored as soon as Lightning hands the callback its state, before the
    fit loop creates its first DataLoader iterator (which draws a seed), so the resumed fit makes
    the same draws in the same order; the sanity check between runs under an isolated RNG. The
    plateau steps and ``should_stop`` are replayed at ``on_train_start``, once the schedulers
    are restored. Under DDP the RNG states are rank 0's: a resumed multi-device fit is not
    bit-identical.
    """

    def __init__(self, run_id: str | None):
        self.run_id = run_id
        self._trainer: pl.Trainer | None = None
        self._pending: dict | None = None

    @property
    def state_key(self) -> str:
        return RESUME_STATE_KEY  # harness.training.checkpoints.resume_point reads the run id back under it

    def setup(self, trainer, pl_module, stage) -> None:
        self._trainer = trainer

    def state_dict(self) -> dict:
        trainer = self._trainer
        state = {"run_id": self.run_id, "rng": rng_state(), "plateau_metrics": [], "should_stop": False}
        if trainer is not None:
            state["should_stop"] = bool(trainer.should_stop)
            if trainer.fit_loop.epoch_loop._num_ready_batches_reached():  # an epoch-end save
                state["plateau_metrics"] = pending_plateau_metrics(trainer)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        if state_dict.get("rng") is not None:
            set_rng_state(state_dict["rng"])
        self._pending = state_dict

    def on_train_start(self, trainer, pl_module) -> None:
        if self._pending is None:
            return
        configs = [
            config for config in trainer.lr_scheduler_configs if config.reduce_on_plateau and config.interval == "epoch"
        ]
        for config, value in zip(configs, self._pending.get("plateau_metrics") or []):
            if value is not None:
                config.scheduler.step(value)
        if self._pending.get("should_stop"):
            trainer.should_stop = True
        self._pending = None


def pending_plateau_metrics(trainer: pl.Trainer) -> list[float | None]:
    """For each epoch-interval ReduceLROnPlateau, the metric its step at the end of the current
    epoch will read (None when it will not step this epoch), as Lightning decides it."""
    values = []
    epoch = trainer.current_epoch + 1
    for config in trainer.lr_scheduler_configs:
        if not (config.reduce_on_plateau and config.interval == "epoch"):
            continue
        value = trainer.callback_metrics.get(config.monitor) if epoch % config.frequency == 0 else None
        values.append(None if value is None else float(value))
    return values
