"""``python -m benchmarks.evaluate --encoder <ref> --tasks mrpc sick-e sick-r stsb`` (``make evaluate
ENCODER=<ref> TASKS="…"``): score one encoder on a suite of pair tasks and print one table across
them (:mod:`benchmarks.evaluate.run`). The tasks, the data folders and the encoder's form are
checked before the heavy imports; a mistake is one line and status 2, before any run is created."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.datasets.registry import DATASETS, dataset_choices, load_pair_data
from harness.entry_point import run_main
from harness.errors import UserError

DEFAULT_TASKS = ("mrpc", "sick-e", "sick-r", "stsb")
ENCODER_FORMS = ("runs:/", "models:/", "latest", "hf:", "reference:")
POOLINGS = ("mean", "sentence-transformers")
DEFAULT_ZERO_SHOT = ("mean:average", "sentence-transformers:top")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--encoder",
        required=True,
        help="runs:/<id>, models:/<name>@<alias>, latest[:<family>], hf:<folder> or reference:<name>",
    )
    parser.add_argument("--tasks", nargs="+", default=None, help=f"data sets (default: {' '.join(DEFAULT_TASKS)})")
    parser.add_argument("--heads", nargs="*", default=[], help="heads beside the default pool-mlp (e.g. attn)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds of every trained method (default: 1)")
    twin = parser.add_mutually_exclusive_group()
    twin.add_argument("--twin", dest="twin", action="store_true", default=None, help="the random-init twin always")
    twin.add_argument("--no-twin", dest="twin", action="store_false", help="no twin (default: own encoders only)")
    parser.add_argument(
        "--zero-shot",
        nargs="*",
        default=list(DEFAULT_ZERO_SHOT),
        metavar="POOLING:MIX",
        help="zero-shot methods of graded tasks: mean:<average|top|layer:K> and/or sentence-transformers:top "
        "(none: no zero-shot)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="cells at once (1, the default: one after another in this process)"
    )
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/evaluate/<encoder>")
    parser.add_argument(
        "--template",
        type=Path,
        default=None,
        help="the matrix each task fills in (default: configs/benchmarks/evaluate.yaml)",
    )
    return parser.parse_args(argv)


def checked_tasks(tasks: list[str] | None) -> tuple[str, ...]:
    """The task names, each a data set of the registry, none twice."""
    tasks = [name.lower() for name in (tasks or DEFAULT_TASKS)]
    unknown = [name for name in tasks if name not in DATASETS]
    if unknown:
        raise UserError(f"TASKS={' '.join(unknown)}: unknown task; expected {dataset_choices()}")
    if len(set(tasks)) != len(tasks):
        raise UserError(f"TASKS={' '.join(tasks)}: a task is named twice")
    return tuple(tasks)


def checked_encoder(text: str) -> str:
    """The encoder's form, checked without loading anything (that comes before any run)."""
    text = text.strip()
    if text == "random" or text.startswith("random"):
        raise UserError(f"ENCODER={text}: name the trained encoder; its random-init twin runs beside it")
    if Path(text).expanduser().is_file():
        raise UserError(
            f"ENCODER={text}: a checkpoint file; evaluate takes a tracked encoder, whose run its cells "
            f"record: runs:/<id>, models:/<name>@<alias>, latest[:<family>], hf:<folder> or reference:<name>"
        )
    if not text.startswith(ENCODER_FORMS):
        raise UserError(
            f"ENCODER={text}: expected runs:/<id>, models:/…, latest[:<family>], hf:<folder> or reference:…"
        )
    return text


def checked_zero_shot(values: list[str]) -> list[tuple[str, str]]:
    """``pooling:mix`` pairs (``none``: none)."""
    if values == ["none"]:
        return []
    methods = []
    for value in values:
        pooling, _, mix = value.partition(":")
        if pooling not in POOLINGS or not mix:
            raise UserError(f"--zero-shot {value}: expected mean:<average|top|layer:K> or sentence-transformers:top")
        methods.append((pooling, mix))
    return methods


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_arguments(argv)
    tasks = checked_tasks(args.tasks)
    encoder = checked_encoder(args.encoder)
    zero_shot = checked_zero_shot(args.zero_shot)
    if args.seeds is not None and args.seeds < 1:
        raise UserError(f"SEEDS={args.seeds}: at least 1")
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: at least 1")
    if args.template is not None and not args.template.is_file():
        raise UserError(f"--template {args.template}: no such file")
    data = {task: load_pair_data(dataset=task) for task in tasks}  # a missing folder: one line, before the imports
    from benchmarks.evaluate.run import Evaluation, evaluate  # torch, Lightning, MLflow: only now
    from benchmarks.evaluate.zero_shot_run import ZeroShot
    from downstream.zero_shot.pooling import zero_shot_mix

    for _, mix in zero_shot:
        try:
            zero_shot_mix(mix)
        except ValueError as error:
            raise UserError(f"--zero-shot: {error}") from None
    request = Evaluation(
        encoder,
        tasks,
        tuple(args.heads),
        args.seeds,
        args.twin,
        tuple(ZeroShot(pooling, mix) for pooling, mix in zero_shot),
        args.jobs,
        args.out,
        **({"template": args.template} if args.template else {}),
    )
    try:
        return evaluate(request, data)
    except KeyboardInterrupt:
        print(
            f"error: interrupted after {time.perf_counter() - started:.0f} s: the runs were marked KILLED; "
            f"the same command goes on (finished cells are skipped)",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    run_main(main)
