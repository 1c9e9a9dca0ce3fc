"""A run's MLflow params: which config values become params (the ones a user compares across
runs), and logging them in full, also into a resumed run.

LightningCLI's full config has ~80 keys, most of them Trainer switches left at their defaults
(``trainer.barebones: False``), unset values (``None``) and plumbing (``run_name``, ``tags: {}``,
cache folders). In the UI they bury the few settings that differ. Kept: every model and data
setting with a value, the Trainer settings that change a result when they leave their default,
and the resolved facts the CLIs add (encoder run, fingerprint, pair counts).
"""

from __future__ import annotations

from typing import Any

from mlflow.entities import Param
from pytorch_lightning.loggers import MLFlowLogger
from pytorch_lightning.utilities import rank_zero_only

from harness.tracking.long_values import param_value, shown_param, tag_value

CHANGED_PARAMS_TAG = "harness.changed_params"  # params a resumed fit was given other values for

# Trainer settings that change what a run computes, with Lightning's defaults (dropped when equal).
TRAINER_KEPT = {
    "max_epochs": None,
    "min_epochs": None,
    "max_steps": -1,
    "min_steps": None,
    "max_time": None,
    "precision": None,
    "accumulate_grad_batches": 1,
    "gradient_clip_val": None,
    "gradient_clip_algorithm": None,
    "limit_train_batches": None,
    "limit_val_batches": None,
    "val_check_interval": None,
    "overfit_batches": 0.0,
    "deterministic": None,
    "devices": "auto",
    "num_nodes": 1,
    "strategy": "auto",
    "accelerator": "auto",
}
# Plumbing: where things go and how the run is labelled, not what it computes.
DROPPED = {
    "run_name",
    "tags",
    "experiment_name",
    "method",
    "parent_run_id",
    "ckpt_path",
    "weights_only",
    "data.cache_dir",
    "data.num_workers",
    "feature_cache",
    "samples_every_n_steps",
}


def is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, tuple, dict, set)) and len(value) == 0) or value == "None"


def comparable_params(flat: dict[str, Any]) -> dict[str, Any]:
    """The flat ``{dotted key: value}`` params worth showing: no empty values, no plumbing, and
    of ``trainer.*`` only :data:`TRAINER_KEPT` keys away from their defaults."""
    kept = {}
    for key, value in flat.items():
        if is_empty(value) or key in DROPPED:
            continue
        if key.startswith("trainer."):
            name = key.removeprefix("trainer.")
            if name not in TRAINER_KEPT or str(value) == str(TRAINER_KEPT[name]):
                continue
        kept[key] = value
    return kept


def log_params(logger: MLFlowLogger, params: dict[str, Any]) -> None:
    """Log the flat params a user compares (:func:`comparable_params`) in full (Lightning's own
    logger cuts values at 250 characters; a value over MLflow's limit goes whole to an artifact
    the param names, :mod:`harness.tracking.long_values`).

    A resumed run has its params already, and MLflow refuses to change one: keys it has are
    skipped, and those given another value are listed in the tag ``harness.changed_params``.
    """
    if rank_zero_only.rank != 0:
        return
    client, run_id = logger.experiment, logger.run_id
    values = {key: str(value) for key, value in comparable_params(flatten(params)).items()}
    run = client.get_run(run_id)
    existing = run.data.params
    new = {key: value for key, value in values.items() if key not in existing}
    items = [Param(key, param_value(client, run_id, key, value)) for key, value in new.items()]
    for start in range(0, len(items), 100):
        client.log_batch(run_id, params=items[start : start + 100])
    changed = {
        key
        for key, value in values.items()
        if key in existing and existing[key] not in (value, shown_param(key, value))
    }
    if changed:
        changed |= set(filter(None, run.data.tags.get(CHANGED_PARAMS_TAG, "").split(",")))
        names = ",".join(sorted(changed))
        client.set_tag(run_id, CHANGED_PARAMS_TAG, tag_value(client, run_id, CHANGED_PARAMS_TAG, names))


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config → ``{"data.batch_size": 16, ...}`` (an empty mapping stays a value)."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat
