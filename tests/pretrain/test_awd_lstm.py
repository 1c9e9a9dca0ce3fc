"""The AWD-LSTM's own correctness properties, on tiny float64 models: the loss and AR/TAR against
hand computations, and each dropout doing what it says (no look-ahead and padding invariance:
test_model_properties.py, for every family)."""

import math

import pytest
import torch

from pretrain.models.awd_lstm import AWDLSTM, AWDLSTMConfig, LockedDropout
from pretrain.models.bilm import padding_mask

VOCAB, EMBEDDING, HIDDEN = 50, 6, 10
NO_DROPOUT = {
    "dropout_output": 0.0,
    "dropout_hidden": 0.0,
    "dropout_input": 0.0,
    "dropout_embedding": 0.0,
    "weight_drop": 0.0,
}


def make_model(seed=0, num_layers=3, **options) -> AWDLSTM:
    torch.manual_seed(seed)
    options = {"embedding_size": EMBEDDING, "hidden_size": HIDDEN, "num_layers": num_layers, **options}
    return AWDLSTM(AWDLSTMConfig(VOCAB, **options)).double().eval()


def random_ids(generator, lengths, steps=None):
    """(B, T) ids in [1, VOCAB) at real positions, PAD (0) after each length."""
    steps = steps or max(lengths)
    ids = torch.randint(1, VOCAB, (len(lengths), steps), generator=generator)
    return ids * padding_mask(torch.tensor(lengths), steps)


def hand_lstm(inputs, weight_ih, weight_hh, bias_ih, bias_hh):
    """One sequence (T, in) through the LSTM equations, gates in PyTorch's order i, f, g, o."""
    hidden = cell = inputs.new_zeros(weight_hh.shape[1])
    outputs = []
    for x in inputs:
        gates = weight_ih @ x + bias_ih + weight_hh @ hidden + bias_hh
        input_gate, forget_gate, candidate, output_gate = gates.chunk(4)
        cell = torch.sigmoid(forget_gate) * cell + torch.sigmoid(input_gate) * torch.tanh(candidate)
        hidden = torch.sigmoid(output_gate) * torch.tanh(cell)
        outputs.append(hidden)
    return torch.stack(outputs)  # (T, H)


def capture(module, what="output"):
    """Record a module's first input or its output at every call."""
    seen = []
    if what == "input":
        handle = module.register_forward_pre_hook(lambda m, inputs: seen.append(inputs[0].detach().clone()))
    else:
        handle = module.register_forward_hook(lambda m, inputs, output: seen.append(output.detach().clone()))
    return seen, handle


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(1234)


# --- features: widths -----------------------------------------------------------------------------


@pytest.mark.parametrize("embedding_size, hidden_size", [(EMBEDDING, HIDDEN), (12, 5)])
def test_layers_are_zero_padded_to_the_widest(generator, embedding_size, hidden_size):
    model = make_model(embedding_size=embedding_size, hidden_size=hidden_size)
    lengths = torch.tensor([5, 3])
    ids = random_ids(generator, lengths.tolist())
    with torch.no_grad():
        layers = model.layer_outputs(ids, lengths)  # (L, B, T, D)
        embedded = model.embedding(ids) * padding_mask(lengths, 5)[..., None]  # (B, T, E)
    widest = max(embedding_size, hidden_size)
    assert model.feature_dim == widest and layers.shape == (4, 2, 5, widest)
    assert model.layer_widths == (embedding_size, hidden_size, hidden_size, embedding_size)
    assert torch.equal(layers[0, ..., :embedding_size], embedded)
    for layer, width in enumerate(model.layer_widths):
        assert layers[layer, 0, :5, :width].abs().min() > 0  # real features fill their width
        if width < widest:
            assert layers[layer, ..., width:].abs().max() == 0


# --- the loss --------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_layers", [1, 2])
def test_loss_matches_a_hand_computation(generator, num_layers):
    """Eval mode: the raw weights through the LSTM equations, the tied decoder, cross-entropy."""
    model = make_model(num_layers=num_layers)
    torch.nn.init.normal_(model.decoder.bias)  # make the bias matter
    ids = random_ids(generator, [5])
    with torch.no_grad():
        sums = model(ids, torch.tensor([5]))
        hidden = model.embedding.weight[ids[0]]  # (T, E)
        for block in model.lstms:
            lstm = block.lstm
            hidden = hand_lstm(hidden, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
        logits = hidden @ model.embedding.weight.T + model.decoder.bias  # (T, V)
        log_probabilities = logits - logits.logsumexp(-1, keepdim=True)
    tokens = ids[0].tolist()
    expected = -sum(log_probabilities[t, tokens[t + 1]] for t in range(4))
    torch.testing.assert_close(sums["nll_forward"], expected)
    assert int(sums["count"]) == 4 and sums["regularization"] == 0


# --- weight-drop ------------------------------------------------------------------------------------


def test_weight_drop_draws_a_fresh_mask_each_training_forward(generator):
    model = make_model(num_layers=2, **{**NO_DROPOUT, "weight_drop": 0.5})
    block = model.lstms[0]
    raw = block.lstm.weight_hh_l0
    lengths = torch.tensor([5, 4])
    ids = random_ids(generator, lengths.tolist())
    with torch.no_grad():
        before = model.layer_outputs(ids, lengths)
    used, handle = [], block.lstm.register_forward_hook(lambda m, i, o: used.append((m.weight_hh_l0, o[0])))
    model.train()
    model(ids, lengths)["nll_forward"].backward()
    model(ids, lengths)
    model.eval()
    with torch.no_grad():
        after = [model.layer_outputs(ids, lengths) for _ in range(2)]
    handle.remove()
    (first, first_output), (second, _), (evaluated, _), _ = used
    for dropped in (first, second):
        kept = dropped != 0
        assert 0.35 < 1 - kept.double().mean() < 0.65  # p = 0.5 of the entries
        torch.testing.assert_close(dropped[kept], raw.detach()[kept] * 2)  # scaled by 1 / (1 - p)
    assert not torch.equal(first != 0, second != 0)  # a fresh mask each forward
    # the LSTM really ran on the dropped matrix, and gradients reach the raw one through it only
    lstm = block.lstm
    with torch.no_grad():
        expected = hand_lstm(model.embedding.weight[ids[0]], lstm.weight_ih_l0, first, lstm.bias_ih_l0, lstm.bias_hh_l0)
    torch.testing.assert_close(first_output[0], expected)
    assert raw.grad[first == 0].abs().max() == 0 and raw.grad[first != 0].abs().max() > 0
    # eval: the raw parameter itself, deterministic, the same as before training forwards
    assert (
        evaluated is raw
        and isinstance(raw, torch.nn.Parameter)
        and dict(lstm.named_parameters())["weight_hh_l0"] is raw
    )
    assert torch.equal(after[0], after[1]) and torch.equal(after[0], before)


# --- locked and embedding dropout ------------------------------------------------------------------


def test_locked_dropout_shares_its_mask_over_time():
    torch.manual_seed(0)
    dropout = LockedDropout(0.3).train()
    inputs = torch.rand(64, 9, 20, dtype=torch.float64) + 0.5  # (B, T, D), never zero
    outputs = dropout(inputs)  # (B, T, D)
    dropped = outputs == 0
    assert torch.equal(dropped, dropped[:, :1].expand_as(dropped))  # the same units at every t
    assert len({tuple(row.tolist()) for row in dropped[:, 0]}) == 64  # a mask per sequence
    assert 0.25 < dropped.double().mean() < 0.35
    torch.testing.assert_close(outputs[~dropped], inputs[~dropped] / 0.7)
    assert torch.equal(dropout.eval()(inputs), inputs)


@pytest.mark.parametrize("which", ["dropout_input", "dropout_hidden", "dropout_output"])
def test_each_locked_dropout_is_wired_in(generator, which):
    model = make_model(**{**NO_DROPOUT, which: 0.5}).train()
    where = {
        "dropout_input": model.input_dropout,
        "dropout_hidden": model.hidden_dropouts[1],
        "dropout_output": model.output_dropout,
    }[which]
    inputs, in_handle = capture(where, "input")
    outputs, out_handle = capture(where, "output")
    lengths = torch.tensor([8, 8, 8, 8])
    model(random_ids(generator, lengths.tolist()), lengths)
    in_handle.remove()
    out_handle.remove()
    assert where.p == 0.5 and len(inputs) == 1
    factors = outputs[0] / inputs[0]  # (B, T, width)
    assert set(factors.unique().tolist()) == {0.0, 2.0}
    assert torch.equal(factors, factors[:, :1].expand_as(factors))
    assert not torch.equal(factors[0], factors[1])


def test_embedding_dropout_drops_whole_words():
    model = make_model(**{**NO_DROPOUT, "dropout_embedding": 0.5}).train()
    ids = torch.arange(1, 41).view(4, 10).repeat(2, 1)  # (8, 10): every word twice, in rows b and b + 4
    lengths = torch.full((8,), 10)
    seen, handle = capture(model.lstms[0], "input")
    model(ids, lengths)
    handle.remove()
    factors = seen[0] / model.embedding.weight.detach()[ids]  # (B, T, E)
    assert torch.equal(factors, factors[..., :1].expand_as(factors))  # a whole word vector at once
    assert set(factors.unique().tolist()) == {0.0, 2.0}
    assert torch.equal(factors[:4], factors[4:])  # a word is dropped at all its occurrences


def test_drop_mult_scales_every_dropout(generator):
    model = make_model(drop_mult=0.5)
    assert model.output_dropout.p == 0.05 and model.input_dropout.p == 0.125
    assert [d.p for d in model.hidden_dropouts] == [0.075, 0.075]
    assert [block.weight_drop for block in model.lstms] == [0.1] * 3 and model.dropout_embedding == 0.01
    # drop_mult = 0 switches every dropout off: training features equal eval features
    silent = make_model(drop_mult=0.0)
    lengths = torch.tensor([6, 4])
    ids = random_ids(generator, lengths.tolist())
    with torch.no_grad():
        assert torch.equal(silent.train().layer_outputs(ids, lengths), silent.eval().layer_outputs(ids, lengths))
        assert not torch.equal(make_model().train().layer_outputs(ids, lengths), silent.layer_outputs(ids, lengths))
    with pytest.raises(ValueError, match="weight_drop"):
        make_model(weight_drop=0.5, drop_mult=2.0)


# --- AR / TAR --------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha, beta", [(2.0, 0.0), (0.0, 1.0), (2.0, 1.0)])
def test_regularization_matches_a_hand_computation(generator, alpha, beta):
    model = make_model(alpha=alpha, beta=beta, **{**NO_DROPOUT, "dropout_output": 0.5}).train()
    lengths = [5, 2, 4, 1]
    ids = random_ids(generator, lengths)
    undropped, in_handle = capture(model.output_dropout, "input")
    dropped, out_handle = capture(model.output_dropout, "output")
    regularization = model(ids, torch.tensor(lengths))["regularization"]
    in_handle.remove()
    out_handle.remove()
    top, top_dropped = undropped[0], dropped[0]  # (B, T, E)
    assert not torch.equal(top, top_dropped)
    squares = [top_dropped[b, t].pow(2).sum() for b, n in enumerate(lengths) for t in range(n)]
    steps = [(top[b, t + 1] - top[b, t]).pow(2).sum() for b, n in enumerate(lengths) for t in range(n - 1)]
    expected = alpha * sum(squares) / (len(squares) * EMBEDDING) + beta * sum(steps) / (len(steps) * EMBEDDING)
    torch.testing.assert_close(regularization, expected)
    assert regularization > 0
    with torch.no_grad():
        assert model.eval()(ids, torch.tensor(lengths))["regularization"] == 0
    off = make_model(alpha=0.0, beta=0.0).train()
    assert off(ids, torch.tensor(lengths))["regularization"] == 0


# --- parameters ------------------------------------------------------------------------------------


@pytest.mark.parametrize("tie_weights", [True, False])
def test_parameter_groups_cover_every_parameter_once_from_input_to_top(generator, tie_weights):
    model = make_model(tie_weights=tie_weights)
    groups = model.parameter_groups()
    flat = [id(parameter) for group in groups for parameter in group]
    assert len(groups) == model.num_layers + 1
    assert len(flat) == len(set(flat)) and set(flat) == {id(p) for p in model.parameters()}
    lengths = torch.tensor([6, 4])
    ids = random_ids(generator, lengths.tolist())
    with torch.no_grad():
        base = model.layer_outputs(ids, lengths)
        for index, group in enumerate(groups):  # group k moves feature layer k and above only
            saved = [parameter.clone() for parameter in group]
            for parameter in group:
                parameter.add_(0.1)
            moved = (model.layer_outputs(ids, lengths) - base).abs().amax(dim=(1, 2, 3))  # (L,)
            for parameter, value in zip(group, saved):
                parameter.copy_(value)
            assert (moved[:index] == 0).all() and (moved[index:] > 0).all(), (index, moved)


def test_tied_weights_are_shared():
    tied, untied = make_model(), make_model(tie_weights=False)
    assert tied.decoder.weight is tied.embedding.weight
    assert untied.decoder.weight is not untied.embedding.weight
    assert sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters()) == VOCAB * EMBEDDING
    ids, lengths = torch.tensor([[1, 2, 3]]), torch.tensor([3])
    tied(ids, lengths)["nll_forward"].backward()
    assert tied.embedding.weight.grad[[4, 7]].abs().sum(-1).min() > 0  # words not in the input: decoder gradient


def test_constructor_rejects_impossible_configs():
    with pytest.raises(ValueError, match="num_layers"):
        AWDLSTM(AWDLSTMConfig(VOCAB, num_layers=0))
    with pytest.raises(ValueError, match="alpha"):
        AWDLSTM(AWDLSTMConfig(VOCAB, alpha=-1.0))
    assert AWDLSTM.objective.directions == ("forward",)


# --- sampling and learning -------------------------------------------------------------------------


def test_log_probabilities_and_predict(generator):
    model = make_model()
    hidden = torch.randn(7, EMBEDDING, dtype=torch.float64, generator=generator)
    targets = torch.tensor([0, 7, 15, 35, 49, 3, 2])
    with torch.no_grad():
        log_probabilities = model.log_probabilities(hidden)
        torch.testing.assert_close(log_probabilities.exp().sum(-1), torch.ones(7, dtype=torch.float64))
        torch.testing.assert_close(model.token_nll(hidden, targets), -log_probabilities[torch.arange(7), targets])
        lengths = torch.tensor([6, 4])
        ids = random_ids(generator, lengths.tolist())
        (forward,) = model.predict(ids, lengths)
        top = model.layer_outputs(ids, lengths)[-1, ..., :EMBEDDING]  # (B, T, E)
    assert forward.shape == ids.shape
    assert torch.equal(forward[0], model.log_probabilities(top[0]).argmax(-1))


def test_overfits_a_tiny_batch():
    """Four sentences that share no word after <S>: every next word is determined except the first
    (4-way), so the best mean NLL is log(4) / predictions-per-sentence. Default dropouts and AR/TAR."""
    torch.manual_seed(0)
    sentences = [
        [2, 10, 11, 12, 13, 14, 15, 3],
        [2, 20, 21, 22, 23, 24, 25, 3],
        [2, 30, 31, 32, 33, 34, 35, 3],
        [2, 40, 41, 42, 43, 44, 45, 0],
    ]
    ids, lengths = torch.tensor(sentences), torch.tensor([8, 8, 8, 7])
    ids[3, 6] = 3  # one shorter sentence, padded
    model = AWDLSTM(AWDLSTMConfig(VOCAB, embedding_size=16, hidden_size=32, num_layers=2))
    with torch.no_grad():
        untrained = model.eval()(ids, lengths)
    assert untrained["nll_forward"] / untrained["count"] > 0.9 * math.log(VOCAB)  # near uniform
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
    for _ in range(300):
        sums = model(ids, lengths)
        loss = sums["nll_forward"] / sums["count"] + sums["regularization"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        sums = model(ids, lengths)
    predictions = int(sums["count"])
    assert sums["nll_forward"].item() / predictions < math.log(4) * 4 / predictions + 0.1
    (forward,) = model.predict(ids, lengths)
    for b, n in enumerate(lengths.tolist()):
        assert forward[b, 1 : n - 1].tolist() == ids[b, 2:n].tolist()  # after the first word
