"""The encoders a benchmark worker loads once (``harness.worker_reuse``): a pretrain run's (or a
checkpoint file's) encoder is read, checked against its digest and built once per worker, a
random-init twin drawn once per (encoder, seed); outside a worker, every call loads afresh.

Frozen runs share the loaded encoder (nothing of a frozen encoder changes during a run);
fine-tuned runs get their own copy of its weights (:func:`own_copy`).
"""

from __future__ import annotations

import copy
import os
from collections import OrderedDict
from pathlib import Path

from harness.worker_reuse import reusing
from pretrain.encoder import Encoder
from pretrain.runs import load_encoder, random_encoder, resolve_run_id

KEPT = 4  # encoders a worker keeps (a pretrained one and the twins of the seeds it runs, ~35 MB each for ELMo)
_LOADED: OrderedDict[tuple, Encoder] = OrderedDict()


def identity(source: str) -> tuple | None:
    """What the encoder ``source`` names, as a key: its pretrain run, or the checkpoint file's
    path, inode, size and modification time; None for anything else (not kept)."""
    run_id = resolve_run_id(source)
    if run_id:
        return ("run", run_id)
    path = Path(source)
    if not path.is_file():
        return None
    status = os.stat(path)
    return ("file", str(path.resolve()), status.st_ino, status.st_size, status.st_mtime_ns)


def _kept(key: tuple | None, make) -> Encoder:
    if key is None:
        return make()
    if key not in _LOADED:
        _LOADED[key] = make()
        while len(_LOADED) > KEPT:
            _LOADED.popitem(last=False)
    _LOADED.move_to_end(key)
    return _LOADED[key]


def loaded(source: str) -> Encoder:
    """``load_encoder(source)``, once per worker; ``latest`` and ``models:/`` are resolved to their
    run each time (so a newer run is never missed), then loaded as ``runs:/<id>``."""
    if not reusing():
        return load_encoder(source)
    key = identity(source)
    return _kept(key, lambda: load_encoder(f"runs:/{key[1]}" if key and key[0] == "run" else source))


def random_twin(like_source: str, seed: int) -> Encoder:
    """``random_encoder(load_encoder(like_source), seed)``, once per worker and seed."""
    if not reusing():
        return random_encoder(load_encoder(like_source), seed)
    key = identity(like_source)
    return _kept(None if key is None else ("random", seed, *key), lambda: random_encoder(loaded(like_source), seed))


def own_copy(encoder: Encoder) -> Encoder:
    """The same encoder with weights of its own (what a fine-tuned run trains)."""
    clone = copy.copy(encoder)
    clone.model = copy.deepcopy(encoder.model)
    return clone
