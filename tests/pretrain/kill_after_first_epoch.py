"""A callback for the resume tests: the process kills itself with SIGKILL as the second training
epoch starts, after the first epoch's checkpoint is written (``--trainer.callbacks+=...``). No
cleanup runs, exactly as with ``kill -9`` from outside, but at a point that does not depend on
how busy the machine is."""

import os
import signal

import pytorch_lightning as pl


class KillAfterFirstEpoch(pl.Callback):
    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == 1:
            os.kill(os.getpid(), signal.SIGKILL)
