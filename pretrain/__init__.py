"""Pretraining stage: corpora, the language-model families, and the frozen encoders they yield.

``from pretrain import load_encoder`` is the Python API; the names below load on first use, so
that importing a submodule (``pretrain.models.bilm``: torch only) imports nothing else."""

from __future__ import annotations

import importlib

EXPORTS = {"Encoder": "pretrain.encoder", "load_encoder": "pretrain.runs", "random_encoder": "pretrain.runs"}

__all__ = list(EXPORTS)


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"module 'pretrain' has no attribute {name!r}")
    importlib.import_module("harness.mlflow_defaults")  # before mlflow, which pretrain.runs imports
    return getattr(importlib.import_module(EXPORTS[name]), name)
