"""The ELMo family's LightningModule: a :class:`BiLM` pretrained with the shared LM loop."""

from __future__ import annotations

from pretrain.lit_lm import LitLanguageModel


class LitBiLM(LitLanguageModel):
    """Pretrains a :class:`pretrain.models.bilm.BiLM` (family ``elmo``).

    Args:
        vocab_size: linked from the data module's tokenizer.
        hidden_size: embedding size and per-direction LSTM output H (features are D = 2H).
        cell_size: LSTM memory size; larger than ``hidden_size`` adds ELMo's projection.
        num_layers: LSTM layers per direction.
        dropout: on LSTM inputs and on the states fed to the softmax.
        softmax: ``full`` (exact) or ``adaptive``.
        adaptive_cutoffs: cluster boundaries of the adaptive softmax (frequency ranks).
        tie_weights: share the embedding and full-softmax matrices.
        **kwargs: optimisation and ``init_from`` (see :class:`LitLanguageModel`).
    """

    family = "elmo"
    model_keys = ("vocab_size", "hidden_size", "cell_size", "num_layers", "dropout", "softmax",
                  "adaptive_cutoffs", "tie_weights")

    def __init__(
        self,
        vocab_size: int = 0,
        hidden_size: int = 256,
        cell_size: int | None = None,
        num_layers: int = 2,
        dropout: float = 0.1,
        softmax: str = "full",
        adaptive_cutoffs: tuple[int, ...] = (2000, 8000),
        tie_weights: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.save_hyperparameters(logger=False)
        self.build()
