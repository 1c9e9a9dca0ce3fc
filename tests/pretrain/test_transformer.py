"""The transformer LM's own correctness properties on a tiny float64 model (causality and padding
invariance: test_model_properties.py, for every family)."""

import math

import pytest
import torch

from pretrain.models.bilm import padding_mask
from pretrain.models.transformer import TransformerConfig, TransformerLM

VOCAB, HIDDEN, HEADS = 50, 8, 2


def make_model(seed=0, num_layers=3, **options) -> TransformerLM:
    torch.manual_seed(seed)
    options = {
        "num_layers": num_layers,
        "hidden_size": HIDDEN,
        "num_heads": HEADS,
        "max_positions": 16,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        **options,
    }
    return TransformerLM(TransformerConfig(VOCAB, **options)).double().eval()


def random_ids(generator, lengths, steps=None):
    """(B, T) ids in [1, VOCAB) at real positions, pad (0) after each length."""
    steps = steps or max(lengths)
    ids = torch.randint(1, VOCAB, (len(lengths), steps), generator=generator)
    return ids * padding_mask(torch.tensor(lengths), steps)


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(1234)


def test_loss_matches_a_hand_computation(generator):
    model = make_model(num_layers=2)
    ids = random_ids(generator, [5, 3])
    lengths = torch.tensor([5, 3])
    with torch.no_grad():
        sums = model(ids, lengths)
        top = model.layer_outputs(ids, lengths)[-1]  # (B, T, H)
        scores = top @ model.token_embedding.weight.T  # (B, T, V): the tied softmax
        log_probabilities = scores - scores.exp().sum(-1, keepdim=True).log()
    expected = -sum(log_probabilities[b, t, ids[b, t + 1]] for b, n in enumerate([5, 3]) for t in range(n - 1))
    torch.testing.assert_close(sums["nll_forward"], expected)
    assert int(sums["count"]) == 4 + 2
    hidden = torch.randn(5, HIDDEN, dtype=torch.float64, generator=generator)
    targets = torch.tensor([0, 7, 15, 35, 49])
    with torch.no_grad():
        torch.testing.assert_close(
            model.token_nll(hidden, targets), -model.log_probabilities(hidden)[torch.arange(5), targets]
        )


# --- structure ------------------------------------------------------------------------------------


def test_hidden_states_are_the_top_layer_whatever_the_pad_ids(generator):
    model = make_model()
    lengths = torch.tensor([9, 5, 2])
    batch = random_ids(generator, lengths.tolist())  # (3, 9)
    beyond = ~padding_mask(lengths, batch.shape[1])  # (B, T)
    noisy = batch.clone()
    noisy[beyond] = torch.randint(1, VOCAB, noisy.shape, generator=generator)[beyond]
    with torch.no_grad():
        top = model.layer_outputs(batch, lengths)[-1]  # (B, T, D)
        torch.testing.assert_close(model.hidden_states(noisy, lengths), top, rtol=0, atol=0)


def expected_parameters(vocab, layers, hidden, positions, ffn=None):
    """Closed form: tied embedding + positions + per block (QKV, output, MLP, two LayerNorms)."""
    ffn = ffn or 4 * hidden
    block = (
        (3 * hidden * hidden + 3 * hidden)
        + (hidden * hidden + hidden)
        + (hidden * ffn + ffn)
        + (ffn * hidden + hidden)
        + 4 * hidden
    )
    return vocab * hidden + positions * hidden + layers * block


def test_softmax_is_tied_to_the_embedding(generator):
    model = make_model(num_layers=2)
    assert sum(p.numel() for p in model.parameters()) == expected_parameters(VOCAB, 2, HIDDEN, 16)
    hidden = torch.randn(3, HIDDEN, dtype=torch.float64, generator=generator)
    model.token_nll(hidden, torch.tensor([4, 5, 6])).sum().backward()
    assert model.token_embedding.weight.grad[[4, 5, 6]].abs().sum() > 0  # the softmax trains the embedding
    with torch.no_grad():
        model.token_embedding.weight[9] += 1.0  # an embedding edit is a softmax edit
        torch.testing.assert_close(model.logits(hidden), hidden @ model.token_embedding.weight.T, rtol=0, atol=0)


@pytest.mark.parametrize(
    "name, options, parameters",
    [
        ("tiny", {"num_layers": 2, "hidden_size": 64, "num_heads": 2, "max_positions": 128}, None),
        ("cpu-default", {"num_layers": 6, "hidden_size": 384, "num_heads": 6, "max_positions": 256}, None),
        ("gpt-1", {"num_layers": 12, "hidden_size": 768, "num_heads": 12, "max_positions": 512}, 116.5e6),
    ],
)
def test_configurations_construct(name, options, parameters):
    vocab = 40478  # GPT-1's vocabulary (40k merges + bytes + specials)
    with torch.device("meta"):  # shapes only: no memory, no time
        model = TransformerLM(TransformerConfig(vocab, **options))
        lengths = torch.tensor([options["max_positions"], 3])
        layers = model.layer_outputs(torch.zeros(2, options["max_positions"], dtype=torch.long), lengths)
    assert layers.shape == (options["num_layers"] + 1, 2, options["max_positions"], options["hidden_size"])
    count = sum(p.numel() for p in model.parameters())
    assert count == expected_parameters(vocab, options["num_layers"], options["hidden_size"], options["max_positions"])
    if parameters:  # GPT-1 is reported as 117M parameters
        assert abs(count - parameters) / parameters < 0.01


def test_a_sequence_longer_than_the_position_table_is_refused(generator):
    model = make_model()  # max_positions 16
    with torch.no_grad():
        model(random_ids(generator, [16, 4]), torch.tensor([16, 4]))  # exactly the limit is fine
        with pytest.raises(ValueError, match="max_positions=16"):
            model(random_ids(generator, [17, 4]), torch.tensor([17, 4]))
        with pytest.raises(ValueError, match="max_positions=16"):
            model.layer_outputs(random_ids(generator, [20]), torch.tensor([20]))


def test_parameter_groups_cover_every_parameter_once_from_input_to_top():
    model = make_model(num_layers=3)
    groups = model.parameter_groups()
    assert len(groups) == model.num_layers + 1
    flat = [id(p) for group in groups for p in group]
    assert len(flat) == len(set(flat)) == len(list(model.parameters()))
    assert set(flat) == {id(p) for p in model.parameters()}
    assert {id(p) for p in groups[0]} == {id(model.token_embedding.weight), id(model.position_embedding.weight)}
    for depth, block in enumerate(model.blocks, start=1):
        assert {id(p) for p in groups[depth]} == {id(p) for p in block.parameters()}


def test_dropout_only_in_training(generator):
    model = make_model(attention_dropout=0.5, dropout=0.2)
    ids, lengths = random_ids(generator, [8, 5]), torch.tensor([8, 5])
    model.train()
    assert not torch.equal(model.layer_outputs(ids, lengths), model.layer_outputs(ids, lengths))
    model.eval()
    assert torch.equal(model.layer_outputs(ids, lengths), model.layer_outputs(ids, lengths))


def test_layer_outputs_are_differentiable(generator):
    model = make_model(num_layers=2)
    ids, lengths = random_ids(generator, [5, 3]), torch.tensor([5, 3])
    readout = torch.randn(HIDDEN, dtype=torch.float64, generator=generator)  # (D,)
    (model.layer_outputs(ids, lengths)[1] @ readout).sum().backward()
    assert model.blocks[0].attention.query_key_value.weight.grad.abs().sum() > 0
    untouched = model.blocks[1].mlp[0].weight.grad  # block 2 does not feed layer 1
    assert untouched is None or not untouched.any()


# --- it can learn ---------------------------------------------------------------------------------


def test_overfits_a_tiny_batch():
    """Four sentences that share no word after <s>: every prediction is determined except the
    first word (4-way), so the best mean NLL is log(4) / predictions-per-sentence."""
    torch.manual_seed(0)
    sentences = [
        [1, 10, 11, 12, 13, 14, 15, 2],
        [1, 20, 21, 22, 23, 24, 25, 2],
        [1, 30, 31, 32, 33, 34, 35, 2],
        [1, 40, 41, 42, 43, 44, 2, 0],
    ]
    ids, lengths = torch.tensor(sentences), torch.tensor([8, 8, 8, 7])
    model = TransformerLM(
        TransformerConfig(
            VOCAB, num_layers=2, hidden_size=32, num_heads=4, max_positions=8, dropout=0.0, attention_dropout=0.0
        )
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        sums = model(ids, lengths)
        optimizer.zero_grad()
        (sums["nll_forward"] / sums["count"]).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        sums = model(ids, lengths)
    predictions = int(sums["count"])
    assert sums["nll_forward"].item() / predictions < math.log(4) * 4 / predictions + 0.05
    predicted = model.predict(ids, lengths)  # (B, T)
    for b, n in enumerate(lengths.tolist()):
        assert predicted[b, 1 : n - 1].tolist() == ids[b, 2:n].tolist()  # after the first word


def test_attention_equals_an_explicit_causal_softmax(generator):
    """``scaled_dot_product_attention(is_causal=True)`` against attention written out: scores
    q·k/√d with future keys at -inf, softmax, weighted values, heads merged, output projection."""
    model = make_model()
    attention = model.blocks[0].attention
    hidden = torch.randn(2, 6, HIDDEN, dtype=torch.float64, generator=generator)  # (B, T, H)
    head_size = HIDDEN // HEADS
    query, key, value = attention.query_key_value(hidden).split(HIDDEN, dim=-1)  # (B, T, H) each

    def split(x):
        return x.view(2, 6, HEADS, head_size).transpose(1, 2)  # (B, heads, T, H / heads)

    scores = split(query) @ split(key).transpose(-1, -2) / math.sqrt(head_size)  # (B, heads, T, T)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)  # (T, T): key after query
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    merged = (weights @ split(value)).transpose(1, 2).reshape(2, 6, HIDDEN)  # (B, T, H)
    with torch.no_grad():
        torch.testing.assert_close(attention(hidden), attention.output(merged))
