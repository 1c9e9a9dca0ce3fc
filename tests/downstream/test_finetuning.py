"""Fine-tuning an encoder under the pair head: what trains when (frozen / full / gradual),
discriminative learning rates, the slanted triangular schedule, and finetune checkpoints that
reload on their own and reproduce their predictions."""

import math

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from downstream.finetuning import load_classifier
from downstream.lit_pair import LitPairClassifier
from harness.errors import UserError
from pretrain.checkpoints import slim_checkpoint
from pretrain.lit_bilm import LitBiLM
from pretrain.lit_lm import slanted_triangular
from pretrain.runs import load_encoder, random_encoder
from pretrain.tokenize import Tokenizer

SENTENCES = ["the cat sat on the mat .", "a dog barked at the cat .", "shares fell 3 percent on monday .",
             "the market rose sharply .", "he said so .", "she agreed to the plan .", "prices climbed .",
             "nobody came to the party ."]
HEAD = {"head": "pool-mlp", "hidden_size": 8, "dropout": 0.0, "learning_rate": 1e-2}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny biLM (2 layers of H=6: 3 parameter groups) saved the way pretraining exports it."""
    tokenizer = Tokenizer.build(SENTENCES)
    torch.manual_seed(0)
    lit = LitBiLM(vocab_size=len(tokenizer), hidden_size=6, num_layers=2, dropout=0.0)
    lit.tokenizer = tokenizer
    state = {"state_dict": lit.state_dict(), "epoch": 0, "global_step": 0}
    lit.on_save_checkpoint(state)
    path = tmp_path_factory.mktemp("encoder") / "encoder.ckpt"
    torch.save(slim_checkpoint(state), path)
    return path


class Pairs(pl.LightningDataModule):
    """Eight pairs as token ids (what the data module feeds a fine-tuned encoder)."""

    def __init__(self, encoder, batch_size: int = 4):
        super().__init__()
        first, second = SENTENCES, SENTENCES[1:] + SENTENCES[:1]
        ids_a, lengths_a = encoder.encode(first)
        ids_b, lengths_b = encoder.encode(second)
        labels = torch.tensor([0, 1] * 4)
        self.tensors = (ids_a, lengths_a, ids_b, lengths_b, labels, torch.arange(8))
        self.batch_size = batch_size

    def train_dataloader(self):
        dataset = torch.utils.data.TensorDataset(*self.tensors)
        return torch.utils.data.DataLoader(dataset, batch_size=self.batch_size)

    val_dataloader = train_dataloader


def trainer(root, epochs: int, callbacks=()) -> pl.Trainer:
    return pl.Trainer(max_epochs=epochs, logger=False, enable_progress_bar=False, enable_model_summary=False,
                      enable_checkpointing=bool(callbacks), callbacks=list(callbacks), accelerator="cpu",
                      devices=1, default_root_dir=root, num_sanity_val_steps=0)


def classifier(checkpoint, finetune: str, random: bool = False) -> LitPairClassifier:
    encoder = load_encoder(checkpoint)
    if random:
        encoder = random_encoder(encoder, seed=5)
    return LitPairClassifier(encoder, finetune=finetune, **HEAD)


class RecordGradients(pl.Callback):
    """Which encoder groups received a gradient, per epoch."""

    def __init__(self):
        self.reached: dict[int, set[int]] = {}

    def on_after_backward(self, trainer, pl_module):
        groups = pl_module.encoder.parameter_groups()
        reached = {index for index, group in enumerate(groups)
                   if any(p.grad is not None and p.grad.abs().sum() > 0 for p in group)}
        self.reached.setdefault(trainer.current_epoch, set()).update(reached)


def test_full_fine_tuning_trains_every_encoder_group(checkpoint, tmp_path):
    pl.seed_everything(0, verbose=False)
    model = classifier(checkpoint, "full")
    before = {name: p.detach().clone() for name, p in model.encoder.model.named_parameters()}
    recorder = RecordGradients()
    trainer(tmp_path, 1, [recorder]).fit(model, datamodule=Pairs(model.encoder))
    groups = len(model.encoder.parameter_groups())
    assert recorder.reached[0] == set(range(groups))
    changed = [name for name, p in model.encoder.model.named_parameters() if not torch.equal(p, before[name])]
    assert any(name.startswith("embedding") for name in changed)
    assert any(name.startswith("forward_stack.layers.1") for name in changed)
    assert any(key.startswith("encoder_model.") for key in model.state_dict())  # checkpointed with the head


def test_frozen_encoder_gets_no_gradient_and_stays_out_of_the_state(checkpoint, tmp_path):
    pl.seed_everything(0, verbose=False)
    model = classifier(checkpoint, "frozen")
    assert model.input_kind == "features" and not model.encoder.model.training
    assert all(not p.requires_grad for p in model.encoder.model.parameters())
    assert not any(key.startswith("encoder") for key in model.state_dict())


def test_gradual_unfreezing_reaches_exactly_the_unfrozen_groups(checkpoint, tmp_path):
    pl.seed_everything(0, verbose=False)
    model = classifier(checkpoint, "gradual")
    recorder = RecordGradients()
    groups = len(model.encoder.parameter_groups())  # embedding, layer 1, layer 2 (+ softmax)
    trainer(tmp_path, groups + 1, [recorder]).fit(model, datamodule=Pairs(model.encoder))
    assert groups == 3
    assert recorder.reached.get(0, set()) == set()  # epoch 0: the head only
    assert recorder.reached[1] == {2}  # then the top group …
    assert recorder.reached[2] == {1, 2}  # … one more per epoch, from the top
    assert recorder.reached[3] == {0, 1, 2}


def test_discriminative_rates_divide_by_2_6_per_group_below_the_head(checkpoint, tmp_path):
    model = classifier(checkpoint, "full")
    fit = trainer(tmp_path, 1)
    fit.fit(model, datamodule=Pairs(model.encoder))
    groups = fit.optimizers[0].param_groups
    assert [group["name"] for group in groups] == ["encoder-0", "encoder-1", "encoder-2", "head"]
    base = [group["initial_lr"] for group in groups]
    assert base[-1] == pytest.approx(HEAD["learning_rate"])
    for lower, upper in zip(base, base[1:]):
        assert upper / lower == pytest.approx(2.6)


@pytest.mark.parametrize("step, expected", [(0, 1 / 32), (5, (1 + 0.5 * 31) / 32), (10, 1.0),
                                            (55, (1 + 0.5 * 31) / 32), (100, 1 / 32)])
def test_slanted_triangular_equals_its_closed_form(step, expected):
    # T = 100 steps, cut_frac 0.1 → cut = 10; ratio 32 (Howard & Ruder 2018, eq. 3)
    assert slanted_triangular(step, 100, 0.1, 32) == pytest.approx(expected)


def test_the_schedule_drives_the_optimizer_per_step(checkpoint, tmp_path):
    model = classifier(checkpoint, "full")
    rates = []

    class Rates(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_index):
            rates.append(trainer.optimizers[0].param_groups[-1]["lr"])

    trainer(tmp_path, 5, [Rates()]).fit(model, datamodule=Pairs(model.encoder))
    total = len(rates)  # 5 epochs × 2 batches
    expected = [HEAD["learning_rate"] * slanted_triangular(step, total, 0.1, 32) for step in range(total)]
    assert rates == pytest.approx(expected)
    assert math.isclose(max(rates), HEAD["learning_rate"])


@pytest.mark.parametrize("finetune, random", [("full", False), ("frozen", False), ("frozen", True), ("full", True)])
def test_a_finetune_checkpoint_reloads_alone_and_reproduces_its_predictions(checkpoint, tmp_path, finetune, random):
    pl.seed_everything(0, verbose=False)
    model = classifier(checkpoint, finetune, random=random)
    data = Pairs(model.encoder)
    if finetune == "frozen":  # feed features, as the frozen data module would
        layers_a, mask_a = model.encoder.embed_layers(SENTENCES)
        layers_b, mask_b = model.encoder.embed_layers(SENTENCES[1:] + SENTENCES[:1])
        data.tensors = (layers_a.transpose(0, 1), mask_a, layers_b.transpose(0, 1), mask_b, *data.tensors[4:])
        model.forward = lambda a, ma, b, mb: LitPairClassifier.forward(model, a.transpose(0, 1), ma,
                                                                       b.transpose(0, 1), mb)
    saving = ModelCheckpoint(dirpath=tmp_path, filename="best")
    trainer(tmp_path, 2, [saving]).fit(model, datamodule=data)
    model.load_state_dict(torch.load(saving.best_model_path, weights_only=True)["state_dict"])
    expected, _ = model.probabilities(data.train_dataloader())

    reloaded = load_classifier(saving.best_model_path)
    assert reloaded.encoder.fingerprint == model.encoder.fingerprint
    assert reloaded.encoder.random_seed == model.encoder.random_seed
    if finetune == "frozen":
        reloaded.forward = lambda a, ma, b, mb: LitPairClassifier.forward(reloaded, a.transpose(0, 1), ma,
                                                                          b.transpose(0, 1), mb)
    again, _ = reloaded.probabilities(data.train_dataloader())
    assert torch.equal(again, expected)


def test_finetune_record_names_the_resolved_encoder_never_latest(checkpoint):
    model = classifier(checkpoint, "frozen")
    record = model.encoder.record()
    assert record["source"] == str(checkpoint) and record["family"] == "elmo"
    twin = classifier(checkpoint, "frozen", random=True).encoder.record()
    assert twin["source"] == "random" and twin["copies"] == str(checkpoint) and twin["random_seed"] == 5


def test_unknown_finetune_mode_is_one_line(checkpoint):
    with pytest.raises(UserError, match=r"^--model.finetune=partial: choose one of frozen, full, gradual$"):
        classifier(checkpoint, "partial")
