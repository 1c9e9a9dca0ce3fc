"""Progress a log file can hold (one line per epoch) and the line that says why a fit stopped."""

import pytest
import torch
from pytorch_lightning import Trainer
from pytorch_lightning.callbacks import Callback, EarlyStopping
from pytorch_lightning.demos.boring_classes import BoringModel

from harness.training.progress_lines import EpochBar, LineProgress, StopReason


class LoggingModel(BoringModel):
    """BoringModel with a dev metric that never improves after the first validation."""

    def training_step(self, batch, batch_idx):
        output = super().training_step(batch, batch_idx)
        self.log("train_loss", output["loss"], prog_bar=True)
        return output

    def validation_step(self, batch, batch_idx):
        self.log("dev_acc", torch.tensor(0.5), prog_bar=True)


def fit(capsys, *callbacks, **settings) -> list[str]:
    trainer = Trainer(
        callbacks=[LineProgress(), StopReason(), *callbacks],
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        limit_train_batches=3,
        limit_val_batches=1,
        **settings,
    )
    trainer.fit(LoggingModel())
    return [line for line in capsys.readouterr().out.splitlines() if line]


def test_one_line_per_epoch_then_the_epoch_limit(capsys):
    lines = fit(capsys, max_epochs=2)
    assert [line.split("  ")[:2] for line in lines[:2]] == [["epoch 1/2", "step 3"], ["epoch 2/2", "step 6"]]
    assert "train_loss " in lines[0] and "dev_acc 0.5" in lines[0]
    assert lines[2:] == ["stopped: max_epochs=2 reached"]


def test_early_stopping_names_its_metric_and_patience(capsys):
    lines = fit(capsys, EarlyStopping(monitor="dev_acc", mode="max", patience=2), max_epochs=10)
    assert lines[-1] == (
        "stopped: early stopping on dev_acc after 2 validations without improvement (patience 2): "
        "best 0.5 at validation 1 (epoch 1), the last validation 3 (epoch 3)"
    )
    assert len(lines) == 4  # three epochs, then why
    assert [line.split("  ")[2] for line in lines[:3]] == ["validation 1", "validation 2", "validation 3"]


class RisingModel(LoggingModel):
    """dev_acc rises for the first ``rising`` validations, then stays: the best is validation ``rising``."""

    def __init__(self, rising: int):
        super().__init__()
        self.rising, self.validations = rising, 0

    def on_validation_epoch_start(self):
        if not self.trainer.sanity_checking:
            self.validations += 1

    def validation_step(self, batch, batch_idx):
        self.log("dev_acc", torch.tensor(0.1 * min(self.validations, self.rising)), prog_bar=True)


def test_with_two_validations_an_epoch_the_lines_count_validations_and_the_best_ones_epoch(capsys):
    """The words count what the lines print: patience 4 at two validations an epoch is two
    epochs, and the best (validation 4) was in epoch 2, not in the epoch the count reaches."""
    trainer = Trainer(
        callbacks=[LineProgress(), StopReason(), EarlyStopping(monitor="dev_acc", mode="max", patience=4)],
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        limit_train_batches=4,
        limit_val_batches=1,
        val_check_interval=0.5,
        max_epochs=10,
    )
    trainer.fit(RisingModel(rising=4))
    lines = [line for line in capsys.readouterr().out.splitlines() if line]
    assert [line.split("  ")[:3] for line in lines[:-1]] == [
        ["epoch 1/10", "validation 1", "step 2"],
        ["epoch 1/10", "step 4", "validation 2"],
        ["epoch 2/10", "validation 3", "step 6"],
        ["epoch 2/10", "step 8", "validation 4"],
        ["epoch 3/10", "validation 5", "step 10"],
        ["epoch 3/10", "step 12", "validation 6"],
        ["epoch 4/10", "validation 7", "step 14"],
        ["epoch 4/10", "step 16", "validation 8"],
    ]
    assert "dev_acc 0.4" in lines[3]
    assert lines[-1] == (
        "stopped: early stopping on dev_acc after 4 validations without improvement (patience 4): "
        "best 0.4 at validation 4 (epoch 2), the last validation 8 (epoch 4)"
    )


def test_a_resumed_fit_goes_on_counting_validations():
    count = StopReason()
    count.load_state_dict({"validation_epochs": [0, 0, 1]})
    assert count.state_dict() == {"validation_epochs": [0, 0, 1]}
    progress = LineProgress()
    progress.load_state_dict(count.state_dict())
    assert progress.validations.epochs == [0, 0, 1]


def test_the_step_limit(capsys):
    assert fit(capsys, max_steps=4, max_epochs=10)[-1] == "stopped: max_steps=4 reached"


@pytest.mark.parametrize("limit", ["00:00:00:00"])
def test_the_time_limit(capsys, limit):
    assert fit(capsys, max_time=limit, max_epochs=10)[-1] == "stopped: time limit 0:00:00 reached (--trainer.max_time)"


def test_the_terminal_bar_counts_epochs_from_1_as_the_lines_do(capsys):
    bar, shown = EpochBar(), []

    class Watch(Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            shown.append(bar.train_progress_bar.desc.rstrip(": "))

    trainer = Trainer(
        callbacks=[bar, Watch()],
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        limit_train_batches=2,
        limit_val_batches=1,
        max_epochs=2,
    )
    trainer.fit(LoggingModel())
    assert shown == ["Epoch 1/2", "Epoch 2/2"]  # Lightning's own bar says Epoch 0, Epoch 1
