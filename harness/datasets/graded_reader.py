"""A graded task's score as a pair file writes it: a plain decimal number (``4.5``, ``3``, ``2.40``,
``1e0``) within the task's range, read as a float. Anything else — text, an empty field, ``nan``,
``inf``, a number outside the range — is refused in one line naming the file and line, since a
score the metrics cannot use would otherwise surface later as a NaN correlation."""

from __future__ import annotations

import re

from harness.errors import UserError

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_score(text: str, score_range: tuple[float, float], where: str, column: int) -> float:
    """The score ``text`` (a field of ``where`` = ``file:line``, in 0-based ``column``) as a float
    within ``score_range`` = (low, high), ends included; a one-line UserError otherwise."""
    low, high = score_range
    value = text.strip()
    if not _DECIMAL.fullmatch(value):
        shown = repr(value[:40]) if value else "an empty field"
        raise UserError(
            f"{where}: score {shown} (column {column}) is not a number; "
            f"a graded pair needs a score in [{low:g}, {high:g}]"
        )
    score = float(value)
    if not low <= score <= high:
        raise UserError(f"{where}: score {value} (column {column}) is outside the task's range [{low:g}, {high:g}]")
    return score
