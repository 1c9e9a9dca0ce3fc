"""Whether a results folder's data is a known release (MRPC: the MSR files) or other content under
the same name (own MRPC-format files, an edited ``MRPC_DIR``): a study never mixes the two, and a
report of the other says so."""

from __future__ import annotations

from pathlib import Path

from harness.datasets.registry import DATASETS, known_release, known_split_sizes
from harness.errors import UserError


def is_fixed_release(name: str) -> bool:
    """Whether the data set ``name`` is a release of fixed content (its entry states its digests)."""
    entry = DATASETS.get(str(name).lower())
    return bool(entry and entry.split_sizes)


def describe(name: str, digest: str) -> str:
    """What the content of digest ``digest``, found under the name ``name``, is."""
    if release := known_release(digest):
        return f"the known {release} release"
    if is_fixed_release(name):
        return f"not the known {name} release: own or edited files"
    return "its own content"


def check_same_data(folder: Path, benchmark: dict, expected: str, expected_name: str | None = None) -> None:
    """``folder``'s data is the digest ``expected`` (the first folder's, named ``expected_name``, or a suite's)."""
    digest, name = benchmark["data_digest"], benchmark["dataset"]
    if digest != expected:
        raise UserError(
            f"{folder}: results of another data set ({name[:40]}, digest {digest[:12]}, {describe(name, digest)}) "
            f"than {expected[:12]} ({describe(expected_name or name, expected)}); a study never mixes them"
        )


def release_note(benchmark: dict) -> list[str]:
    """A report's note where a fixed release's name holds other content."""
    name, digest = benchmark["dataset"], benchmark["data_digest"]
    if not is_fixed_release(name) or known_split_sizes(digest):
        return []
    return [
        f"the data is named {name} but its digest {digest[:12]} is not the known release's: own or edited "
        f"files (MRPC_DIR?); these results compare with no published {name} result"
    ]
