"""A benchmark worker loads each encoder once: inside ``reuse_between_cells`` the same checkpoint
(or run) gives the same frozen encoder and a random twin is drawn once per seed; a fine-tuned run
gets weights of its own; outside, every run loads afresh."""

from __future__ import annotations

import torch

import downstream.run.encoder_reuse as encoder_reuse
from downstream.run.cli import pair_classifier, resolve_encoder
from harness.training.worker_reuse import reuse_between_cells


def counting_loads(monkeypatch) -> list[str]:
    loads = []
    original = encoder_reuse.load_encoder

    def counted(source):
        loads.append(source)
        return original(source)

    monkeypatch.setattr(encoder_reuse, "load_encoder", counted)
    monkeypatch.setattr(encoder_reuse, "_LOADED", encoder_reuse.OrderedDict())
    return loads


def test_a_worker_loads_a_checkpoint_once_and_draws_each_twin_once(tmp_path, save_encoder, monkeypatch):
    path, _ = save_encoder("elmo", tmp_path)
    loads = counting_loads(monkeypatch)
    with reuse_between_cells():
        first, again = resolve_encoder(str(path), None, 0), resolve_encoder(str(path), None, 1)
        twin, same_twin = resolve_encoder("random", str(path), 3), resolve_encoder("random", str(path), 3)
        other_twin = resolve_encoder("random", str(path), 4)
    assert first is again and twin is same_twin and other_twin is not twin
    assert len(loads) == 1
    assert twin.random_seed == 3 and other_twin.random_seed == 4 and twin.fingerprint != other_twin.fingerprint
    fresh = resolve_encoder("random", str(path), 3)  # outside: drawn again, the same weights
    assert fresh is not twin and fresh.fingerprint == twin.fingerprint
    for (name, kept), (_, drawn) in zip(twin.model.state_dict().items(), fresh.model.state_dict().items()):
        assert torch.equal(kept, drawn), name
    assert resolve_encoder(str(path), None, 0) is not first and len(loads) == 3


def test_a_rewritten_checkpoint_is_loaded_again(tmp_path, save_encoder, monkeypatch):
    path, _ = save_encoder("elmo", tmp_path)
    loads = counting_loads(monkeypatch)
    with reuse_between_cells():
        first = resolve_encoder(str(path), None, 0)
        path.write_bytes(path.read_bytes())  # another file at the same path (new inode or time)
        second = resolve_encoder(str(path), None, 0)
    assert second is not first and len(loads) == 2


def test_fine_tuning_trains_a_copy_never_the_kept_encoder(tmp_path, save_encoder, monkeypatch):
    path, _ = save_encoder("elmo", tmp_path)
    counting_loads(monkeypatch)
    with reuse_between_cells():
        frozen = pair_classifier(str(path), finetune="frozen")
        tuned = pair_classifier(str(path), finetune="full")
        kept = resolve_encoder(str(path), None, 0)
    assert frozen.encoder is kept and tuned.encoder is not kept
    assert tuned.encoder.model is not kept.model and tuned.encoder.fingerprint == kept.fingerprint
    before = next(kept.model.parameters()).clone()
    with torch.no_grad():
        next(tuned.encoder.model.parameters()).add_(1.0)  # what a training step does to the copy
    assert torch.equal(next(kept.model.parameters()), before)
    assert all(not p.requires_grad for p in kept.model.parameters())  # still frozen


def test_a_seeded_head_starts_alike_whether_its_encoder_was_loaded_or_kept(tmp_path, save_encoder, monkeypatch):
    """Loading draws nothing from the global random stream: a worker's later cell starts its head
    as a fresh process would (before, building the encoder's model moved the stream on)."""
    path, _ = save_encoder("elmo", tmp_path)
    loads = counting_loads(monkeypatch)
    states = []
    with reuse_between_cells():
        for _ in range(2):  # the first loads the encoder, the second reuses it
            torch.manual_seed(7)
            states.append(pair_classifier(str(path), head="pool-mlp").state_dict())
    assert len(loads) == 1 and states[0].keys() == states[1].keys()
    for name, first in states[0].items():
        assert torch.equal(first, states[1][name]), name
