"""A callback for the interruption tests: the process sends itself ``$INTERRUPT_SIGNAL`` (``INT``
or ``TERM``) as the training batch ``$INTERRUPT_AT_BATCH`` (``<epoch>:<batch index>``) starts, as
Ctrl-C or ``kill`` from outside would; without those variables it does nothing."""

import os
import signal

import pytorch_lightning as pl


class InterruptAtBatch(pl.Callback):
    def __init__(self):
        at = os.environ.get("INTERRUPT_AT_BATCH")
        self.at = tuple(int(part) for part in at.split(":")) if at else None
        self.signal = getattr(signal, f"SIG{os.environ.get('INTERRUPT_SIGNAL', 'INT')}")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if (trainer.current_epoch, batch_idx) == self.at:
            os.kill(os.getpid(), self.signal)
