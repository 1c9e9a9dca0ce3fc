"""Shared fixtures: tiny MRPC-format files and the real data set when it is available."""

import os
from pathlib import Path

import pytest
import torch

# Tests run the CLI in subprocesses with other working directories: make a relative
# MRPC_DIR (CI passes ../shared/data/mrpc) absolute once, here.
if os.environ.get("MRPC_DIR", "").strip():
    os.environ["MRPC_DIR"] = str(Path(os.environ["MRPC_DIR"]).expanduser().resolve())

MSR_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"

SAMPLE_ROWS = [
    ("1", "101", "102", 'He said "yes" to the plan.', "He agreed to the plan."),
    ("0", "103", "104", 'The "quote never closes.', "Shares fell 3 percent."),
    ("1", "105", "106", "Café prices rose – sharply.", "Prices at the café climbed steeply."),
]


def write_msr(path, rows, bom=True, crlf=False, trailing_blank=0, header=MSR_HEADER) -> Path:
    """Write an MSR-format file. A row is a sequence of fields (joined by tabs) or a raw line."""
    lines = [header] + [row if isinstance(row, str) else "\t".join(row) for row in rows]
    newline = "\r\n" if crlf else "\n"
    text = newline.join(lines) + newline + newline * trailing_blank
    path = Path(path)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


@pytest.fixture(name="write_msr")
def write_msr_fixture():
    """The ``write_msr`` helper, for tests that make their own MRPC-format files."""
    return write_msr


@pytest.fixture
def sample_rows():
    return list(SAMPLE_ROWS)


@pytest.fixture
def real_mrpc_dir() -> Path:
    """The full MSR release from ``$MRPC_DIR``; skips the test when it is not there."""
    configured = os.environ.get("MRPC_DIR", "")
    folder = Path(configured)
    if not configured or not (folder / "msr_paraphrase_train.txt").is_file():
        pytest.skip("MRPC_DIR does not point at the MSR release files")
    return folder


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny models gain nothing from threads, and spinning threads stall on a busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
