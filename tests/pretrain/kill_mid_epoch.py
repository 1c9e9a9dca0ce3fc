"""A callback for the mid-epoch resume tests: the process kills itself with SIGKILL as the training
batch ``$KILL_AT_BATCH`` (``<epoch>:<batch index>``) starts, after the checkpoints of the batch
before it are written; without that variable it does nothing. No cleanup runs, as with ``kill -9``
from outside."""

import os
import signal

import pytorch_lightning as pl


class KillAtBatch(pl.Callback):
    def __init__(self):
        at = os.environ.get("KILL_AT_BATCH")
        self.at = tuple(int(part) for part in at.split(":")) if at else None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if (trainer.current_epoch, batch_idx) == self.at:
            os.kill(os.getpid(), signal.SIGKILL)
