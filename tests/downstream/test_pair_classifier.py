"""The pure pair classifier: its three named inputs give the same logits for the same pair, its
loss and parameter groups, refused settings as ValueErrors naming the argument, and that the torch-only modules import
nothing of the harness's user-facing layers."""

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from downstream.model.pair_classifier import FeaturePair, JointPair, PairClassifier, TokenPair
from downstream.run.lit_pair import LitPairClassifier
from pretrain.encoders.loading import load_encoder

FIRST = ["the cat sat on the mat .", "he said so .", "shares fell 3 percent on monday ."]
SECOND = ["a dog barked at the cat .", "she agreed to the plan .", "shares rose on monday ."]
HEAD = {"head": "pool-mlp", "hidden_size": 8, "dropout": 0.0}


@pytest.fixture(scope="module")
def elmo(tmp_path_factory, save_encoder):
    return save_encoder("elmo", tmp_path_factory.mktemp("elmo"))[0]


def test_features_and_tokens_are_the_same_pair_for_the_same_weights(elmo):
    encoder, again = load_encoder(elmo), load_encoder(elmo)  # (loading draws from the RNG)
    torch.manual_seed(0)
    frozen = PairClassifier(encoder, mix="scalar", finetune="frozen", **HEAD)
    torch.manual_seed(0)
    tuned = PairClassifier(again, mix="scalar", finetune="full", **HEAD).eval()
    assert (frozen.input_kind, tuned.input_kind) == ("features", "tokens")
    features = FeaturePair(*encoder.embed_layers(FIRST), *encoder.embed_layers(SECOND))
    tokens = TokenPair(*encoder.encode(FIRST), *encoder.encode(SECOND))
    assert frozen.inputs(*features) == features and isinstance(tuned.inputs(*tokens), TokenPair)
    torch.testing.assert_close(frozen(features).logits, tuned(tokens).logits.detach(), rtol=0, atol=1e-6)
    assert frozen(features).lm_loss is None
    with pytest.raises(ValueError, match="JointPair does not fit"):
        frozen(JointPair(*tokens))


def test_loss_and_groups(elmo):
    classifier = PairClassifier(load_encoder(elmo), mix="average", finetune="full", **HEAD)
    tokens = TokenPair(*classifier.encoder.encode(FIRST), *classifier.encoder.encode(SECOND))
    labels = torch.tensor([0, 1, 1])
    output = classifier(tokens)
    assert torch.equal(classifier.loss(output, labels), torch.nn.functional.cross_entropy(output.logits, labels))
    groups = classifier.optimizer_groups(1e-2, 2.0)
    assert [group["name"] for group in groups] == ["encoder-0", "encoder-1", "encoder-2", "head"]
    assert [group["lr"] for group in groups] == pytest.approx([1.25e-3, 2.5e-3, 5e-3, 1e-2])
    head = {id(p) for p in groups[-1]["params"]}
    assert head == {id(p) for p in classifier.head.parameters()}  # average: the mix learns nothing
    frozen = PairClassifier(load_encoder(elmo), mix="scalar", **HEAD)
    assert [group["name"] for group in frozen.optimizer_groups(1e-2, 2.0)] == ["head", "mix"]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"mix": "layer:7"}, r"^mix=layer:7: the encoder has layers 0\.\.2"),
        ({"mix": "mean"}, r"^mix=mean: unknown mix"),
        ({"head": "nope"}, r"^head=nope: unknown head; choose one of pool-mlp, .*, cls$"),
        ({"finetune": "partial"}, r"^finetune=partial: choose one of frozen, full, gradual$"),
        (
            {"head": "cls", "finetune": "full"},
            r"^head=cls: the joint pair classifier needs an encoder that takes a joint",
        ),
        ({"num_classes": 1}, r"^num_classes=1: "),
    ],
)
def test_refused_settings_name_the_argument(elmo, settings, message):
    with pytest.raises(ValueError, match=message):
        PairClassifier(load_encoder(elmo), **{**HEAD, **settings})


def test_torch_only_modules_import_no_user_facing_layer():
    """heads, mix, joint and the pair classifier raise ValueErrors; the CLI words them."""
    code = (
        "import sys, downstream.model.pair_classifier; "
        "print(' '.join(m for m in sys.modules if m.startswith(('harness.errors', 'pytorch_lightning', "
        "'lightning', 'mlflow', 'jsonargparse', 'pretrain'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_the_joint_head_follows_the_familys_capability_not_its_name(tmp_path, save_encoder, monkeypatch):
    import dataclasses

    from pretrain import families

    gpt = load_encoder(save_encoder("gpt", tmp_path)[0])
    assert PairClassifier(gpt, head="cls", finetune="full").input_kind == "joint"
    monkeypatch.setitem(families.FAMILIES, "gpt", dataclasses.replace(families.FAMILIES["gpt"], joint_pair_input=False))
    with pytest.raises(ValueError, match="^head=cls: the joint pair classifier needs an encoder that takes a joint"):
        PairClassifier(gpt, head="cls", finetune="full")


def toy_layers(generator: torch.Generator, batch: int = 32):
    """Pairs whose third layer (of L = 3) carries the label and whose first two are noise."""
    labels = torch.randint(0, 2, (batch,), generator=generator)
    signal = (2.0 * labels - 1).view(batch, 1, 1).expand(batch, 4, 8)  # (B, T, D)
    layers = []
    for _ in range(2):  # a and b
        noise = torch.randn(2, batch, 4, 8, generator=generator)  # (2, B, T, D)
        layers.append(torch.cat([noise, (signal + 0.1 * torch.randn(batch, 4, 8, generator=generator))[None]]))
    mask = torch.ones(batch, 4, dtype=torch.bool)
    return FeaturePair(layers[0], mask, layers[1], mask), labels


def trained_mix_weights(mix_learning_rate: float | None, steps: int = 60) -> torch.Tensor:
    torch.manual_seed(0)
    encoder = SimpleNamespace(num_layers=3, dim=8, family="toy", pair_input=None)
    classifier = PairClassifier(encoder, mix="scalar", **HEAD)
    optimizer = torch.optim.AdamW(classifier.optimizer_groups(1e-3, 2.6, mix_learning_rate), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        inputs, labels = toy_layers(generator)
        loss = classifier.loss(classifier(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return classifier.mix.weights().detach()


def test_the_scalar_mix_learns_at_its_own_rate_and_not_at_the_heads():
    learned = trained_mix_weights(0.1)
    assert learned[2] > 0.6 and learned.argmax() == 2  # uniform is 1/3: the signal's layer won
    at_head_rate = trained_mix_weights(None)  # the mix at the head's 1e-3, as before its own group
    assert (at_head_rate - 1 / 3).abs().max() < 0.03


def test_the_mix_has_a_group_of_its_own(elmo):
    classifier = PairClassifier(load_encoder(elmo), mix="scalar", finetune="full", **HEAD)
    groups = classifier.optimizer_groups(1e-2, 2.0, mix_learning_rate=0.1)
    assert [group["name"] for group in groups] == ["encoder-0", "encoder-1", "encoder-2", "head", "mix"]
    mix = groups[-1]
    assert (mix["lr"], mix["weight_decay"]) == (0.1, 0.0)
    assert {id(p) for p in mix["params"]} == {id(classifier.mix.layer_scalars), id(classifier.mix.gamma_scale)}
    assert not {id(p) for p in mix["params"]} & {id(p) for p in groups[-2]["params"]}
    model = LitPairClassifier(load_encoder(elmo), mix="scalar", mix_learning_rate=0.05, **HEAD)
    optimizer = model.configure_optimizers()
    assert [(group["name"], group["lr"]) for group in optimizer.param_groups] == [("head", 1e-3), ("mix", 0.05)]
    with pytest.raises(ValueError, match="^mix_learning_rate=0"):
        LitPairClassifier(load_encoder(elmo), mix="scalar", mix_learning_rate=0, **HEAD)


def test_a_dev_or_test_pass_skips_the_auxiliary_lm_loss(tmp_path, save_encoder, monkeypatch):
    """Outside training only the logits are read: ``LitPairClassifier.forward`` (the dev pass, the
    predictions) never runs GPT's softmax over the vocabulary, and its logits are those of the pass
    that does; a training step still adds the LM loss."""
    gpt = load_encoder(save_encoder("gpt", tmp_path)[0])
    lit = LitPairClassifier(gpt, head="cls", finetune="full", lm_weight=0.5).eval()
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([7, 5, 6])
    ids = torch.randint(3, len(gpt.tokenizer), (3, 7), generator=generator)
    ids[torch.arange(7)[None] >= lengths[:, None]] = 0
    inputs = JointPair(ids, lengths, ids.flip(0), lengths.flip(0))
    with torch.no_grad():
        full = lit.classifier(inputs)
    assert full.lm_loss is not None
    calls = []
    language_model = lit.encoder.model
    monkeypatch.setattr(language_model, "next_token_nll", lambda *a: calls.append(a) or {})
    with torch.no_grad():
        logits = lit(inputs)
    assert not calls
    torch.testing.assert_close(logits, full.logits, atol=0, rtol=0)
    monkeypatch.undo()
    lit.train()
    assert lit.classifier(inputs).lm_loss is not None
