"""The ELMo family's LightningModule: a :class:`BiLM` pretrained with the shared LM loop."""

from __future__ import annotations

from pretrain.lit_lm import LitLanguageModel
from pretrain.models.bilm import BiLMConfig


class LitBiLM(LitLanguageModel):
    """Pretrains an ELMo-style biLM (family ``elmo``).

    The model is :class:`pretrain.models.bilm.BiLM`. Arguments: the fields of :class:`BiLMConfig`,
    then the optimisation and ``init_from`` of :class:`LitLanguageModel`.
    """

    family = "elmo"
    config_class = BiLMConfig
