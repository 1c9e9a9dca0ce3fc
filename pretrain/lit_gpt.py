"""The GPT family's LightningModule: a left-to-right transformer LM over byte-level BPE, trained
with the shared LM loop (AdamW; linear warm-up and cosine decay by default, as GPT-1 warmed up
and then annealed)."""

from __future__ import annotations

from harness.schedules import Schedule
from pretrain.lit_lm import LitLanguageModel


class LitGPT(LitLanguageModel):
    """Pretrains a :class:`pretrain.models.transformer.TransformerLM` (family ``gpt``; Radford et
    al. 2018). Pair it with ``--data.tokenizer=subword`` (the configs do).

    Args:
        vocab_size: linked from the data module's tokenizer.
        num_layers, hidden_size, num_heads, ffn_size: the blocks (GPT-1: 12, 768, 12, 3072).
        max_positions: the position table; longer sentences must be cut by the data module.
        dropout, attention_dropout: GPT-1: 0.1 each.
        schedule: ``cosine`` here (warm-up then decay); see :class:`LitLanguageModel`.
        **kwargs: the rest of the optimisation and ``init_from``.
    """

    family = "gpt"
    model_keys = ("vocab_size", "num_layers", "hidden_size", "num_heads", "ffn_size", "max_positions", "dropout",
                  "attention_dropout")

    def __init__(
        self,
        vocab_size: int = 0,
        num_layers: int = 4,
        hidden_size: int = 256,
        num_heads: int = 4,
        ffn_size: int | None = None,
        max_positions: int = 256,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        schedule: Schedule = "cosine",
        **kwargs,
    ):
        super().__init__(schedule=schedule, **kwargs)
        self.save_hyperparameters(logger=False)
        self.build()
