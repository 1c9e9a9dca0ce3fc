"""One validation schedule for every transfer run: dev is scored ``validations_per_epoch`` times
an epoch, evenly spaced in optimiser steps (Lightning's ``val_check_interval``), whatever the
labelled fraction. Under ``--data.equal_steps`` an epoch of a 10% run takes the optimiser steps of
a 100% epoch (``downstream.data.equal_steps``), so both validate at the same steps and cost the same;
early stopping's patience counts validations, as Lightning's ``EarlyStopping`` does when it checks
after each one. Twice an epoch, not once: a 10% run's epoch makes ten passes over its few pairs,
and a first look at dev only after all ten can come when a frozen ``attn`` head has memorised them."""

from __future__ import annotations

DEFAULT_VALIDATIONS_PER_EPOCH = 2


def validation_schedule(validations_per_epoch: int) -> dict:
    """Trainer keyword arguments that score dev ``validations_per_epoch`` times an epoch ({}: once,
    at its end, Lightning's default). Raises ValueError below 1."""
    if validations_per_epoch < 1:
        raise ValueError(f"validations_per_epoch={validations_per_epoch}: must be at least 1")
    return {} if validations_per_epoch == 1 else {"val_check_interval": 1.0 / validations_per_epoch}
