"""How a method's name is written, the one grammar the planner writes and the report, the results
files and the tasks read: ``<encoder>-<mix or transfer>-<head>[@<fraction>][~lr<rate>]``, its twin
``random(<encoder>)-…``, a probe ``<encoder>-linear-probe[@<fraction>]``, a baseline
``<baseline>[@<fraction>]``."""

from __future__ import annotations

BASELINE_NAMES = ("majority", "tfidf-lr", "overlap-cosine", "tfidf-ridge")  # what a matrix may list (a task has some)
PROBE_SUFFIX = "linear-probe"  # method names: <encoder>-linear-probe, random(<encoder>)-linear-probe


def fraction_suffix(fraction: float) -> str:
    """How a method's name says its labelled fraction: ``@0.1`` below 100%, nothing at 100%."""
    return f"@{fraction:g}" if fraction < 1 else ""


def grid_point(method: str, rate: float) -> str:
    """The method of one learning rate of a grid: ``<method>~lr<rate>``."""
    return f"{method}~lr{rate:g}"


def twin_name(encoder: str | None = None) -> str:
    """The random-init twin's arm in method names: ``random``, or ``random(<encoder>)`` where one
    plan (or one report) holds several encoders."""
    return f"random({encoder})" if encoder else "random"


def twin_by_encoder(method: str, encoder: str) -> str:
    """A twin's method as a plan of one encoder names it (``random-…``), named as a plan over several
    encoders would: ``random(<encoder>)-…``."""
    return f"{twin_name(encoder)}-{method.removeprefix(f'{twin_name()}-')}"


def baseline_name(method: str) -> str:
    """The baseline a method name runs: ``tfidf-lr@0.1`` → ``tfidf-lr``."""
    return method.partition("@")[0]
