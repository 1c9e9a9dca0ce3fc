"""The checks of a benchmark matrix's single values (counts, lists, names, fractions, rates), each
a ``UserError`` of one line naming the file and key, raised before any work starts."""

from __future__ import annotations

import re

from harness.errors import UserError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")  # a name, never a path: no separators, no leading dot


def is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def name_of(value, where: str, key: str) -> str:
    """A name used in run names and folders: letters, digits, ``. _ + -``, not starting with a dot."""
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise UserError(
            f"{where}: `{key}` must be a name (letters, digits, . _ + -; no path separators, at most "
            f"100 characters), not {str(value)[:40]!r}"
        )
    return value


def text_of(value, where: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: `{key}` must be text, not {str(value)[:40]!r}")
    return value


def list_of(value, where: str, key: str, kind=str, example: str = "[...]") -> tuple:
    """A YAML list whose items are all ``kind`` (a scalar given alone is refused, not iterated)."""
    if not isinstance(value, list) or not all(isinstance(item, kind) and not isinstance(item, bool) for item in value):
        raise UserError(f"{where}: `{key}` must be a list, e.g. {key}: {example}")
    return tuple(value)


def seeds_of(value, where: str, key: str) -> tuple[int, ...]:
    """``seeds: N`` (seeds 0..N-1, N >= 1) or an explicit non-empty list of distinct seeds >= 0."""
    if is_count(value):
        return tuple(range(value))
    if (
        isinstance(value, list)
        and value
        and all(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in value)
        and len(set(value)) == len(value)
    ):
        return tuple(value)
    raise UserError(
        f"{where}: `{key}` must be a count of at least 1 (seeds 0..N-1) or a list of distinct seeds "
        f">= 0, not {str(value)[:40]!r}"
    )


def fractions_of(value, where: str, key: str) -> tuple[float, ...]:
    """Labelled fractions: a non-empty list of numbers in (0, 1]."""
    if not (isinstance(value, list) and value and all(is_number(item) and 0 < item <= 1 for item in value)):
        raise UserError(f"{where}: `{key}` must be a list of fractions in (0, 1], e.g. {key}: [0.1, 0.25, 1.0]")
    return tuple(float(item) for item in value)


def rates_of(value, where: str, key: str) -> tuple[float, ...]:
    if not (isinstance(value, list) and all(is_number(rate) and rate > 0 for rate in value)):
        raise UserError(f"{where}: `{key}` must be a list of learning rates > 0, e.g. [3.0e-4, 1.0e-3, 3.0e-3]")
    return tuple(value)


def flag_of(value, where: str, key: str, meaning: str) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"{where}: `{key}` must be true or false ({meaning})")
    return value


def mapping_of(value, where: str, key: str, example: str) -> dict:
    if not isinstance(value, dict):
        raise UserError(f"{where}: `{key}` must be a mapping, e.g. {example}")
    return value


def known_keys(mapping: dict, known, where: str, section: str = "") -> None:
    unknown = set(mapping) - set(known)
    if unknown:
        raise UserError(
            f"{where}: unknown {section + ' ' if section else ''}key(s) {sorted(map(str, unknown))}; "
            f"known: {sorted(known)}"
        )
