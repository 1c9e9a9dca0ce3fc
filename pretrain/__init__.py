"""Pretraining stage: corpora, the language-model families, and the frozen encoders they yield."""

import harness  # noqa: F401 - first: its MLflow defaults must precede the import of mlflow
from pretrain.encoder import Encoder
from pretrain.runs import load_encoder, random_encoder

__all__ = ["Encoder", "load_encoder", "random_encoder"]
