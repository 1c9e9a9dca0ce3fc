"""How many labels a pair data set may have.

Every label costs its own column in the predictions files (``prob_<label>``), a row and a column
of the confusion matrix, and a share of the F1 metric's state (under ``deterministic: true`` the
per-batch update needs batch × labels² × 8 bytes: 10,000 labels is 25 GB at batch 32). Pair tasks
have a handful (MRPC 2, NLI 3, similarity buckets ≤ 10); thousands mean the label column is
another column (an id, a score, a sentence).
"""

from __future__ import annotations

from harness.errors import UserError

MAX_LABELS = 100


def check_label_count(labels: list[str], where: str, column_flag: str = "--data.label_column") -> None:
    """Refuse, in one line naming ``where`` (the train file's flag), more than :data:`MAX_LABELS` labels."""
    if len(labels) > MAX_LABELS:
        shown = ", ".join(map(repr, labels[:3]))
        raise UserError(
            f"{where}: {len(labels)} distinct labels ({shown}, …); a pair data set here has at most "
            f"{MAX_LABELS} (each is a predictions column, a confusion-matrix row and a share of the "
            f"F1 state): is {column_flag} the right column?"
        )
