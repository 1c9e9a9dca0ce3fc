"""The biLM's own correctness properties on a tiny float64 model (each half's causality and padding
invariance: test_model_properties.py, for every family)."""

import math

import pytest
import torch

from pretrain.models.bilm import BiLM, BiLMConfig, padding_mask, reverse_within_lengths

VOCAB, HIDDEN = 50, 8


def make_bilm(seed=0, num_layers=3, **options) -> BiLM:
    torch.manual_seed(seed)
    options = {"hidden_size": HIDDEN, "num_layers": num_layers, "dropout": 0.0, **options}
    return BiLM(BiLMConfig(VOCAB, **options)).double().eval()


def random_ids(generator, lengths, steps=None, low=1):
    """(B, T) ids in [low, VOCAB) at real positions, PAD (0) after each length."""
    steps = steps or max(lengths)
    ids = torch.randint(low, VOCAB, (len(lengths), steps), generator=generator)
    return ids * padding_mask(torch.tensor(lengths), steps)


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(1234)


def test_layer_zero_is_the_embedding_twice(generator):
    model = make_bilm()
    lengths = torch.tensor([5, 3])
    ids = random_ids(generator, lengths.tolist())
    with torch.no_grad():
        layers = model.layer_outputs(ids, lengths)  # (L, B, T, D)
        embedded = model.embedding(ids) * padding_mask(lengths, ids.shape[1])[..., None]
    assert layers.shape == (model.num_layers + 1, 2, 5, 2 * HIDDEN)
    assert torch.equal(layers[0, ..., :HIDDEN], layers[0, ..., HIDDEN:])
    assert torch.equal(layers[0, ..., :HIDDEN], embedded)


def test_loss_matches_a_hand_computation(generator):
    model = make_bilm(num_layers=2)
    ids = random_ids(generator, [5])
    with torch.no_grad():
        sums = model(ids, torch.tensor([5]))
        _, forward, backward = model.directional_states(ids, torch.tensor([5]))
        forward_logp = torch.log_softmax(model.softmax(forward[-1][0]), -1)  # (T, V)
        backward_logp = torch.log_softmax(model.softmax(backward[-1][0]), -1)
    tokens = ids[0].tolist()
    expected_forward = -sum(forward_logp[t, tokens[t + 1]] for t in range(4))
    expected_backward = -sum(backward_logp[t, tokens[t - 1]] for t in range(1, 5))
    torch.testing.assert_close(sums["nll_forward"], expected_forward)
    torch.testing.assert_close(sums["nll_backward"], expected_backward)


def test_reverse_within_lengths(generator):
    lengths = torch.tensor([5, 3, 1, 0])
    ids = torch.arange(1, 21).view(4, 5)  # (B, T)
    reversed_ids = reverse_within_lengths(ids, lengths)
    assert reversed_ids.tolist() == [[5, 4, 3, 2, 1], [8, 7, 6, 9, 10], [11, 12, 13, 14, 15], [16, 17, 18, 19, 20]]
    assert torch.equal(reverse_within_lengths(reversed_ids, lengths), ids)
    states = torch.randn(4, 5, 3, generator=generator)  # (B, T, H)
    reversed_states = reverse_within_lengths(states, lengths)
    for b, n in enumerate(lengths.tolist()):
        assert torch.equal(reversed_states[b, :n], states[b, :n].flip(0))
        assert torch.equal(reversed_states[b, n:], states[b, n:])
    assert torch.equal(reverse_within_lengths(reversed_states, lengths), states)


# --- softmax variants ------------------------------------------------------------------------------


@pytest.mark.parametrize("softmax", ["full", "adaptive"])
def test_softmax_kinds(generator, softmax):
    size = 16  # the adaptive softmax's second tail cluster projects to size / 4² dimensions: one, not none
    model = make_bilm(softmax=softmax, adaptive_cutoffs=(10, 30), hidden_size=size)
    lengths = torch.tensor([6, 4])
    ids = random_ids(generator, lengths.tolist())
    sums = model(ids, lengths)
    for key in ("nll_forward", "nll_backward"):
        assert torch.isfinite(sums[key]) and sums[key] > 0
    mean = (sums["nll_forward"] + sums["nll_backward"]) / (2 * sums["count"])
    assert mean.item() < 2 * math.log(VOCAB)  # untrained: near uniform
    with torch.no_grad():
        log_probabilities = model.log_probabilities(torch.randn(7, size, dtype=torch.float64, generator=generator))
    assert log_probabilities.shape == (7, VOCAB)
    torch.testing.assert_close(log_probabilities.exp().sum(-1), torch.ones(7, dtype=torch.float64))
    # token_nll agrees with log_probabilities
    hidden = torch.randn(5, size, dtype=torch.float64, generator=generator)
    targets = torch.tensor([0, 7, 15, 35, 49])
    with torch.no_grad():
        torch.testing.assert_close(
            model.token_nll(hidden, targets), -model.log_probabilities(hidden)[torch.arange(5), targets]
        )
    forward, backward = model.predict(ids, lengths)
    assert forward.shape == backward.shape == ids.shape


def test_adaptive_cutoffs_are_clipped_to_the_vocabulary():
    model = make_bilm(softmax="adaptive")  # default cutoffs (2000, 8000) exceed VOCAB
    assert all(0 < c < VOCAB for c in model.softmax.cutoffs[:-1])


def test_tie_weights_shares_the_parameter():
    model = make_bilm(tie_weights=True)
    assert model.softmax.weight is model.embedding.weight
    assert (
        sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in make_bilm().parameters()) - VOCAB * HIDDEN
    )
    with pytest.raises(ValueError):
        BiLM(BiLMConfig(VOCAB, HIDDEN, softmax="adaptive", tie_weights=True))
    with pytest.raises(ValueError):
        BiLM(BiLMConfig(VOCAB, HIDDEN, softmax="sparse"))


def test_projection_when_cell_is_larger(generator):
    model = make_bilm(num_layers=2, cell_size=3 * HIDDEN)
    lengths = torch.tensor([4, 2])
    with torch.no_grad():
        layers = model.layer_outputs(random_ids(generator, lengths.tolist()), lengths)
    assert layers.shape == (3, 2, 4, 2 * HIDDEN)
    assert model.forward_stack.layers[0].proj_size == HIDDEN


# --- it can learn ----------------------------------------------------------------------------------


def test_overfits_a_tiny_batch():
    """Four sentences that share no prefix after <S> nor suffix before </S>: every prediction is
    determined except the first word (forward) and the last word (backward), 4-way each, so the
    best mean NLL is log(4) / predictions-per-sentence."""
    torch.manual_seed(0)
    sentences = [
        [2, 10, 11, 12, 13, 14, 15, 3],
        [2, 20, 21, 22, 23, 24, 25, 3],
        [2, 30, 31, 32, 33, 34, 35, 3],
        [2, 40, 41, 42, 43, 44, 45, 3],
    ]
    ids, lengths = torch.tensor(sentences), torch.tensor([8] * 4)
    ids[3, 6:] = 0  # one shorter sentence, padded
    ids[3, 6] = 3
    lengths[3] = 7
    model = BiLM(BiLMConfig(VOCAB, hidden_size=16, num_layers=2, dropout=0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
    for _ in range(100):
        sums = model(ids, lengths)
        loss = (sums["nll_forward"] + sums["nll_backward"]) / (2 * sums["count"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        sums = model(ids, lengths)
    predictions = int(sums["count"])
    floor = math.log(4) * 4 / predictions  # per direction: one 4-way choice per sentence
    assert sums["nll_forward"].item() / predictions < floor + 0.05
    assert sums["nll_backward"].item() / predictions < floor + 0.05
    forward, backward = model.predict(ids, lengths)
    for b, n in enumerate(lengths.tolist()):
        assert forward[b, 1 : n - 1].tolist() == ids[b, 2:n].tolist()  # after the first word
        assert backward[b, 1 : n - 1].tolist() == ids[b, 0 : n - 2].tolist()  # before the last word
