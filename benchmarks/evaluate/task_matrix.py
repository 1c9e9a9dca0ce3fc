"""The matrix each task of ``make evaluate`` runs through the benchmark suite: the template
``configs/benchmarks/evaluate.yaml`` with the encoder, the data set, the task's finetune config and
baselines and the random-init twin filled in, checked by the suite's own parser before anything runs."""

from __future__ import annotations

from pathlib import Path

from benchmarks.plan.matrix import parse_matrix
from harness.datasets.registry import task_of
from harness.unique_keys import load_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = REPO_ROOT / "configs" / "benchmarks" / "evaluate.yaml"


def task_benchmark(encoder_label: str, task: str) -> str:
    """The suite's benchmark name of one task of an evaluation: ``evaluate-<encoder>-<task>``."""
    return f"evaluate-{encoder_label}-{task}"


def task_matrix(
    task: str,
    encoder_name: str,
    source: str,
    encoder_label: str,
    twin: bool,
    heads: tuple[str, ...] = (),
    seeds: int | None = None,
    template: Path = TEMPLATE,
) -> dict:
    """The suite matrix of ``task`` for the encoder ``source`` (named ``encoder_name`` in method
    names): the template's finetune (its config the task's own ``configs/downstream/<task>.yaml``
    where there is one), mix, heads and seeds, plus ``heads`` (e.g. ``attn``) and
    ``seeds`` when given; the twin beside every cell when ``twin``; the task's baselines.

    Returns:
        the matrix as the suite's YAML holds it (checked by :func:`parse_matrix`).
    """
    matrix = dict(load_yaml(template))
    own_config = REPO_ROOT / "configs" / "downstream" / f"{task}.yaml"  # the task's own finetune config, if any
    if own_config.is_file():
        matrix["finetune"] = {**matrix.get("finetune", {}), "config": own_config.relative_to(REPO_ROOT).as_posix()}
    matrix.update(
        name=task_benchmark(encoder_label, task),
        experiment="evaluate",  # one experiment: the evaluation parent, its tasks and their cells nest in the UI
        dataset={"dataset": task},
        encoders=[{"name": encoder_name, "run": source}],
        heads=list(dict.fromkeys([*matrix.get("heads", []), *heads])),
        random_control=twin,
        baselines=list(task_of(task).baselines),
    )
    if seeds is not None:
        matrix["seeds"] = seeds
    parse_matrix(matrix, f"{template} ({task})")  # a mistake is one line before any run
    return matrix
