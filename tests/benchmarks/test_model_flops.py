"""Model FLOPs of a training step, per family, against hand counts: real tokens only (padding
never adds work), every matmul of the family, ×3 for forward + backward; a fine-tuning step's
encoder features (no softmax) or joint orders (with the LM softmax), or a frozen head's work."""

import pytest
import torch

from benchmarks.speed.model_flops import finetune_step_flops, step_flops
from downstream.model.pair_classifier import FeaturePair, JointPair, PairClassifier, TokenPair
from pretrain.encoders.protocol import Encoder
from pretrain.families import family_of
from pretrain.models.awd_lstm import AWDLSTM, AWDLSTMConfig
from pretrain.models.bilm import BiLM, BiLMConfig
from pretrain.models.transformer import TransformerConfig, TransformerLM

IDS = torch.tensor([[1, 5, 6, 7, 2], [1, 8, 2, 0, 0]])
LENGTHS = torch.tensor([5, 3])  # 8 real tokens; 4 + 2 = 6 next-token predictions
ELMO, ULMFIT, GPT = family_of("elmo"), family_of("ulmfit"), family_of("gpt")


def test_bilm_counts_both_stacks_and_the_shared_softmax_for_both_directions():
    model = BiLM(BiLMConfig(10, hidden_size=4, num_layers=2, dropout=0.0))
    lstm = 2 * 4 * 4 * (4 + 4)  # gates of one layer, one token: 2 · 4H · (input + hidden)
    forward = 2 * 2 * lstm * 8 + 2 * 4 * 10 * (6 + 6)  # 2 directions × 2 layers; softmax for 12 predictions
    assert step_flops(ELMO, model, IDS, LENGTHS) == 3 * forward


def test_bilm_projection_and_adaptive_softmax():
    model = BiLM(
        BiLMConfig(
            40, hidden_size=4, cell_size=8, num_layers=1, dropout=0.0, softmax="adaptive", adaptive_cutoffs=(20,)
        )
    )
    ids = torch.tensor([[1, 25, 30, 2]])  # targets forward 25, 30, 2; backward 1, 25, 30
    lstm = 2 * 4 * 8 * (4 + 4) + 2 * 8 * 4  # gates + the projection
    head = 2 * 4 * (20 + 1) * 6  # shortlist + one cluster logit, every prediction
    tail_members = 4  # 25, 30, 25, 30 fall in the tail
    tail = 2 * tail_members * (4 * 1 + 1 * 20)  # 4 → 4/4 = 1 projection, then the 20 tail words
    assert step_flops(ELMO, model, ids, torch.tensor([4])) == 3 * (2 * lstm * 4 + head + tail)


def test_awd_lstm_counts_every_layer_width_and_the_decoder():
    model = AWDLSTM(AWDLSTMConfig(10, embedding_size=4, hidden_size=6, num_layers=2))
    layers = 2 * 4 * 6 * (4 + 6) + 2 * 4 * 4 * (6 + 4)  # 4 → 6, then 6 → 4
    assert step_flops(ULMFIT, model, IDS, LENGTHS) == 3 * (layers * 8 + 2 * 4 * 10 * 6)


def test_transformer_counts_projections_causal_attention_and_the_tied_softmax():
    model = TransformerLM(TransformerConfig(10, num_layers=2, hidden_size=8, num_heads=2, ffn_size=16, max_positions=8))
    projections = 2 * 8 * 24 + 2 * 8 * 8 + 2 * 2 * 8 * 16  # qkv, output, MLP in and out; one token
    pairs = 5 * 6 // 2 + 3 * 4 // 2  # causal (query, key) pairs: 15 + 6
    forward = 2 * (projections * 8 + 2 * 2 * 8 * pairs) + 2 * 8 * 10 * 6
    assert step_flops(GPT, model, IDS, LENGTHS) == 3 * forward


@pytest.mark.parametrize("name", ["elmo", "ulmfit", "gpt"])
def test_padding_adds_no_flops(name):
    family = family_of(name)
    model = family.build(family.tiny_config(10))
    padded = torch.nn.functional.pad(IDS, (0, 7))  # (B, 12): the same sentences, more padding
    assert step_flops(family, model, padded, LENGTHS) == step_flops(family, model, IDS, LENGTHS) > 0


@pytest.mark.parametrize(
    "name, softmax", [("elmo", 2 * 4 * 10 * 12), ("ulmfit", 2 * 4 * 10 * 6), ("gpt", 2 * 8 * 10 * 6)]
)
def test_features_alone_leave_out_exactly_the_softmax(name, softmax):
    """``softmax=False``: the per-layer features a fine-tuned encoder computes, without the LM's output layer."""
    family = family_of(name)
    model = {
        "elmo": BiLM(BiLMConfig(10, hidden_size=4, num_layers=2, dropout=0.0)),
        "ulmfit": AWDLSTM(AWDLSTMConfig(10, embedding_size=4, hidden_size=6, num_layers=2)),
        "gpt": TransformerLM(
            TransformerConfig(10, num_layers=2, hidden_size=8, num_heads=2, ffn_size=16, max_positions=8)
        ),
    }[name]
    assert family.flops(model, IDS, LENGTHS) - family.flops(model, IDS, LENGTHS, softmax=False) == softmax


def tiny_encoder(name):
    family = family_of(name)
    torch.manual_seed(0)
    model = family.build(family.tiny_config(10))
    return Encoder(model, None, name, {}, fingerprint="tiny", source="random", random_seed=0)


def test_a_fine_tuning_step_counts_both_sentences_features_or_both_orders_with_the_lm_softmax():
    elmo, gpt = tiny_encoder("elmo"), tiny_encoder("gpt")
    full = PairClassifier(elmo, head="pool-mlp", finetune="full")
    features = [
        ELMO.flops(elmo.model, ids, lengths, softmax=False)
        for ids, lengths in ((IDS, LENGTHS), (IDS[:, :4], LENGTHS - 1))
    ]
    expected = 3 * sum(features)
    assert finetune_step_flops(full, TokenPair(IDS, LENGTHS, IDS[:, :4], LENGTHS - 1)) == expected
    joint = JointPair(IDS, LENGTHS, IDS, LENGTHS)
    with_lm = PairClassifier(gpt, head="cls", finetune="full", lm_weight=0.5)
    without_lm = PairClassifier(gpt, head="cls", finetune="full", lm_weight=0.0)
    assert finetune_step_flops(with_lm, joint) == 3 * 2 * GPT.flops(gpt.model, IDS, LENGTHS)
    assert finetune_step_flops(without_lm, joint) == 3 * 2 * GPT.flops(gpt.model, IDS, LENGTHS, softmax=False)


def test_a_frozen_attn_step_counts_the_heads_products_and_its_bilstm_on_real_tokens():
    encoder = tiny_encoder("elmo")
    dim, hidden, batch, steps = encoder.dim, 6, 2, 5
    classifier = PairClassifier(encoder, head="attn", finetune="frozen", hidden_size=hidden)
    mask_a = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])  # 8 real tokens
    mask_b = torch.tensor([[True] * 4 + [False], [True] * 2 + [False] * 3])  # 6 real tokens
    features = FeaturePair(
        torch.zeros(encoder.num_layers, batch, steps, dim),
        mask_a,
        torch.zeros(encoder.num_layers, batch, steps, dim),
        mask_b,
    )
    rows = 2 * batch * steps  # both sentences as one batch, padded to the longer
    products = (
        2 * rows * dim * hidden
        + 3 * 2 * batch * steps * steps * hidden  # projection; scores, attend ×2
        + 2 * rows * 4 * hidden * hidden
        + 2 * batch * (8 * hidden * hidden + hidden * 2)
    )  # compose; MLP
    recurrence = 2 * 2 * 4 * hidden * (hidden + hidden) * (8 + 6)  # both directions, real tokens only
    assert finetune_step_flops(classifier, features) == 3 * (products + recurrence)
