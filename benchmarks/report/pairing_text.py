"""What differs between the two arms of each twin comparison, in words from the study's rows: both
share family, architecture, tokenizer, transfer, data and seeds, but where each arm chose its recipe
on dev the learning rate and (for a ``picked`` head) the head may differ too. The sentence names
them per comparison, so a reader never takes a gap for the encoder's weights alone, and states the
selection's asymmetry where the arms were picked in a selection over pretraining runs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.plan.matrix import PICKED_HEAD


def _head(row: pd.Series) -> str:
    """The head the pretrained arm ran with: the pick inside "picked (attn)", else the declared one."""
    head = str(row.get("head", ""))
    return head.removeprefix(f"{PICKED_HEAD} (").removesuffix(")") if head.startswith(PICKED_HEAD) else head


def arm_differences(row: pd.Series) -> list[str]:
    """What differs between a comparison's arms besides the weights: "learning rate 0.001 vs 0.0005",
    "head linear vs attn"; [] where the rows carry neither difference."""
    differences = []
    rate, twin_rate = row.get("rate", np.nan), row.get("twin_rate", np.nan)
    if pd.notna(rate) and pd.notna(twin_rate) and not np.isclose(rate, twin_rate):
        differences.append(f"learning rate {rate:g} vs {twin_rate:g}")
    twin_head = row.get("twin_head", np.nan)
    if isinstance(twin_head, str) and twin_head and twin_head != _head(row):
        differences.append(f"head {_head(row)} vs {twin_head}")
    return differences


def pairing_sentence(rows: pd.DataFrame) -> str:
    """The study section's pairing sentence, over its registered comparisons (every row without any)."""
    counted = rows[rows["registered"]] if rows["registered"].any() else rows
    differing = {row["method"]: arm_differences(row) for _, row in counted.iterrows()}
    differing = {method: parts for method, parts in differing.items() if parts}
    sentence = "Each pair shares family, architecture, tokenizer, transfer, training data and seeds"
    if not differing:
        return sentence + "; no learning-rate or head difference between its arms is recorded."
    named = "; ".join(f"`{method}` {', '.join(parts)}" for method, parts in differing.items())
    sentence += (
        f"; each arm chose its recipe on dev, so in {len(differing)} of {len(counted)} comparisons more than the "
        f"weights differ (pretrained vs twin): {named}."
    )
    selected = counted["recipe"].astype(str).str.contains("chosen on dev in", regex=False).any() or (
        counted["head"].astype(str).str.startswith(PICKED_HEAD).any()
    )
    if selected and counted.get("pretrainings", pd.Series(dtype=float)).gt(1).any():
        sentence += (
            " The selection is not symmetric: the pretrained arm's recipe was chosen on pretraining run 0's "
            "encoder, one of the runs its final cells use; the twin's on a random init at the selection's own "
            "seed, which no final twin cell uses."
        )
    return sentence
