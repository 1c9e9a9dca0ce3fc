"""Pretraining stage: MRPC corpus, ELMo-style biLM, and the frozen encoder it yields."""

from pretrain.encoder import Encoder, load_encoder

__all__ = ["Encoder", "load_encoder"]
