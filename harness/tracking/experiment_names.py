"""An experiment's name as every entry point takes it (``--experiment_name``, a matrix's
``experiment:``, a results folder's ``benchmark.json``, and :func:`harness.tracking.store.ensure_experiment`
behind them all): Unicode-compatibility normalised (NFKC: ``ｐｒｅｔｒａｉｎ`` is ``pretrain``), of
visible characters and inner spaces only, so that no two names look alike (``pretrain`` and
``pretrain\\u200b``), and 1 to :data:`MAX_LENGTH` characters (the store's column: a longer name is
a database error on PostgreSQL)."""

from __future__ import annotations

import unicodedata

from harness.errors import UserError

MAX_LENGTH = 256  # MLflow's experiments.name column (String(256))
INVISIBLE = ("C", "Z")  # Unicode categories: control, format, unassigned, private use; separators


def experiment_name_problem(name: object) -> str | None:
    """What is wrong with ``name`` (already NFKC) as an experiment's name; None when nothing is."""
    if not isinstance(name, str) or not name.strip():
        return f"{str(name)[:40]!r} is no name: give 1 to {MAX_LENGTH} visible characters"
    if len(name) > MAX_LENGTH:
        return f"{name[:20]!r}… has {len(name)} characters; an experiment's name has at most {MAX_LENGTH}"
    if name != name.strip():
        return f"{name!r} starts or ends with a space; drop it"
    hidden = next((char for char in name if char != " " and unicodedata.category(char).startswith(INVISIBLE)), None)
    if hidden is not None:
        what = unicodedata.name(hidden, unicodedata.category(hidden))
        return f"{name!r} holds the invisible U+{ord(hidden):04X} ({what}): it would look like another name; drop it"
    return None


def experiment_name(name: object, where: str) -> str:
    """``name`` NFKC-normalised and checked (see the module); a bad one is one line naming ``where``."""
    normal = unicodedata.normalize("NFKC", name) if isinstance(name, str) else name
    problem = experiment_name_problem(normal)
    if problem:
        raise UserError(f"{where}: {problem}")
    return normal
