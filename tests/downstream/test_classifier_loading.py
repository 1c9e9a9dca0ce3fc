"""Fine-tuning an encoder under the pair head: what trains when (frozen / full / gradual),
discriminative learning rates, the slanted triangular schedule, and finetune checkpoints that
reload on their own and reproduce their predictions."""

import math
import re

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from downstream.data.pair_datamodule import joint_ids
from downstream.model.pair_classifier import JointPair
from downstream.run.classifier_loading import load_classifier
from downstream.run.lit_pair import LitPairClassifier
from harness.errors import UserError
from harness.training.schedules import slanted_triangular
from pretrain.encoders.loading import load_encoder, random_encoder
from pretrain.families import pretrained_families

SENTENCES = [
    "the cat sat on the mat .",
    "a dog barked at the cat , loudly .",
    "shares fell 3 percent on monday .",
    "the market rose sharply after the report .",
    "he said so .",
    "she agreed to the plan at once .",
    "the cat said so .",
    "shares rose on monday .",
]
HEAD = {"head": "pool-mlp", "hidden_size": 8, "dropout": 0.0, "learning_rate": 1e-2}


@pytest.fixture(scope="module", params=sorted(pretrained_families()))
def checkpoint(request, tmp_path_factory, save_encoder):
    """A tiny encoder of each family (2 layers: 3 parameter groups) saved the way pretraining exports it."""
    return save_encoder(request.param, tmp_path_factory.mktemp(request.param))[0]


@pytest.fixture(scope="module")
def gpt_checkpoint(tmp_path_factory, save_encoder):
    return save_encoder("gpt", tmp_path_factory.mktemp("gpt"))[0]


class Pairs(pl.LightningDataModule):
    """Eight pairs as the data module would feed them: token ids for a fine-tuned encoder, or the
    frozen encoder's (L, B, T, D) features."""

    def __init__(self, encoder, batch_size: int = 4, frozen: bool = False):
        super().__init__()
        first, second = SENTENCES, SENTENCES[1:] + SENTENCES[:1]
        inputs = (
            [*encoder.embed_layers(first), *encoder.embed_layers(second)]
            if frozen
            else [*encoder.encode(first), *encoder.encode(second)]
        )
        self.tensors = (*inputs, torch.tensor([0, 1] * 4), torch.arange(8))
        self.frozen, self.batch_size = frozen, batch_size

    def collate(self, indices: list[int]) -> tuple:
        index = torch.tensor(indices)
        return tuple(t[:, index] if self.frozen and t.dim() == 4 else t[index] for t in self.tensors)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(range(8), batch_size=self.batch_size, collate_fn=self.collate)

    val_dataloader = train_dataloader


def trainer(root, epochs: int, callbacks=()) -> pl.Trainer:
    return pl.Trainer(
        max_epochs=epochs,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=bool(callbacks),
        callbacks=list(callbacks),
        accelerator="cpu",
        devices=1,
        default_root_dir=root,
        num_sanity_val_steps=0,
    )


def classifier(checkpoint, finetune: str, random: bool = False) -> LitPairClassifier:
    encoder = load_encoder(checkpoint)
    if random:
        encoder = random_encoder(encoder, seed=5)
    return LitPairClassifier(encoder, finetune=finetune, standardize=False, **HEAD)  # toy batches: no feature store


class RecordGradients(pl.Callback):
    """Which encoder groups received a gradient, per epoch."""

    def __init__(self):
        self.reached: dict[int, set[int]] = {}

    def on_after_backward(self, trainer, pl_module):
        groups = pl_module.encoder.parameter_groups()
        reached = {
            index
            for index, group in enumerate(groups)
            if any(p.grad is not None and p.grad.abs().sum() > 0 for p in group)
        }
        self.reached.setdefault(trainer.current_epoch, set()).update(reached)


def test_full_fine_tuning_trains_every_encoder_group(checkpoint, tmp_path):
    pl.seed_everything(0, verbose=False)
    model = classifier(checkpoint, "full")
    before = {name: p.detach().clone() for name, p in model.encoder.model.named_parameters()}
    recorder = RecordGradients()
    trainer(tmp_path, 1, [recorder]).fit(model, datamodule=Pairs(model.encoder))
    groups = len(model.encoder.parameter_groups())
    assert recorder.reached[0] == set(range(groups))
    changed = {name for name, p in model.encoder.model.named_parameters() if not torch.equal(p, before[name])}
    for group in model.encoder.parameter_groups():  # every group moved (the biLM's unused softmax aside)
        names = {name for name, p in model.encoder.model.named_parameters() if any(p is q for q in group)}
        assert names & changed, names
    assert any(key.startswith("classifier.encoder_model.") for key in model.state_dict())  # checkpointed with the head


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
    groups = len(model.encoder.parameter_groups())  # embedding, layer 1, layer 2
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
    assert [group["name"] for group in groups] == ["encoder-0", "encoder-1", "encoder-2", "head", "mix"]
    assert groups[-1]["initial_lr"] == model.hparams.mix_learning_rate  # the learned mix: a rate of its own
    base = [group["initial_lr"] for group in groups[:-1]]
    assert base[-1] == pytest.approx(HEAD["learning_rate"])
    for lower, upper in zip(base, base[1:]):
        assert upper / lower == pytest.approx(2.6)
    assert fit.optimizers[0].defaults["fused"]  # one AdamW kernel per step, as in pretraining


def test_the_frozen_heads_optimizer_is_the_fused_adamw_over_the_head_only(checkpoint):
    model = classifier(checkpoint, "frozen")
    optimizer = model.configure_optimizers()
    assert optimizer.defaults["fused"]
    assert {id(p) for group in optimizer.param_groups for p in group["params"]} == {
        id(p) for p in model.classifier.head_parameters()
    }


@pytest.mark.parametrize(
    "step, expected", [(0, 1 / 32), (5, (1 + 0.5 * 31) / 32), (10, 1.0), (55, (1 + 0.5 * 31) / 32), (100, 1 / 32)]
)
def test_slanted_triangular_equals_its_closed_form(step, expected):
    # T = 100 steps, cut_frac 0.1 → cut = 10; ratio 32 (Howard & Ruder 2018, eq. 3)
    assert slanted_triangular(step, 100, 0.1, 32) == pytest.approx(expected)


def test_the_schedule_drives_the_optimizer_per_step(checkpoint, tmp_path):
    model = classifier(checkpoint, "full")
    rates = []

    class Rates(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_index):
            rates.append(next(group["lr"] for group in trainer.optimizers[0].param_groups if group["name"] == "head"))

    trainer(tmp_path, 5, [Rates()]).fit(model, datamodule=Pairs(model.encoder))
    total = len(rates)  # 5 epochs × 2 batches
    expected = [HEAD["learning_rate"] * slanted_triangular(step, total, 0.1, 32) for step in range(total)]
    assert rates == pytest.approx(expected)
    assert math.isclose(max(rates), HEAD["learning_rate"])


@pytest.mark.parametrize("finetune, random", [("full", False), ("frozen", False), ("frozen", True), ("full", True)])
def test_a_finetune_checkpoint_reloads_alone_and_reproduces_its_predictions(checkpoint, tmp_path, finetune, random):
    pl.seed_everything(0, verbose=False)
    model = classifier(checkpoint, finetune, random=random)
    data = Pairs(model.encoder, frozen=finetune == "frozen")
    saving = ModelCheckpoint(dirpath=tmp_path, filename="best")
    trainer(tmp_path, 2, [saving]).fit(model, datamodule=data)
    model.load_state_dict(torch.load(saving.best_model_path, weights_only=True)["state_dict"])
    expected, _ = model.predictions(data.train_dataloader())

    reloaded = load_classifier(saving.best_model_path)
    assert reloaded.encoder.fingerprint == model.encoder.fingerprint
    assert reloaded.encoder.random_seed == model.encoder.random_seed
    again, _ = reloaded.predictions(data.train_dataloader())
    assert torch.equal(again, expected)


def test_a_checkpoint_of_another_classifier_version_is_refused_in_one_line(checkpoint, tmp_path):
    model = classifier(checkpoint, "frozen")
    saving = ModelCheckpoint(dirpath=tmp_path, filename="best")
    trainer(tmp_path, 1, [saving]).fit(model, datamodule=Pairs(model.encoder, frozen=True))
    saved = torch.load(saving.best_model_path, weights_only=True)
    saved["state_dict"] = {key.removeprefix("classifier."): value for key, value in saved["state_dict"].items()}
    torch.save(saved, tmp_path / "other.ckpt")
    with pytest.raises(
        UserError,
        match=rf"^{re.escape(str(tmp_path / 'other.ckpt'))}: a finetune checkpoint this version cannot "
        r"rebuild \((TypeError|RuntimeError): [^\n]*\); fine-tune again with this version$",
    ):
        load_classifier(tmp_path / "other.ckpt")


def test_finetune_record_names_the_resolved_encoder_never_latest(checkpoint):
    model = classifier(checkpoint, "frozen")
    record = model.encoder.record()
    assert record["source"] == str(checkpoint) and record["family"] == checkpoint.stem
    twin = classifier(checkpoint, "frozen", random=True).encoder.record()
    assert twin["source"] == "random" and twin["copies"] == str(checkpoint) and twin["random_seed"] == 5


def test_unknown_finetune_mode_is_one_line(checkpoint):
    with pytest.raises(ValueError, match=r"^finetune=partial: choose one of frozen, full, gradual$"):
        classifier(checkpoint, "partial")


# ── GPT's own classifier: both orders, the auxiliary LM loss ─────────────────────────────────


def joint_batch(encoder, first: list[str], second: list[str]) -> tuple:
    ab = [joint_ids(encoder, a, b) for a, b in zip(first, second)]
    ba = [joint_ids(encoder, b, a) for a, b in zip(first, second)]
    pad = torch.nn.utils.rnn.pad_sequence
    return JointPair(
        pad(ab, batch_first=True),
        torch.tensor([len(x) for x in ab]),
        pad(ba, batch_first=True),
        torch.tensor([len(x) for x in ba]),
    )


def test_gpt_classifier_reads_both_orders_so_swapping_the_sentences_changes_nothing(gpt_checkpoint):
    model = LitPairClassifier(load_encoder(gpt_checkpoint), finetune="full", head="cls", dropout=0.0).eval()
    assert model.input_kind == "joint" and model.mix is None
    first, second = SENTENCES[:4], SENTENCES[4:]
    logits = model(joint_batch(model.encoder, first, second))
    swapped = model(joint_batch(model.encoder, second, first))
    torch.testing.assert_close(logits, swapped, rtol=0, atol=1e-6)
    one_order = model.head.linear(
        model.encoder.model.hidden_states(*joint_batch(model.encoder, first, second)[:2])[
            torch.arange(4), joint_batch(model.encoder, first, second)[1] - 1
        ]
    )
    assert not torch.allclose(logits, one_order)  # the sum of both orders, not one


@pytest.mark.parametrize("lm_weight", [0.0, 0.5])
def test_gpt_loss_is_the_classifier_loss_plus_lambda_times_the_lm_loss(gpt_checkpoint, lm_weight):
    torch.manual_seed(0)
    model = LitPairClassifier(
        load_encoder(gpt_checkpoint), finetune="full", head="cls", dropout=0.0, lm_weight=lm_weight
    ).eval()
    model.log = lambda *args, **kwargs: None
    inputs = joint_batch(model.encoder, SENTENCES[:4], SENTENCES[4:])
    labels = torch.tensor([0, 1, 1, 0])
    loss = model.training_step((*inputs, labels, torch.arange(4)), 0)
    classifier_loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    lm = [model.encoder.model(ids, lengths) for ids, lengths in (inputs[:2], inputs[2:])]
    lm_loss = sum(sums["nll_forward"] for sums in lm) / sum(sums["count"] for sums in lm)
    if lm_weight == 0.0:
        assert torch.equal(loss, classifier_loss)
    else:
        torch.testing.assert_close(loss, classifier_loss + lm_weight * lm_loss)


def test_the_joint_classifier_needs_a_joint_pair_input_fine_tuned(gpt_checkpoint, save_encoder, tmp_path):
    with pytest.raises(
        ValueError,
        match=r"^head=cls: .*needs an encoder that takes a joint pair input and "
        r"finetune=full",
    ):
        LitPairClassifier(load_encoder(gpt_checkpoint), finetune="frozen", head="cls")
    elmo, _ = save_encoder("elmo", tmp_path)
    with pytest.raises(ValueError, match=r"this is elmo, full"):
        LitPairClassifier(load_encoder(elmo), finetune="full", head="cls")
