"""The GPT family's LightningModule: a left-to-right transformer LM over byte-level BPE, trained
with the shared LM loop (AdamW; linear warm-up and cosine decay by default, as GPT-1 warmed up
and then annealed)."""

from __future__ import annotations

from pretrain.lit_lm import LitLanguageModel
from pretrain.models.transformer import TransformerConfig


class LitGPT(LitLanguageModel):
    """Pretrains a GPT-style transformer LM (family ``gpt``).

    The model is :class:`pretrain.models.transformer.TransformerLM` (Radford et al. 2018); pair it
    with ``--data.tokenizer=subword`` (the configs do). Arguments: the fields of
    :class:`TransformerConfig`, then those of :class:`LitLanguageModel` (``schedule``: ``cosine``).
    """

    family = "gpt"
    config_class = TransformerConfig
    optimisation_defaults = {"schedule": "cosine"}
