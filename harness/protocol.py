"""The protocol version: what a result's number depends on in the code, declared in one place.

A cell is identified by its settings, its data's content, its encoder's identity and this
version — not by a hash of the source files — so an edit to a report, the server, the UI, the
docs or the tests re-runs nothing, and a result computed on another machine or another commit is
reused when nothing that decides it changed.

The rule: a change that moves a number (a default, a formula, an order of operations, a library
upgrade that changes outputs) bumps the version of its concern here, on purpose. The golden tests
(``pytest -k golden``) pin each family's numbers and fail on such a change until the version is
bumped and the goldens regenerated (``make goldens``). A result of an older version is never
reused; one of a newer version is refused.
"""

from __future__ import annotations

import hashlib
import json

# One integer per concern; bump the one whose numbers a change moves.
PROTOCOL_VERSIONS = {
    "data": 1,  # readers, splits, fractions, tokenizers, vocabularies, corpus filtering
    "encoders": 2,  # families' models, pretraining loop and defaults, published-encoder loading
    # encoders 2: pretraining runs bf16-mixed by default where bf16 is native
    "heads": 3,  # features, standardisation, mixes, pair heads, fine-tuning, optimisers, schedules
    # heads 2: frozen transfers standardise by default (--model.standardize=auto)
    # heads 3: bf16-mixed by default where native; dev validated twice an epoch at every fraction
    "evaluation": 1,  # metrics, predictions, baselines, linear probes
}


def protocol_version(versions: dict[str, int] | None = None) -> str:
    """The version as text, e.g. ``data1.encoders1.heads1.evaluation1`` (concerns in a fixed order)."""
    versions = PROTOCOL_VERSIONS if versions is None else versions
    return ".".join(f"{concern}{versions[concern]}" for concern in PROTOCOL_VERSIONS)


def parse_protocol_version(text: str) -> dict[str, int]:
    """``protocol_version``'s text back to its integers. Raises ValueError on any other text."""
    parts = text.split(".")
    if len(parts) != len(PROTOCOL_VERSIONS):
        raise ValueError(f"not a protocol version: {text!r}")
    versions = {}
    for concern, part in zip(PROTOCOL_VERSIONS, parts):
        number = part[len(concern) :]
        if not part.startswith(concern) or not number.isdigit():
            raise ValueError(f"not a protocol version: {text!r}")
        versions[concern] = int(number)
    return versions


def newer_concerns(text: str) -> list[str]:
    """The concerns in which ``text`` is ahead of this code's version (made by a newer harness)."""
    versions = parse_protocol_version(text)
    return [concern for concern, number in versions.items() if number > PROTOCOL_VERSIONS[concern]]


def settings_hash(spec: dict, version: str | None = None) -> str:
    """What defines a result: sha256 of its settings ``spec`` (JSON; callers put the data's content
    digest in it) and the protocol ``version`` (this code's when None), 20 hex digits. A change to
    any of them is another cell or stage, never a stale reuse, while an edit that moves no number
    (a report, the server, a docstring) re-runs nothing. A results file is checked under its own version."""
    version = protocol_version() if version is None else version
    return hashlib.sha256(json.dumps({**spec, "protocol": version}, sort_keys=True).encode()).hexdigest()[:20]
