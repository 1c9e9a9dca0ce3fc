"""Process tuning: a block runs with the intra-op thread count asked for, and the previous count
comes back afterwards, also when the block raises; a CLI leaves new memory unfilled under
deterministic algorithms, which changes no family's training by a bit."""

import pytest
import torch

from harness.cli.precision import cpu_bf16_supported
from harness.cli.runtime import intra_op_threads
from harness.cli.tracked_cli import run_cli
from pretrain.lit_awd_lstm import LitAWDLSTM
from pretrain.lit_bilm import LitBiLM
from pretrain.lit_gpt import LitGPT

VOCAB = 40


def test_the_thread_count_applies_inside_and_is_restored_after_an_error():
    before = torch.get_num_threads()
    inside = 2 if before == 1 else 1
    with intra_op_threads(inside):
        assert torch.get_num_threads() == inside
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), intra_op_threads(inside):
        raise ValueError("a failing cell")
    assert torch.get_num_threads() == before


def test_a_cli_leaves_new_memory_unfilled(monkeypatch):
    """``run_cli`` turns torch's fill of new memory off before the CLI builds its trainer (whose
    ``deterministic`` would otherwise fill every new tensor)."""
    monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
    seen = []

    class RecordingCLI:
        def __init__(self, args):
            seen.append(torch.utils.deterministic.fill_uninitialized_memory)

    assert run_cli(RecordingCLI, []) == 0
    assert seen == [False]


def language_model(family: str) -> torch.nn.Module:
    """A tiny language model of ``family`` with dropout on, so that its masks are drawn too."""
    torch.manual_seed(0)
    if family == "elmo":
        return LitBiLM(vocab_size=VOCAB, hidden_size=32, num_layers=2, dropout=0.1).model
    if family == "ulmfit":
        return LitAWDLSTM(vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_layers=2, drop_mult=0.5).model
    return LitGPT(vocab_size=VOCAB, num_layers=2, hidden_size=32, num_heads=2, max_positions=32).model


def trained_weights(family: str, autocast: bool) -> list[torch.Tensor]:
    """Every weight after three AdamW steps on random padded batches, deterministic algorithms on."""
    model = language_model(family).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    generator = torch.Generator().manual_seed(1)
    torch.manual_seed(2)
    for _ in range(3):
        lengths = torch.randint(3, 12, (6,), generator=generator)
        ids = torch.randint(1, VOCAB, (6, int(lengths.max())), generator=generator)
        ids[torch.arange(ids.size(1))[None] >= lengths[:, None]] = 0
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            losses = model(ids, lengths)
        loss = sum(value for name, value in losses.items() if name.startswith("nll"))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("family", ["elmo", "ulmfit", "gpt"])
@pytest.mark.parametrize("autocast", [False, True], ids=["float32", "bf16"])
def test_no_family_reads_memory_it_did_not_write(family, autocast, monkeypatch):
    """Filled or not, new memory gives the same training bit for bit: nothing reads memory before
    writing it (the fused softmax's packed buffer included), so the fill can stay off."""
    if autocast and not cpu_bf16_supported():
        pytest.skip("this CPU has no native bf16")
    monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
    torch.use_deterministic_algorithms(True)
    try:
        filled = trained_weights(family, autocast)
        torch.utils.deterministic.fill_uninitialized_memory = False
        unfilled = trained_weights(family, autocast)
    finally:
        torch.use_deterministic_algorithms(False)
    assert all(torch.equal(a, b) for a, b in zip(filled, unfilled, strict=True))
