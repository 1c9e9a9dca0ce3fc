"""Pretraining stage: corpora, the language-model families, and the frozen encoders they yield.

``from pretrain import load_encoder`` is the Python API; the names below load on first use, so
that importing a submodule (``pretrain.models.bilm``: torch only) imports nothing else."""

from __future__ import annotations

import importlib

EXPORTS = {
    "Encoder": "pretrain.encoders.protocol",
    "load_encoder": "pretrain.encoders.loading",
    "random_encoder": "pretrain.encoders.loading",
}

__all__ = list(EXPORTS)


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"module 'pretrain' has no attribute {name!r}")
    importlib.import_module(
        "harness.tracking.mlflow_defaults"
    )  # before mlflow, which pretrain.encoders.loading imports
    return getattr(importlib.import_module(EXPORTS[name]), name)
