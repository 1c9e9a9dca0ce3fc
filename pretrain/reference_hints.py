"""A did-you-mean for an encoder reference (``--model.encoder=lates``), checked before the heavy
imports: the words and schemes of :mod:`pretrain.references`, with nothing imported. A value
that names an existing file, or starts with a known word or scheme, is left to the full parse."""

from __future__ import annotations

import difflib
from pathlib import Path

WORDS = ("latest", "random")
SCHEMES = ("runs:/", "models:/", "hf:", "reference:", "latest:", "random:")


def encoder_hint(value: str) -> str | None:
    """Why ``value`` cannot name an encoder, with the reference it is closest to; None when it may."""
    if value in WORDS or value.startswith(SCHEMES) or Path(value).expanduser().exists():
        return None
    scheme, colon, _ = value.partition(":")
    if colon and "/" not in scheme and len(scheme) > 1:  # a scheme, not a path (C:\…)
        close = difflib.get_close_matches(f"{scheme}:", SCHEMES, n=1, cutoff=0.6)
        if close:
            return f"unknown scheme {scheme}:; did you mean {close[0]}{value[len(scheme) + 1:].lstrip('/')}?"
        return None
    close = difflib.get_close_matches(value, WORDS, n=1, cutoff=0.6)
    return f"no such checkpoint file or encoder; did you mean {close[0]}?" if close else None
