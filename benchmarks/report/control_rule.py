"""The pre-registered control rule (``benchmarks.stats.controls``) as the report shows it: the
results table's ``control`` column, and the study rows' flags, notes and wording for a comparison
whose arms did not both learn (shown and named, never counted among the gaps that hold)."""

from __future__ import annotations

import pandas as pd

from benchmarks.stats.controls import CONTROL_OK_COLUMN, CONTROL_REASON_COLUMN, RULE_TEXT, control_failed


def control_cell(value) -> str:
    """The ``control`` column: "ok", "✗ failed" (the pre-registered rule), or — without a twin comparison."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "—"
    return "✗ failed" if control_failed(value) else "ok"


def control_fields(result: pd.Series) -> dict:
    """A study row's ``control_ok`` (True, False, or None without a twin comparison) and its reason."""
    ok = result.get(CONTROL_OK_COLUMN, None)
    ok = None if ok is None or pd.isna(ok) else not control_failed(ok)
    reason = result.get(CONTROL_REASON_COLUMN, "")
    return {"control_ok": ok, "control_reason": reason if isinstance(reason, str) else ""}


def failed_control(row: pd.Series) -> bool:
    """Whether a study row's comparison failed the rule (a twin or arm that did not learn)."""
    return control_failed(row.get("control_ok"))


def failed_mask(rows: pd.DataFrame) -> pd.Series:
    """Per study row, whether its comparison failed the rule (all False without a ``control_ok`` column)."""
    if "control_ok" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["control_ok"].map(control_failed).astype(bool)


def learned_text(row: pd.Series) -> str:
    """ "; both arms learned" for a row that passed the rule; nothing where it was not checked."""
    value = row.get("control_ok")
    checked = value is not None and not pd.isna(value)
    return "; both arms learned" if checked and not control_failed(value) else ""


def failed_note(rows: pd.DataFrame) -> list[str]:
    """The study tables' note on the comparisons marked "✗ control failed", each with its reason, or []."""
    failed = rows[failed_mask(rows)]
    if not len(failed):
        return []
    return [
        f"✗ control failed — the pre-registered rule ({RULE_TEXT}): such a gap is shown, never counted among "
        "the gaps that hold. "
        + "; ".join(named_reason(row["method"], row["control_reason"]) for _, row in failed.iterrows())
        + ".",
        "",
    ]


def named_reason(method: str, reason: str) -> str:
    """A failed comparison and its reason, which names each arm that failed: the method once."""
    own = f"`{method}`: "
    return reason if str(reason).startswith(own) else f"`{method}` — {reason}"
