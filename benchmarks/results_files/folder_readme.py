"""The ``README.md`` an export writes into a results folder: what a reader of the folder alone
needs to place it (the benchmark and its config, the protocol, the cells, when and where they ran)
and the commands that read it. Derived from the folder's own records and the cells' hosts; never
read back (the records are the evidence). Folders exported before cells recorded their host
say that it was not recorded."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

README_FILE = "README.md"


def when(milliseconds: int | None) -> str:
    """A run time (MLflow's milliseconds since the epoch) as a UTC minute."""
    if not milliseconds:
        return "not recorded"
    return datetime.fromtimestamp(milliseconds / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def counted(values: list[str]) -> str:
    """``a (3), b (1)``: each value with how many cells hold it, the most frequent first."""
    return ", ".join(f"`{value}` ({count})" for value, count in Counter(values).most_common())


def readme_text(benchmark: dict, records: list[dict]) -> str:
    """The folder's README, from its ``benchmark.json`` (``benchmark``) and its cells' records alone,
    so that an imported folder exports back to the same bytes."""
    settings = benchmark.get("settings", {})
    hosts = [record["run"]["host"] for record in records if record["run"].get("host")]
    starts = [record["run"].get("start_time") for record in records if record["run"].get("start_time")]
    ends = [record["run"].get("end_time") for record in records if record["run"].get("end_time")]
    methods = {record["cell"]["method"] for record in records}
    seeds = sorted({int(record["cell"]["seed"]) for record in records})
    lines = [
        f"# {benchmark['benchmark']}",
        "",
        f"The finished cells of benchmark `{benchmark['benchmark']}`, exported from its parent run "
        f"`{benchmark.get('parent_run_id', '')}` by `python -m benchmarks export --benchmark "
        f"{benchmark['benchmark']} --out <this folder>`.",
        "",
        f"- **benchmark**: `{settings.get('name', benchmark['benchmark'])}` on `{benchmark['dataset']}` "
        f"(data digest `{benchmark['data_digest'][:16]}…`), experiment `{benchmark.get('experiment', '')}`",
        f"- **protocol**: {counted([record.get('protocol', '') for record in records]) or 'no cells'}",
        f"- **cells**: {len(records)}, {len(methods)} methods × seeds {', '.join(map(str, seeds)) or '–'}",
        f"- **dates**: {when(min(starts, default=None))} to {when(max(ends, default=None))} (the cells' runs)",
        f"- **machine**: {counted(hosts) if hosts else 'not recorded'}; code "
        f"{counted([record.get('commit', '')[:7] for record in records if record.get('commit')]) or 'not recorded'}",
        "",
        "Files: `benchmark.json` (the benchmark's settings), `cells/<cell hash>.json` (a cell's settings, "
        "metrics, encoder, times) and `cells/<cell hash>.predictions.csv.gz` (its dev and test predictions).",
        "",
        "Read it with `python -m benchmarks report <this folder> --out <report folder>` (a report from the "
        "files alone) or `python -m benchmarks import <this folder>` (its cells as runs of the tracking store "
        "in use); a suite given `--results <this folder>` counts its cells as done.",
    ]
    return "\n".join(lines) + "\n"
