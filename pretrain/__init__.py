"""Pretraining stage: MRPC corpus, ELMo-style biLM, and the frozen encoder it yields."""

import harness  # noqa: F401 - first: its MLflow defaults must precede the import of mlflow
from pretrain.encoder import Encoder, load_encoder

__all__ = ["Encoder", "load_encoder"]
