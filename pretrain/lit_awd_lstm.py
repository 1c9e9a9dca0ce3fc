"""The ULMFiT family's LightningModule: an AWD-LSTM language model pretrained with the shared LM
loop, its AR/TAR regularisation added to the training loss. Stage 1 (general LM) trains it on a
corpus; stage 2 (target-task LM) continues it on the task's text with ``init_from``."""

from __future__ import annotations

from pretrain.lit_lm import LitLanguageModel
from pretrain.models.awd_lstm import AWDLSTMConfig


class LitAWDLSTM(LitLanguageModel):
    """Pretrains an AWD-LSTM language model (family ``ulmfit``).

    The model is :class:`pretrain.models.awd_lstm.AWDLSTM` (Merity et al. 2017, Howard & Ruder
    2018). Arguments: the fields of :class:`AWDLSTMConfig`, then the optimisation and
    ``init_from`` of :class:`LitLanguageModel`.
    """

    family = "ulmfit"
    config_class = AWDLSTMConfig
