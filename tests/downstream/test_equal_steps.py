"""Equal optimisation across label fractions (``--data.equal_steps``): the repeated subset is the
stratified seeded subset, each epoch has the full split's size, pretrained and twin see the same
pairs, a fit logs the optimiser steps it took, and a fraction validates dev as often as the full
set (``downstream.data.validation_schedule``)."""

from collections import Counter
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import Logger

from downstream.data.equal_steps import epoch_size, repeated_indices
from downstream.data.pair_datamodule import PairDataModule
from downstream.data.validation_schedule import DEFAULT_VALIDATIONS_PER_EPOCH, validation_schedule
from downstream.run.cli import pair_classifier
from downstream.run.evaluation import EvaluateBest
from harness.datasets.mrpc import load_mrpc
from harness.errors import UserError
from tests.helpers import mrpc_train_sentences, save_tiny_bilm

MAX_PAIRS = 64


def test_epoch_size_is_the_full_split_up_to_max_repeats():
    assert epoch_size(100, 10) == 100
    assert epoch_size(100, 30) == 100  # 3.33 passes, trimmed to the full size
    assert epoch_size(100, 5, max_repeats=10) == 50  # capped: 10 passes over 5 pairs
    assert epoch_size(100, 100) == 100
    with pytest.raises(ValueError, match="max_repeats=0"):
        epoch_size(100, 10, max_repeats=0)


def test_the_validation_schedule_is_a_count_an_epoch_whatever_the_fraction():
    assert DEFAULT_VALIDATIONS_PER_EPOCH == 2
    assert validation_schedule(1) == {} and validation_schedule(2) == {"val_check_interval": 0.5}
    assert validation_schedule(4) == {"val_check_interval": 0.25}
    with pytest.raises(ValueError, match="validations_per_epoch=0"):
        validation_schedule(0)


def test_repeated_indices_are_seeded_permutations_trimmed():
    state = torch.get_rng_state()
    order = repeated_indices(30, 100, seed=3)
    assert torch.equal(torch.get_rng_state(), state)  # the head's random stream is untouched
    assert len(order) == 100
    assert sorted(order[:30]) == list(range(30)) and order[:30] != list(range(30))  # a shuffled repeat
    assert sorted(order[30:60]) == list(range(30)) and order[30:60] != order[:30]  # reshuffled each repeat
    assert set(Counter(order).values()) == {3, 4}  # 100 = 3 passes + 10 pairs of a fourth
    assert repeated_indices(30, 100, seed=3) == order
    assert repeated_indices(30, 100, seed=4) != order


def data_module(mrpc_dir: Path, **kwargs) -> PairDataModule:
    return PairDataModule(
        mrpc_dir=str(mrpc_dir),
        batch_size=16,
        max_pairs=MAX_PAIRS,
        cache_dir="none",
        subsample_seed=0,
        train_fraction=0.25,
        **kwargs,
    )


def test_the_repeated_subset_is_the_stratified_seeded_subset(real_mrpc_dir):
    plain, equal = data_module(real_mrpc_dir), data_module(real_mrpc_dir, equal_steps=True)
    assert equal.pairs["train"] == plain.pairs["train"] and len(equal.pairs["train"]) == 16
    full = load_mrpc(str(real_mrpc_dir)).train[:MAX_PAIRS]
    assert abs(sum(p.label for p in equal.pairs["train"]) - sum(p.label for p in full) / 4) <= 1  # stratified
    assert plain.epoch_order is None and len(equal.epoch_order) == MAX_PAIRS
    assert Counter(equal.epoch_order) == Counter({index: 4 for index in range(16)})
    assert data_module(real_mrpc_dir, equal_steps=True).epoch_order == equal.epoch_order  # a twin's: the same
    assert equal.summary()["train_epoch_pairs"] == MAX_PAIRS and plain.summary()["train_epoch_pairs"] == 16
    whole = PairDataModule(mrpc_dir=str(real_mrpc_dir), max_pairs=MAX_PAIRS, cache_dir="none", equal_steps=True)
    assert whole.epoch_order is None  # the full set needs no repeats


def test_bad_max_repeats_is_one_line(real_mrpc_dir):
    with pytest.raises(UserError, match=r"--data.max_repeats=0") as raised:
        data_module(real_mrpc_dir, equal_steps=True, max_repeats=0)
    assert "\n" not in str(raised.value)
    with pytest.raises(UserError, match=r"--data.validations_per_epoch=0") as raised:
        data_module(real_mrpc_dir, validations_per_epoch=0)
    assert "\n" not in str(raised.value)


@pytest.fixture(scope="module")
def checkpoint(real_mrpc_dir, tmp_path_factory) -> Path:
    return save_tiny_bilm(mrpc_train_sentences(real_mrpc_dir), tmp_path_factory.mktemp("encoder"))


class _Client:
    def log_text(self, *args, **kwargs):
        pass

    def log_image(self, *args, **kwargs):
        pass


class RecordingLogger(Logger):
    """Keeps the metrics a fit logs (EvaluateBest's included), in memory."""

    def __init__(self):
        super().__init__()
        self.metrics: dict[str, float] = {}
        self.run_id = "test"

    name, version = "test", 0

    @property
    def experiment(self):
        return _Client()

    def log_hyperparams(self, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        self.metrics.update(metrics)


@pytest.mark.parametrize(
    "encoder, equal_steps, steps", [("pretrained", False, 2), ("pretrained", True, 8), ("random", True, 8)]
)
def test_a_fit_logs_its_optimiser_steps(checkpoint, real_mrpc_dir, tmp_path, encoder, equal_steps, steps):
    pl.seed_everything(0, verbose=False)
    reference = str(checkpoint) if encoder == "pretrained" else f"random:{checkpoint}@0"
    model = pair_classifier(encoder=reference, head="pool-mlp", hidden_size=8, learning_rate=1e-2)
    data = data_module(real_mrpc_dir, equal_steps=equal_steps)
    data.attach(model.encoder)
    logger = RecordingLogger()
    trainer = pl.Trainer(
        max_epochs=2,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        default_root_dir=tmp_path,
        callbacks=[EvaluateBest()],
    )
    trainer.fit(model, datamodule=data)
    assert trainer.global_step == steps  # 16 pairs in batches of 16: 1 step an epoch, 4 with equal steps
    assert logger.metrics["train_steps"] == steps and logger.metrics["train_epochs"] == 2


class Validations(pl.Callback):
    """The optimiser step of every dev validation a fit ran (the sanity check aside)."""

    def __init__(self):
        self.steps: list[int] = []

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.steps.append(trainer.global_step)


@pytest.mark.parametrize("validations_per_epoch", [1, 2])
def test_a_fraction_under_equal_steps_validates_at_the_full_sets_steps(
    checkpoint, real_mrpc_dir, tmp_path, validations_per_epoch
):
    """A quarter of the pairs, repeated to the full set's 4 steps an epoch, is validated at the very
    optimiser steps of the full set: the same number of validations, at the same cost."""
    steps = {}
    for fraction in (1.0, 0.25):
        pl.seed_everything(0, verbose=False)
        model = pair_classifier(encoder=str(checkpoint), head="pool-mlp", hidden_size=8, learning_rate=1e-2)
        data = PairDataModule(
            mrpc_dir=str(real_mrpc_dir),
            batch_size=16,
            max_pairs=MAX_PAIRS,
            cache_dir="none",
            subsample_seed=0,
            train_fraction=fraction,
            equal_steps=True,
            validations_per_epoch=validations_per_epoch,
        )
        data.attach(model.encoder)
        validations = Validations()
        trainer = pl.Trainer(
            max_epochs=2,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            accelerator="cpu",
            devices=1,
            default_root_dir=tmp_path,
            callbacks=[validations],
            **validation_schedule(data.hparams.validations_per_epoch),
        )
        trainer.fit(model, datamodule=data)
        steps[fraction] = validations.steps
    expected = [2, 4, 6, 8] if validations_per_epoch == 2 else [4, 8]
    assert steps[1.0] == steps[0.25] == expected
