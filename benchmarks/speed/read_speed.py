"""Pair-file reading speed and memory: a synthetic TSV of N pairs (default 1M) read by the strict reader.

``python -m benchmarks.speed.read_speed [--pairs N] [--json PATH]``

Rows, each measured in a fresh process so that its peak RSS is its own:
- ``read_pair_tsv``: one train file of N pairs (header ``id, sentence1, sentence2, label``, three
  string labels, quotes and non-ASCII text in some sentences).
- ``load_pair_data``: the whole ``tsv`` data set: that train file plus dev and test files of N/100
  pairs each, label checks and the PairData checks included.

Seconds are wall-clock (CPU seconds beside them: on a shared machine the fairer figure). Peak
growth is the process's peak RSS minus its RSS just before reading; retained is the RSS after
reading minus that same baseline (the pairs themselves). A reader that streams has a peak close to
what it retains; one that reads the whole file and splits it holds the text and its copies as well.
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
import json
import multiprocessing
import random
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from harness.entry_point import run_main

LABELS = ("entailment", "neutral", "contradiction")
WORDS = (
    'the shares company said percent year market quarter "profit" rose fell analysts expected '
    "government court ruled officials café naïve économie report sales on Tuesday million "
    "billion investors growth week police city new first last told reporters"
).split()


def sentence_pool(size: int, seed: int = 0) -> list[str]:
    """``size`` synthetic sentences of 8 to 35 words (MRPC's are about 22 on average)."""
    generator = random.Random(seed)
    return [" ".join(generator.choices(WORDS, k=generator.randint(8, 35))) + "." for _ in range(size)]


def write_pairs(path: Path, pairs: int, pool: list[str], offset: int = 0) -> int:
    """Write a pair TSV of ``pairs`` rows in chunks (bounded memory); returns its size in bytes."""
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write("id\tsentence1\tsentence2\tlabel\n")
        for start in range(0, pairs, 10_000):
            rows = []
            for row in range(start, min(start + 10_000, pairs)):
                first, second = pool[(row * 7919) % len(pool)], pool[(row * 104729 + 13) % len(pool)]
                rows.append(f"p{offset + row}\t{first}\t{second}\t{LABELS[row % 3]}\n")
            handle.write("".join(rows))
    return path.stat().st_size


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def measure(kind: str, folder: str) -> dict:
    """Run in a fresh process: time one read and its RSS growth."""
    from harness.datasets.reader import read_pair_tsv
    from harness.datasets.registry import load_pair_data

    folder = Path(folder)
    baseline = _rss_bytes()
    start, cpu_start = time.perf_counter(), time.process_time()
    if kind == "read_pair_tsv":
        result = read_pair_tsv(folder / "train.tsv")
        pairs = len(result.pairs)
    else:
        result = load_pair_data(
            dataset="tsv", train=folder / "train.tsv", dev=folder / "dev.tsv", test=folder / "test.tsv"
        )
        pairs = len(result.train) + len(result.dev) + len(result.test)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    retained = _rss_bytes() - baseline  # measured while ``result`` is alive
    return {
        "row": kind,
        "pairs": pairs,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu_seconds, 2),
        "pairs_per_second": round(pairs / seconds),
        "peak_growth_mb": round((peak - baseline) / 2**20),
        "retained_mb": round(retained / 2**20),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000, help="pairs in the train file")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("error: this benchmark reads /proc for RSS and runs on Linux only", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="read_speed_") as folder:
        pool = sentence_pool(20_000)
        size = write_pairs(Path(folder) / "train.tsv", args.pairs, pool)
        for seed, (split, offset) in enumerate((("dev", args.pairs), ("test", args.pairs * 2)), start=1):
            # sentences of their own: splits that shared pairs would be refused as leaking
            write_pairs(Path(folder) / f"{split}.tsv", max(args.pairs // 100, 3), sentence_pool(2_000, seed), offset)
        print(f"train file: {args.pairs} pairs, {size / 2**20:.0f} MB")
        context = multiprocessing.get_context("spawn")
        for kind in ("read_pair_tsv", "load_pair_data"):
            with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool_executor:
                row = pool_executor.submit(measure, kind, folder).result()
            rows.append({**row, "file_mb": round(size / 2**20)})
            print(
                f"{kind:15s} {row['pairs']:>9d} pairs  {row['seconds']:6.2f} s ({row['cpu_seconds']:.2f} s CPU)  "
                f"{row['pairs_per_second']:>9d} pairs/s  peak RSS growth {row['peak_growth_mb']} MB  "
                f"retained {row['retained_mb']} MB"
            )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)
