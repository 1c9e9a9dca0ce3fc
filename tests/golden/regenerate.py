"""Regenerate the pinned golden cells (``tests/golden/goldens.json``) after a deliberate numeric
change, with the protocol version bumped in ``harness/protocol.py``:

    make goldens                                   # = python -m tests.golden.regenerate
    python -m tests.golden.regenerate --check      # compute and compare only: the deviations per cell
    python -m tests.golden.regenerate --threads 2 --check   # the same under another summation order

The goldens are made with one torch thread; ``--check`` exits 1 when a cell moved. Another CPU's
summation order can be imitated on this one: torch's kernels for a narrower vector unit
(``ATEN_CPU_CAPABILITY=avx2`` or ``default``, no vectorisation) and MKL's and oneDNN's
(``MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2``) before ``--check``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.golden.cells import compute_goldens
from tests.golden.compare import GOLDEN_FILE, largest_deviations, problems, read_goldens, write_goldens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.regenerate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the goldens are made)")
    parser.add_argument("--check", action="store_true", help="compare with the pinned goldens instead of writing them")
    parser.add_argument("--family", action="append", help="with --check: only this family's cells (repeatable)")
    parser.add_argument("--out", type=Path, default=GOLDEN_FILE, help=f"the goldens file (default {GOLDEN_FILE})")
    options = parser.parse_args(argv)
    sys.argv = sys.argv[:1]  # LightningCLI, run in process below, reads its arguments from the list it is given
    if options.check and not options.out.is_file():
        print(f"error: --out {options.out}: no such goldens file; run `make goldens` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="goldens-") as workdir:
        families = options.family if options.check and options.family else None
        cells = compute_goldens(Path(workdir), threads=options.threads,
                                only=lambda name: families is None or name.split("-")[0] in families)
    if not options.check:
        write_goldens(cells, options.out)
        print(f"wrote {len(cells)} golden cells to {options.out}")
        return 0
    pinned = read_goldens(options.out)["cells"]
    found = []
    for name, numbers in cells.items():
        deviations = largest_deviations(pinned.get(name, {}), numbers)
        print(f"{name:22s} " + "  ".join(f"{key} {value:.2g}" for key, value in deviations.items()))
        found += problems(name, pinned[name], numbers) if name in pinned else [f"golden {name}: not pinned"]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
