"""A finetune callback for the Ctrl-C test of the suite: the first cell to start trains as usual;
every later cell says that it started (a file in ``folder``) and then waits until it is cancelled.
The test signals on that file, never on a timer, so the suite cannot finish before the signal."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytorch_lightning as pl


class HoldLaterCells(pl.Callback):
    def __init__(self, folder: str):
        self.folder = Path(folder)

    def on_train_start(self, trainer, pl_module) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(self.folder / "first", os.O_CREAT | os.O_EXCL))  # this cell trains on
            return
        except FileExistsError:
            pass
        (self.folder / f"waiting-{os.getpid()}").touch()
        while True:  # until the suite cancels this cell
            time.sleep(0.05)
