"""Progress a log file can hold, and why training stopped.

A progress bar redraws one line of a terminal; written to a file or a pipe it shows nothing until
the end. :class:`LineProgress` is the progress bar there instead: one plain line per epoch, with
the epoch's metrics, a line for each validation inside an epoch (several an epoch: finetuning's
``--data.validations_per_epoch``), and a line every ``every_seconds`` during a long epoch;
:class:`EpochBar` is the bar on a terminal. Both count epochs from 1, and the lines number the
validations from 1, as early stopping's patience counts them. :class:`StopReason` ends every fit
with one line saying why it stopped: the epoch or step limit, early stopping (on which metric,
after how many validations without improvement, and the validation and epoch of the best), the
time limit, or an interruption.
"""

from __future__ import annotations

import math
import time
from datetime import timedelta

from pytorch_lightning.callbacks import Callback, EarlyStopping, Timer
from pytorch_lightning.callbacks.progress import ProgressBar, TQDMProgressBar


def metric_text(metrics: dict) -> str:
    """``train_loss 0.495  dev_acc 0.697`` (a graded task: ``dev_pearson 0.712``): the scalar
    metrics, four significant digits."""
    shown = []
    for name, value in metrics.items():
        value = value.item() if hasattr(value, "item") else value
        if name != "v_num" and isinstance(value, (int, float)):
            shown.append(f"{name} {value:.4g}")
    return "  ".join(shown)


def epoch_label(trainer, word: str = "epoch") -> str:
    """``epoch 5/20``: the epoch counted from 1, as every line shown to people counts it (Lightning's
    ``current_epoch`` and the stored values count from 0), out of ``max_epochs`` when set."""
    limit = f"/{trainer.max_epochs}" if trainer.max_epochs not in (None, -1) else ""
    return f"{word} {trainer.current_epoch + 1}{limit}"


class EpochBar(TQDMProgressBar):
    """Lightning's terminal progress bar with the epoch counted from 1 (``Epoch 5/20``), as the log
    lines and the stop reason count it."""

    def on_train_epoch_start(self, trainer, *args) -> None:
        super().on_train_epoch_start(trainer, *args)
        self.train_progress_bar.set_description(epoch_label(trainer, "Epoch"))


class ValidationCount:
    """The validations of a fit so far (sanity checks not counted), kept in its checkpoints so that
    a resumed fit goes on counting: ``epochs[k]`` is the 0-based epoch of validation ``k + 1``."""

    def __init__(self):
        self.epochs: list[int] = []

    def add(self, trainer) -> int:
        self.epochs.append(trainer.current_epoch)
        return len(self.epochs)

    def state_dict(self) -> dict:
        return {"validation_epochs": list(self.epochs)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.epochs = list(state_dict.get("validation_epochs", []))


class LineProgress(ProgressBar):
    """One line per epoch (one more per validation inside it, and one per ``every_seconds`` within
    an epoch), printed as it happens. The epoch's line names the validation that ended it."""

    def __init__(self, every_seconds: float = 60.0):
        super().__init__()
        self.every_seconds = every_seconds
        self._enabled = True
        self.epoch_start = self.last_line = 0.0
        self.validations = ValidationCount()
        self.pending: int | None = None  # a validation not yet shown: the epoch's line or the next batch shows it

    def state_dict(self) -> dict:
        return self.validations.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.validations.load_state_dict(state_dict)

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    def print_line(self, text: str) -> None:
        if self._enabled and self.trainer.is_global_zero:
            print(text, flush=True)
        self.last_line = time.monotonic()

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.epoch_start = self.last_line = time.monotonic()

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.pending = self.validations.add(trainer)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.pending is not None:  # a validation inside the epoch: training went on after it
            self.print_line(
                f"{epoch_label(trainer)}  validation {self.pending}  step {trainer.global_step}  "
                f"{metric_text(self.get_metrics(trainer, pl_module))}"
            )
            self.pending = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        total = self.total_train_batches
        known = isinstance(total, int) or (isinstance(total, float) and math.isfinite(total))
        if time.monotonic() - self.last_line < self.every_seconds or (known and batch_idx + 1 >= total):
            return  # the epoch's own line follows its last batch
        of = f"/{int(total)}" if known else ""
        self.print_line(
            f"{epoch_label(trainer)}  batch {batch_idx + 1}{of}  "
            f"{metric_text(self.get_metrics(trainer, pl_module))}  "
            f"({time.monotonic() - self.epoch_start:.0f} s)"
        )

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        validation, self.pending = self.pending, None  # the validation that ended the epoch, if one did
        self.print_line(
            f"{epoch_label(trainer)}  step {trainer.global_step}  "
            + (f"validation {validation}  " if validation is not None else "")
            + f"{metric_text(self.get_metrics(trainer, pl_module))}  "
            f"({time.monotonic() - self.epoch_start:.0f} s)"
        )


def early_stopping_reason(callback: EarlyStopping, validation_epochs: list[int]) -> str:
    """``early stopping on dev_acc after 10 validations without improvement (patience 10): best
    0.7125 at validation 10 (epoch 5), the last validation 20 (epoch 10)``. ``validation_epochs``:
    the 0-based epoch of each validation of the fit (:class:`ValidationCount`); the best is the
    validation ``wait_count`` before the last, as the callback counts its checks."""
    best = callback.best_score.item() if hasattr(callback.best_score, "item") else callback.best_score
    checks = f"{callback.wait_count} validation{'s' if callback.wait_count != 1 else ''}"
    text = f"early stopping on {callback.monitor} after {checks} without improvement (patience {callback.patience})"
    last = len(validation_epochs)
    if last > callback.wait_count:
        best_at = last - callback.wait_count
        return (
            f"{text}: best {best:.4g} at validation {best_at} (epoch {validation_epochs[best_at - 1] + 1}), "
            f"the last validation {last} (epoch {validation_epochs[-1] + 1})"
        )
    return f"{text}: best {best:.4g}; stopped in epoch {callback.stopped_epoch + 1}"


def stop_reason(trainer, validation_epochs: list[int] | None = None) -> str:
    """Why ``trainer``'s fit ended, in words (``validation_epochs``: see :func:`early_stopping_reason`)."""
    if trainer.interrupted:
        return f"interrupted in epoch {trainer.current_epoch + 1}"
    for callback in trainer.callbacks:
        if isinstance(callback, EarlyStopping) and callback.stopped_epoch > 0:
            return early_stopping_reason(callback, validation_epochs or [])
        if isinstance(callback, Timer) and callback.time_remaining() is not None and callback.time_remaining() <= 0:
            return f"time limit {timedelta(seconds=round(callback._duration))} reached (--trainer.max_time)"
    if trainer.max_steps not in (None, -1) and trainer.global_step >= trainer.max_steps:
        return f"max_steps={trainer.max_steps} reached"
    if trainer.max_epochs not in (None, -1) and trainer.current_epoch >= trainer.max_epochs:
        return f"max_epochs={trainer.max_epochs} reached"
    return f"stopped by the model or a callback in epoch {trainer.current_epoch + 1}"


class StopReason(Callback):
    """Prints ``stopped: <why>`` when a fit ends or is interrupted, counting validations as the
    progress lines number them."""

    def __init__(self):
        self.validations = ValidationCount()

    def state_dict(self) -> dict:
        return self.validations.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.validations.load_state_dict(state_dict)

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.validations.add(trainer)

    def on_fit_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            print(f"stopped: {stop_reason(trainer, self.validations.epochs)}", flush=True)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if trainer.is_global_zero and isinstance(exception, KeyboardInterrupt):
            print(f"stopped: interrupted (Ctrl-C) in epoch {trainer.current_epoch + 1}", flush=True)
