"""Which config values become MLflow params: the ones a user compares across runs.

LightningCLI's full config has ~80 keys, most of them Trainer switches left at their defaults
(``trainer.barebones: False``), unset values (``None``) and plumbing (``run_name``, ``tags: {}``,
cache folders). In the UI they bury the few settings that differ. Kept: every model and data
setting with a value, the Trainer settings that change a result when they leave their default,
and the resolved facts the CLIs add (encoder run, fingerprint, pair counts).
"""

from __future__ import annotations

from typing import Any

# Trainer settings that change what a run computes, with Lightning's defaults (dropped when equal).
TRAINER_KEPT = {
    "max_epochs": None, "min_epochs": None, "max_steps": -1, "min_steps": None, "max_time": None,
    "precision": None, "accumulate_grad_batches": 1, "gradient_clip_val": None, "gradient_clip_algorithm": None,
    "limit_train_batches": None, "limit_val_batches": None, "val_check_interval": None,
    "overfit_batches": 0.0, "deterministic": None, "devices": "auto", "num_nodes": 1, "strategy": "auto",
    "accelerator": "auto",
}
# Plumbing: where things go and how the run is labelled, not what it computes.
DROPPED = {"run_name", "tags", "experiment_name", "method", "parent_run_id", "ckpt_path", "weights_only",
           "data.cache_dir", "data.num_workers", "feature_cache", "samples_every_n_steps"}


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
