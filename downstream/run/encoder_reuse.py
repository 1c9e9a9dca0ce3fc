"""The encoders a benchmark worker loads once (``harness.training.worker_reuse``): a pretrain run's (or a
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

from harness.training.worker_reuse import reusing
from pretrain.encoders.loading import load_encoder, random_encoder, resolve
from pretrain.encoders.protocol import Encoder
from pretrain.encoders.references import EncoderReference, Source

KEPT = 4  # encoders a worker keeps (a pretrained one and the twins of the seeds it runs, ~35 MB each for ELMo)
_LOADED: OrderedDict[tuple, Encoder] = OrderedDict()


def identity(source: Source) -> tuple | None:
    """What ``source`` names, as a key: its pretrain run (``latest`` and ``models:/`` resolved to
    their run each time, so a newer run is never missed), or the checkpoint file's path, inode,
    size and modification time; None for anything else (not kept)."""
    resolved = resolve(source)
    if resolved.kind == "run":
        return ("run", resolved.target)
    path = Path(resolved.target)
    if resolved.kind != "path" or not path.is_file():
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


def loaded(reference: EncoderReference) -> Encoder:
    """``load_encoder(reference)``, once per worker: the trained encoder once per key of
    :func:`identity`, a random-init twin once per (encoder, seed). ``reference`` is parsed where the
    text entered (the CLI, a benchmark's cell)."""
    if not reusing():
        return load_encoder(reference)
    key = identity(reference.source)
    trained = EncoderReference(Source("run", key[1]) if key and key[0] == "run" else reference.source)
    if not reference.random:
        return _kept(key, lambda: load_encoder(trained))
    seed = reference.seed or 0
    return _kept(
        None if key is None else ("random", seed, *key),
        lambda: random_encoder(_kept(key, lambda: load_encoder(trained)), seed),
    )


def own_copy(encoder: Encoder) -> Encoder:
    """The same encoder with weights of its own (what a fine-tuned run trains)."""
    clone = copy.copy(encoder)
    clone.model = copy.deepcopy(encoder.model)
    return clone
