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
        "stopped: early stopping on dev_acc after 2 validations without improvement (patience 2; best 0.5) in epoch 3"
    )
    assert len(lines) == 4  # three epochs, then why


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
