"""Every head and every family on a graded target, in process, a few steps each: the loss is the
squared error on [0, 1] (against numpy), the frozen heads and the scalar mix train while the frozen
encoder gets no gradient, and full / gradual fine-tuning of each family (GPT's ``cls`` with its
auxiliary LM loss, ULMFiT's concat-pool, ELMo, a published BERT) and the random-init twin go
through the same code and log ``dev_pearson`` / ``dev_spearman``."""

from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from scipy.stats import pearsonr, spearmanr

from downstream.data.pair_datamodule import PairDataModule, strata, subsample
from downstream.model.heads import HEADS
from downstream.model.targets import GradedTarget, target_of
from downstream.run.classifier_loading import load_classifier
from downstream.run.evaluation import predictions_frame, split_metrics
from downstream.run.lit_pair import LitPairClassifier, linked_task
from harness.datasets.registry import DATASETS, load_pair_data
from harness.datasets.task import CLASSES
from pretrain.encoders.loading import load_encoder, random_encoder
from tests.downstream.toy_graded_task import NAME, TASK, TOY_OVERLAP

GRADED = {"target": "graded", "score_range": TASK.score_range}
MAX_PAIRS = 48


@pytest.fixture(autouse=True)
def toy_registered(monkeypatch):
    """The toy task among the data sets for each test here, and for no other."""
    monkeypatch.setitem(DATASETS, NAME, TOY_OVERLAP)


@pytest.fixture(scope="module")
def encoders(save_encoder, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("encoders")
    return {family: save_encoder(family, folder)[0] for family in ("elmo", "ulmfit", "gpt")}


def fit(encoder, root: Path, steps: int = 3, **settings) -> tuple[LitPairClassifier, pl.Trainer]:
    """A few steps on the toy graded task, one validation at the end."""
    pl.seed_everything(0, verbose=False)
    model = LitPairClassifier(encoder, **{"hidden_size": 8, "learning_rate": 1e-2, **GRADED, **settings})
    data = PairDataModule(dataset=NAME, batch_size=8, max_pairs=MAX_PAIRS, cache_dir="none", subsample_seed=0)
    data.attach(model.encoder, model.input_kind)
    trainer = pl.Trainer(
        max_steps=steps,
        limit_val_batches=2,
        val_check_interval=steps,
        check_val_every_n_epoch=None,  # by steps: a gradual fit's 8 steps cross an epoch
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        num_sanity_val_steps=0,
    )
    trainer.fit(model, datamodule=data)
    return model, trainer


def logged_graded_metrics(trainer: pl.Trainer) -> None:
    metrics = trainer.callback_metrics
    assert {"dev_pearson", "dev_spearman", "train_loss"} <= set(metrics), sorted(metrics)
    assert not {"dev_acc", "dev_f1", "train_acc"} & set(metrics)
    assert torch.isfinite(metrics["train_loss"])


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in module.named_parameters()}


# ── the loss and the readout ─────────────────────────────────────────────────────────────────


def test_the_graded_loss_is_squared_error_against_the_score_mapped_onto_zero_one():
    target = target_of(TASK)
    assert isinstance(target, GradedTarget)
    outputs = torch.tensor([[0.1], [0.9], [0.5], [1.2]])
    scores = torch.tensor([0.0, 5.0, 3.5, 2.0])
    expected = np.mean((outputs[:, 0].numpy() - TASK.scaled(scores.numpy())) ** 2)
    assert float(target(outputs, scores)) == pytest.approx(expected, rel=1e-6)
    assert torch.equal(target.readout(outputs), outputs[:, 0])
    assert TASK.unscaled(target.readout(outputs).numpy()) == pytest.approx([0.5, 4.5, 2.5, 6.0])


def test_the_hyper_parameters_name_the_task():
    assert linked_task("classes", None) is CLASSES
    assert linked_task("graded", (0.0, 5.0)) == TASK
    with pytest.raises(ValueError, match="target=graded"):
        linked_task("graded", None)


def test_a_graded_fraction_is_stratified_over_score_quintiles():
    train = load_pair_data(dataset=NAME).train
    kept = subsample(train, 0.25, seed=3, task=TASK)
    assert len(kept) == 60 and set(map(id, kept)) <= set(map(id, train))
    by_pair = dict(zip(map(id, train), strata(train, TASK)))
    assert np.bincount([by_pair[id(pair)] for pair in kept]).tolist() == [12] * 5


# ── frozen heads and the scalar mix ──────────────────────────────────────────────────────────


@pytest.mark.parametrize("head", sorted(HEADS))
def test_each_frozen_head_trains_on_a_graded_target_and_the_encoder_gets_no_gradient(encoders, head, tmp_path):
    encoder = load_encoder(encoders["elmo"])
    before = snapshot(encoder.model)
    model, trainer = fit(encoder, tmp_path, head=head, standardize=False)
    assert model.classifier.head(*[torch.zeros(2, 3, encoder.dim), torch.ones(2, 3, dtype=torch.bool)] * 2).shape == (
        2,
        1,
    )
    logged_graded_metrics(trainer)
    for name, parameter in encoder.model.named_parameters():
        assert parameter.grad is None and not parameter.requires_grad, name
        assert torch.equal(parameter, before[name]), name


def test_the_scalar_mix_learns_on_a_graded_target(encoders, tmp_path):
    encoder = load_encoder(encoders["elmo"])
    model = LitPairClassifier(encoder, mix="scalar", head="pool-mlp", hidden_size=8, **GRADED)
    weights = model.mix.weights().detach().clone()
    model, trainer = fit(encoder, tmp_path, mix="scalar", head="pool-mlp")
    logged_graded_metrics(trainer)
    assert not torch.allclose(model.mix.weights().detach(), weights)
    assert all(p.grad is None for p in encoder.model.parameters())


# ── fine-tuning of each family, and the twin ─────────────────────────────────────────────────


FINETUNED = [
    ("elmo", {"finetune": "full", "head": "pool-mlp", "mix": "scalar"}),
    ("elmo", {"finetune": "gradual", "head": "attn", "mix": "scalar"}),
    ("ulmfit", {"finetune": "gradual", "head": "concat-pool", "mix": "top"}),
    ("gpt", {"finetune": "full", "head": "cls", "lm_weight": 0.5}),
]


@pytest.mark.parametrize("family, settings", FINETUNED, ids=lambda value: value if isinstance(value, str) else "")
@pytest.mark.parametrize("twin", [False, True], ids=["pretrained", "twin"])
def test_fine_tuning_each_family_on_a_graded_target(encoders, family, settings, twin, tmp_path):
    encoder = load_encoder(encoders[family])
    if twin:
        encoder = random_encoder(encoder, seed=5)
    before = snapshot(encoder.model)
    steps = 8 if settings["finetune"] == "gradual" else 4  # gradual: the encoder's top group from epoch 2 (6 steps)
    model, trainer = fit(encoder, tmp_path, steps=steps, **settings)
    logged_graded_metrics(trainer)
    if settings.get("lm_weight"):
        assert "train_lm_loss" in trainer.callback_metrics
    changed = [
        name for name, p in model.classifier.encoder_model.named_parameters() if not torch.equal(p, before[name])
    ]
    assert changed, "the encoder did not train"


def test_a_published_encoders_joint_classifier_on_a_graded_target(tiny_bert, tmp_path):
    model, trainer = fit(load_encoder(f"hf:{tiny_bert}"), tmp_path, finetune="full", head="cls")
    logged_graded_metrics(trainer)
    assert model.classifier.head.linear.out_features == 1


# ── evaluation: the predictions file and its metrics ─────────────────────────────────────────


def test_a_graded_predictions_file_holds_scores_on_the_tasks_scale_and_scipys_metrics(encoders, tmp_path):
    model, _ = fit(load_encoder(encoders["elmo"]), tmp_path, head="pool-mlp")
    data = PairDataModule(dataset=NAME, batch_size=8, max_pairs=MAX_PAIRS, cache_dir="none")
    data.attach(model.encoder, model.input_kind)
    data.setup()
    values, indices = model.predictions(data.loader("test"))
    assert values.shape == (MAX_PAIRS,)
    frame = predictions_frame(data.pair_data, data.pairs["test"], values, indices)
    assert list(frame.columns) == ["id", "label", "pred", "sentence1", "sentence2"]
    assert frame["id"].tolist() == [pair.ids[0] for pair in data.pairs["test"]]
    assert frame["label"].tolist() == [pair.label for pair in data.pairs["test"]]
    order = torch.argsort(indices)
    assert frame["pred"].to_numpy() == pytest.approx(5 * values[order].double().numpy())
    metrics = split_metrics(frame, "test", data.pair_data)
    assert metrics["test_pearson"] == pytest.approx(pearsonr(frame["pred"], frame["label"]).statistic, abs=1e-12)
    assert metrics["test_spearman"] == pytest.approx(spearmanr(frame["pred"], frame["label"]).statistic, abs=1e-12)


def test_a_graded_checkpoint_reloads_weights_only_with_its_task(encoders, tmp_path):
    model, trainer = fit(load_encoder(encoders["elmo"]), tmp_path, head="pool-mlp")
    path = tmp_path / "graded.ckpt"
    trainer.save_checkpoint(path)
    reloaded = load_classifier(path)
    assert reloaded.task == TASK and reloaded.hparams.target == "graded"
    data = PairDataModule(dataset=NAME, batch_size=8, max_pairs=MAX_PAIRS, cache_dir="none")
    data.attach(model.encoder, model.input_kind)
    data.setup()
    assert torch.equal(reloaded.predictions(data.loader("dev"))[0], model.eval().predictions(data.loader("dev"))[0])
