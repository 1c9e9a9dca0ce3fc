"""The table across tasks of ``make evaluate``: a row per method (the encoder's zero-shot
similarity, linear probe and heads, the random-init twin's, the baselines), a column per task
holding its main test score × 100 (mean over seeds, ± their standard deviation with more than one),
and the published anchors of each task's data-set entry below them. Zero-shot rows hold the task's
``zero_shot_metric`` (Spearman, MTEB's), every other row its ``main_metric`` (accuracy for classes,
Pearson for graded scores, SentEval's)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from benchmarks.cell.method_names import twin_name
from harness.datasets.registry import published_anchors, task_of
from harness.datasets.task import metric_title

ZERO_SHOT_KIND = "zero-shot"


@dataclass
class TaskScores:
    """What one task of an evaluation produced: per method, its kind and the test scores of its seeds."""

    task: str
    wall_seconds: float = 0.0
    scores: dict[str, list[float]] = field(default_factory=dict)  # method → test main score per seed, [0, 1] scale
    kinds: dict[str, str] = field(default_factory=dict)  # method → finetune | probe | baseline | zero-shot | …
    test_pairs: int = 0  # the task's test pairs
    seen_pairs: dict[str, int] = field(default_factory=dict)  # method → test pairs with a sentence the encoder read
    unseen: dict[str, list[float]] = field(default_factory=dict)  # method → its score over the other pairs, per seed

    def add(self, method: str, kind: str, metrics: dict[str, float]) -> None:
        """A finished run's test score: ``test_<zero_shot_metric>`` for zero-shot, else
        ``test_<main_metric>``; where its encoder's pretraining text is known, the test pairs it
        holds a sentence of (``test_seen_pairs``) and the score without them (``…_unseen``)."""
        task = task_of(self.task)
        metric = task.zero_shot_metric if kind == ZERO_SHOT_KIND else task.main_metric
        value = metrics.get(f"test_{metric}")
        if value is not None:
            self.scores.setdefault(method, []).append(float(value))
            self.kinds.setdefault(method, kind)
        if value is not None and "test_seen_pairs" in metrics:
            self.seen_pairs[method] = int(metrics["test_seen_pairs"])
            if f"test_{metric}_unseen" in metrics:
                self.unseen.setdefault(method, []).append(float(metrics[f"test_{metric}_unseen"]))


def score_text(values: list[float]) -> str:
    """``82.0`` for one seed, ``71.3 ± 0.4`` (sample standard deviation) for more, × 100."""
    mean = 100 * statistics.fmean(values)
    return f"{mean:.1f}" if len(values) < 2 else f"{mean:.1f} ± {100 * statistics.stdev(values):.1f}"


def row_order(method: str, kind: str) -> tuple[int, str]:
    """The encoder's methods first (zero-shot, probe, heads), then the twin's, then the baselines."""
    twin = method.startswith("random")
    group = 2 if kind == "baseline" else (1 if twin else 0)
    within = {ZERO_SHOT_KIND: 0, "probe": 1}.get(kind, 2)
    return (group * 3 + within, method)


def header(tasks: list[TaskScores]) -> list[str]:
    """Each task's column title: its name and main metric (``stsb test Pearson r``)."""
    return [f"{scores.task} ({metric_title('test_' + task_of(scores.task).main_metric)})" for scores in tasks]


def twin_of(method: str, encoder: str) -> str | None:
    """The twin's method of an encoder's method (``elmo-linear-probe`` → ``random-linear-probe``)."""
    return f"{twin_name()}-{method.removeprefix(encoder + '-')}" if method.startswith(encoder + "-") else None


def cell_text(scores: TaskScores, method: str, encoder: str, unseen: bool = False) -> str:
    """A method's score, with the gap to its twin's (points, the same seeds' means) where the twin
    ran; ``unseen``: over the test pairs without a sentence the encoder read (the twin: the same pairs)."""
    values = scores.unseen if unseen else scores.scores
    if method not in values:
        return ""
    twin = twin_of(method, encoder)
    if twin not in values:
        return score_text(values[method])
    gap = 100 * (statistics.fmean(values[method]) - statistics.fmean(values[twin]))
    return f"{score_text(values[method])} ({gap:+.1f})"


def seen_rows(tasks: list[TaskScores], kinds: dict[str, str], encoder: str) -> list[list[str]]:
    """Where the encoder's pretraining text is known: how many test pairs have a sentence it read
    (its own methods' count), and each method's score without them where there are any."""
    counts = []
    for scores in tasks:
        own = [count for method, count in scores.seen_pairs.items() if not method.startswith(twin_name())]
        of = f" of {scores.test_pairs}" if scores.test_pairs else ""
        counts.append(f"{own[0]}{of}" if own else "")
    if not any(counts):
        return []
    rows = [["test pairs with a sentence the encoder read", *counts]]
    unseen = {method for scores in tasks for method in scores.unseen}
    for method in sorted(unseen, key=lambda name: row_order(name, kinds[name])):
        label = f"{method} (ρ)" if kinds[method] == ZERO_SHOT_KIND else method
        rows.append([f"{label}, without them", *(cell_text(scores, method, encoder, True) for scores in tasks)])
    return rows


def table_rows(tasks: list[TaskScores], encoder: str = "", sources: bool = True) -> list[list[str]]:
    """``[method, cell per task]`` rows: methods (an encoder's with its gap to the twin), then the
    anchors (``anchor: <system> [<source>]``; without the source when not ``sources``)."""
    kinds = {method: kind for scores in tasks for method, kind in scores.kinds.items()}
    rows = []
    for method in sorted(kinds, key=lambda name: row_order(name, kinds[name])):
        label = f"{method} (ρ)" if kinds[method] == ZERO_SHOT_KIND else method
        rows.append([label, *(cell_text(scores, method, encoder) for scores in tasks)])
    rows += seen_rows(tasks, kinds, encoder)
    for column, scores in enumerate(tasks):
        task, anchors = task_of(scores.task), published_anchors(scores.task)
        metrics = list(getattr(anchors, "metrics", task.metrics))  # what each figure of a row is
        for system, *values, source in anchors.rows if anchors else ():
            figures = dict(zip(metrics, values))
            main, zero_shot = figures.get(task.main_metric), figures.get(task.zero_shot_metric)
            shown = f"{main:.1f}" if main is not None else (f"{zero_shot:.1f} (ρ)" if zero_shot is not None else "")
            if shown:
                cells = ["" for _ in tasks]
                cells[column] = shown
                rows.append([f"anchor: {system}" + (f" [{source}]" if sources else ""), *cells])
    return rows


def markdown_table(tasks: list[TaskScores], title: str, notes: list[str] = (), encoder: str = "") -> str:
    """The table as Markdown, with a line of wall times and the notes under it."""
    titles = header(tasks)
    lines = [f"# {title}", "", "| method | " + " | ".join(titles) + " |", "|---|" + "---:|" * len(titles)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(tasks, encoder)]
    lines += ["", wall_line(tasks)]
    for note in notes_of(notes):
        lines += ["", note]
    return "\n".join(lines) + "\n"


def notes_of(notes: list[str]) -> list[str]:
    return [
        "Test scores × 100, mean over seeds (± sd with more than one); in parentheses the gap to the random-init "
        "twin's same method, in points. (ρ): zero-shot similarity, Spearman ρ × 100 (MTEB's main score); other "
        "rows the task's main score (accuracy; Pearson r for graded tasks, SentEval's).",
        *notes,
    ]


def wall_line(tasks: list[TaskScores]) -> str:
    total = sum(scores.wall_seconds for scores in tasks)
    each = ", ".join(f"{scores.task} {scores.wall_seconds / 60:.1f}" for scores in tasks)
    return f"Wall time: {total / 60:.1f} min ({each})."


def console_table(tasks: list[TaskScores], encoder: str = "") -> str:
    """The same table for a terminal: fixed-width columns, anchors without their sources, the wall times."""
    titles = header(tasks)
    rows = table_rows(tasks, encoder, sources=False)
    first = max([len("method"), *(len(row[0]) for row in rows)])
    widths = [max([len(title), *(len(row[k + 1]) for row in rows)]) for k, title in enumerate(titles)]
    lines = ["  " + "method".ljust(first) + "".join(f"  {title:>{w}}" for title, w in zip(titles, widths))]
    for row in rows:
        lines.append("  " + row[0].ljust(first) + "".join(f"  {cell:>{w}}" for cell, w in zip(row[1:], widths)))
    return "\n".join([*lines, "  " + wall_line(tasks)])
