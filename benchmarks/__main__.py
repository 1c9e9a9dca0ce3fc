"""``python -m benchmarks export|import|duplicates|report``: results as files.

- ``export --benchmark <name> --out <folder>``: a benchmark's finished cells, from the tracking
  store in use, to a folder that diffs well in git;
- ``import <folder>...``: such folders into the tracking store in use, as FINISHED runs under a
  parent per folder (the UI shows them; a suite finds their cells by hash); a cell the store holds
  already is linked, not copied, and one it holds with other numbers stops the import;
- ``duplicates [--remove]``: the cells the store holds more than once, and whether their copies
  agree; ``--remove`` deletes the redundant copies;
- ``report <folder>... --out <folder> [--registered <config>...] [--incomplete]``: ``results.csv``,
  ``report.md`` and figures from the folders alone, no store, no training; ``--registered`` adds the
  ``comparisons:`` of study configs whose folders are not in yet (a chunked study's family) and
  holds the folders to those configs' plan (``--incomplete``: a study that lost cells, marked);
- ``seal [--again] <folder>...``: a folder written before manifests (or, with ``--again``, a sealed
  one), checked and given its ``manifest.json``, which records the commit that sealed and the
  manifest it replaced.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from harness.entry_point import run_main
from harness.errors import UserError


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="a benchmark's finished cells to a results folder")
    export.add_argument("--benchmark", required=True, help="the benchmark's name (its config's `name:`)")
    export.add_argument("--out", type=Path, required=True, help="the folder to write (replaced whole)")
    load = commands.add_parser("import", help="results folders into the tracking store in use")
    load.add_argument("folders", type=Path, nargs="+")
    duplicates = commands.add_parser("duplicates", help="cells the tracking store holds more than once")
    duplicates.add_argument(
        "--remove",
        action="store_true",
        help="delete the redundant copies (of conflicting ones, all but the one computed here)",
    )
    report = commands.add_parser("report", help="a report from results folders alone")
    report.add_argument("folders", type=Path, nargs="+")
    report.add_argument("--out", type=Path, required=True, help="where results.csv, report.md and figures go")
    report.add_argument("--name", default=None, help="the report's title (default: the benchmarks' names)")
    report.add_argument(
        "--registered",
        type=Path,
        nargs="*",
        default=[],
        metavar="CONFIG",
        help="matrix configs whose `comparisons:` join the pre-registered family (every chunk of a study, run or "
        "not), and whose planned cells the folders must hold",
    )
    report.add_argument(
        "--incomplete",
        action="store_true",
        help="the study lost planned cells: report, marking each comparison that lacks some, instead of refusing",
    )
    seal = commands.add_parser("seal", help="check a results folder written before manifests and write its manifest")
    seal.add_argument("folders", type=Path, nargs="+")
    seal.add_argument(
        "--again",
        action="store_true",
        help="re-seal a sealed folder: its new manifest records the commit and the manifest it replaces",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per cell would drown the summary
    started = time.perf_counter()
    try:
        if args.command == "export":
            from benchmarks.results_files.store_transfer import export_benchmark  # MLflow only where used

            cells, size = export_benchmark(args.benchmark, args.out)
            print(
                f"exported {cells} cell(s) of '{args.benchmark}' to {args.out}: {size / 1024:.0f} KB "
                f"({size / max(cells, 1) / 1024:.1f} KB a cell) in {time.perf_counter() - started:.1f} s"
            )
        elif args.command == "import":
            from benchmarks.results_files.store_transfer import import_folders
            from harness.tracking.runs import tracking_uri

            for folder, (parent, cells, held) in zip(args.folders, import_folders(args.folders)):
                already = f"; {held} already in the store, linked" if held else ""
                if parent is None:
                    print(f"nothing new in {folder}: its {held} cell(s) are in {tracking_uri()} already")
                else:
                    print(
                        f"imported {cells} cell(s) of {folder} under parent run {parent} in {tracking_uri()}{already}"
                    )
        elif args.command == "duplicates":
            from benchmarks.results_files.store_copies import report_duplicates

            return report_duplicates(args.remove)
        elif args.command == "seal":
            from benchmarks.results_files.seal import seal_folder

            for folder in args.folders:
                print(
                    f"sealed {folder}: {seal_folder(folder, args.again)} cell(s) checked, "
                    f"{folder / 'manifest.json'} written"
                )
        else:
            from benchmarks.results_files.folder_report import build_report

            results, written = build_report(args.folders, args.out, args.name, args.registered, args.incomplete)
            print(
                f"report of {len(results)} method(s) from {len(args.folders)} folder(s): "
                f"{args.out / 'report.md'}, {args.out / 'results.csv'} ({len(written)} files, "
                f"{time.perf_counter() - started:.1f} s)"
            )
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    run_main(main)
