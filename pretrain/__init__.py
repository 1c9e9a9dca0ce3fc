"""Pretraining stage: corpora, the language-model families, and the frozen encoders they yield."""

from pretrain.encoder import Encoder
from pretrain.runs import load_encoder, random_encoder

__all__ = ["Encoder", "load_encoder", "random_encoder"]
