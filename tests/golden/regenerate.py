"""Regenerate the pinned golden cells (``tests/golden/goldens.json``, float32, and
``tests/golden/goldens-bf16.json``, bf16-mixed) after a deliberate numeric change, with the protocol
version bumped in ``harness/protocol.py``:

    make goldens                                   # = python -m tests.golden.regenerate
    python -m tests.golden.regenerate --check      # compute and compare only: the deviations per cell
    python -m tests.golden.regenerate --threads 2 --check   # the same under another summation order
    python -m tests.golden.regenerate --precision bf16-mixed --check   # the bf16 goldens alone

Both sets by default; the bf16 set only on a CPU with native bf16 (elsewhere it is left as it is,
and said so). The goldens are made with one torch thread; ``--check`` exits 1 when a cell moved.
Another CPU's summation order can be imitated on this one: torch's kernels for a narrower vector
unit (``ATEN_CPU_CAPABILITY=avx2`` or ``default``, no vectorisation) and MKL's and oneDNN's
(``MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2``; for bf16 without AMX tiles,
``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16``) before ``--check``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from harness.cli.precision import cpu_bf16_supported
from harness.entry_point import run_main
from tests.golden.cells import compute_goldens
from tests.golden.compare import GOLDENS, largest_deviations, problems, read_goldens, write_goldens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.regenerate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the goldens are made)")
    parser.add_argument("--check", action="store_true", help="compare with the pinned goldens instead of writing them")
    parser.add_argument("--family", action="append", help="with --check: only this family's cells (repeatable)")
    parser.add_argument(
        "--precision",
        action="append",
        choices=sorted(GOLDENS),
        help="only this precision's goldens (repeatable; default: both, bf16 where native)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="the goldens file, with one --precision (default: that precision's file)"
    )
    options = parser.parse_args(argv)
    sys.argv = sys.argv[:1]  # LightningCLI, run in process below, reads its arguments from the list it is given
    precisions = options.precision or list(GOLDENS)
    if options.out is not None and len(precisions) != 1:
        print("error: --out names one file: give one --precision with it", file=sys.stderr)
        return 2
    if "bf16-mixed" in precisions and not cpu_bf16_supported():
        print("bf16 goldens: this CPU has no native bf16 (AVX512-BF16 or AMX); left as they are")
        precisions = [precision for precision in precisions if precision != "bf16-mixed"]
    code = 0
    for precision in precisions:
        path, tolerance = GOLDENS[precision]
        path = options.out or path
        if options.check and not path.is_file():
            print(f"error: {path}: no such goldens file; run `make goldens` first", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="goldens-") as workdir:
            families = options.family if options.check and options.family else None
            cells = compute_goldens(
                Path(workdir),
                threads=options.threads,
                precision=precision,
                only=lambda name, families=families: families is None or name.split("-")[0] in families,
            )
        if not options.check:
            write_goldens(cells, path, precision=precision)
            print(f"wrote {len(cells)} golden cells ({precision}) to {path}")
            continue
        pinned = read_goldens(path)["cells"]
        found = []
        for name, numbers in cells.items():
            deviations = largest_deviations(pinned.get(name, {}), numbers)
            print(f"{precision:10s} {name:22s} " + "  ".join(f"{key} {value:.2g}" for key, value in deviations.items()))
            found += (
                problems(name, pinned[name], numbers, tolerance) if name in pinned else [f"golden {name}: not pinned"]
            )
        for line in found:
            print(line)
        code = code or (1 if found else 0)
    return code


if __name__ == "__main__":
    run_main(main)
