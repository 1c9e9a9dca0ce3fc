"""What every data set read from a folder of a fixed release (SICK, STS-B) does alike: find the
folder (its own variable, else ``$DATA_ROOT/<tail>``), find each file in it or name the file and the
hint in one line, and say in one stderr line which files differ from the release's digests."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.errors import UserError


def default_folder(variable: str, tail: str) -> Path | None:
    """``$<variable>`` if set, else ``$DATA_ROOT/<tail>`` if ``DATA_ROOT`` is set, else None."""
    for name, below in ((variable, ""), ("DATA_ROOT", tail)):
        value = os.environ.get(name, "").strip()
        if value:
            return Path(value).expanduser() / below
    return None


def release_files(folder: Path, files: Mapping[str, str], hint: str) -> dict[str, Path]:
    """``{split: path}`` of ``files`` in ``folder``; a missing one is a one-line UserError naming it."""
    paths = {split: folder / name for split, name in files.items()}
    for path in paths.values():
        if not path.is_file():
            raise UserError(f"{path}: file not found; {hint}")
    return paths


def files_present(folder: Path | None, files: Mapping[str, str]) -> bool:
    """Whether every file of ``files`` is in ``folder`` (None: no folder found)."""
    return folder is not None and all((folder / name).is_file() for name in files.values())


def say_differing(
    name: str,
    folder: Path,
    files: Mapping[str, str],
    digests: Mapping[str, str],
    release: Mapping[str, tuple[int, str]],
    release_title: str,
    content_hash: str,
) -> None:
    """One stderr line naming the files whose digest differs from the release's, if any."""
    differing = [files[split] for split in files if digests[split] != release[split][1]]
    if differing:
        print(
            f"{name}: {folder}: {', '.join(differing)} differ from the {release_title} release (sha256); "
            f"read as given, under its own content hash {content_hash[:12]}",
            file=sys.stderr,
        )
