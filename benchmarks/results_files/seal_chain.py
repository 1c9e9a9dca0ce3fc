"""A folder's seals: who sealed its manifest and over what. Each ``seal`` (and ``export``) records
in ``manifest.json`` the commit of the code that sealed and the sha256 of the manifest it replaced
("" for the first), after the seals of that manifest: a chain with no timestamp, so sealing stays
deterministic. A report lists each folder's seal and flags one re-sealed, or sealed at a commit
that none of its cells ran at: an edited folder sealed again passes every check of its own, so the
reader (and git's history of the folder) must see that it was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from benchmarks.results_files.manifest import MANIFEST_FILE
from harness.versioning import git_commit

NO_COMMIT = ""  # sealed outside a git checkout


def sealing_commit() -> str:
    """The commit of the code sealing now (``<commit>+dirty`` with uncommitted code changes)."""
    return git_commit() or NO_COMMIT


def earlier_seals(path: Path) -> list[dict]:
    """The chain of the manifest at ``path`` (none where it records none or cannot be read)."""
    try:
        seals = json.loads(path.read_text(encoding="utf-8")).get("seals")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return []
    valid = isinstance(seals, list) and all(
        isinstance(seal, dict) and isinstance(seal.get("commit"), str) and isinstance(seal.get("replaces"), str)
        for seal in seals
    )
    return [{"commit": seal["commit"], "replaces": seal["replaces"]} for seal in seals] if valid else []


def next_seals(folder: Path) -> list[dict]:
    """The chain of a manifest written now in ``folder``: the one it replaces (if any) continued by
    this seal."""
    path = Path(folder) / MANIFEST_FILE
    if not path.is_file():
        return [{"commit": sealing_commit(), "replaces": ""}]
    replaced = hashlib.sha256(path.read_bytes()).hexdigest()
    return [*earlier_seals(path), {"commit": sealing_commit(), "replaces": replaced}]


def seal_text(seals: list[dict], cell_commits: set[str]) -> str:
    """How a report describes a folder's seal, its flags included (nothing a folder's own, so that
    folders sealed alike read as one line)."""
    if not seals:
        return "sealed before seals named a commit (no chain)"
    last = seals[-1]
    text = f"sealed at `{last['commit'][:12] or 'no commit'}`"
    replaced = sum(1 for seal in seals if seal["replaces"])
    if replaced:
        text += f", **re-sealed** ({replaced} earlier manifest(s) chained; git's history says what changed)"
    if last["commit"] not in cell_commits:
        text += ", **not at a commit its cells ran at**"
    return text


def seal_lines(folders: list[str], cell_commits: dict[str, set[str]]) -> list[str]:
    """One line per distinct seal description, naming its folders (a study's chunks sealed alike
    read as one line)."""
    by_text: dict[str, list[str]] = {}
    for folder in folders:
        text = seal_text(earlier_seals(Path(folder) / MANIFEST_FILE), cell_commits.get(folder, set()))
        by_text.setdefault(text, []).append(folder)
    return [
        f"{', '.join(f'`{Path(name).name}`' for name in names)}{f' ({len(names)} folders)' if len(names) > 1 else ''}: "
        f"{text}"
        for text, names in by_text.items()
    ]
