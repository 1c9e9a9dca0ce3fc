"""The ULMFiT family's LightningModule: an AWD-LSTM language model pretrained with the shared LM
loop, its AR/TAR regularisation added to the training loss. Stage 1 (general LM) trains it on a
corpus; stage 2 (target-task LM) continues it on the task's text with ``init_from``."""

from __future__ import annotations

from pretrain.lit_lm import LitLanguageModel


class LitAWDLSTM(LitLanguageModel):
    """Pretrains a :class:`pretrain.models.awd_lstm.AWDLSTM` (family ``ulmfit``; Merity et al. 2017,
    Howard & Ruder 2018).

    Args:
        vocab_size: linked from the data module's tokenizer.
        embedding_size, hidden_size, num_layers: emb → hidden → … → emb LSTMs (ULMFiT: 400, 1152, 3).
        dropout_output, dropout_hidden, dropout_input, dropout_embedding, weight_drop: AWD-LSTM's
            dropouts (ULMFiT: 0.1, 0.15, 0.25, 0.02, 0.2), all scaled by ``drop_mult``.
        tie_weights: share the embedding and the decoder.
        alpha, beta: activation (AR) and temporal activation (TAR) regularisation.
        **kwargs: optimisation and ``init_from`` (see :class:`LitLanguageModel`).
    """

    family = "ulmfit"
    model_keys = ("vocab_size", "embedding_size", "hidden_size", "num_layers", "dropout_output", "dropout_hidden",
                  "dropout_input", "dropout_embedding", "weight_drop", "drop_mult", "tie_weights", "alpha", "beta")

    def __init__(
        self,
        vocab_size: int = 0,
        embedding_size: int = 400,
        hidden_size: int = 1152,
        num_layers: int = 3,
        dropout_output: float = 0.1,
        dropout_hidden: float = 0.15,
        dropout_input: float = 0.25,
        dropout_embedding: float = 0.02,
        weight_drop: float = 0.2,
        drop_mult: float = 1.0,
        tie_weights: bool = True,
        alpha: float = 2.0,
        beta: float = 1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.save_hyperparameters(logger=False)
        self.build()
