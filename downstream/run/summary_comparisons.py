"""The numbers a finetune result is read against, in its end-of-run summary: the baselines its
task lists (``Task.baselines``: majority class and TF-IDF + LR for classes, the word-overlap cosine
and TF-IDF + ridge for a graded task) scored on the run's own splits (the benchmark's baseline code,
:mod:`downstream.run.baselines`, scored by the finetune runs' metric code, in the task's metrics),
and its random-init twin (or, for a twin, its pretrained counterpart) when the store holds one with
the same settings.

Baselines are cached as a small JSON file per digest of the splits' content (data set content
hash, the pair ids of each split, the baselines' code), so they cost a file read after the first run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from downstream.run import baselines
from downstream.run.evaluation import predictions_frame, split_metrics
from harness.atomic import atomic_write
from harness.datasets.task import CLASSES, Task, metric_title
from harness.tracking.naming import twin_label
from pretrain.encoders.references import reference_of

BASELINE_SEED = 0  # a benchmark's baseline cells run at seed 0
TFIDF_MAX_TRAIN_PAIRS = 50_000  # above: its Python featurizer takes minutes; a benchmark still runs it
FEATURIZED = ("tfidf-lr", "tfidf-ridge")  # the baselines over baselines.PairFeaturizer, which that bound is about
TWIN_TAGS = ("finetune_mode", "mix", "head", "train_fraction", "seed", "dataset")
SETTING_PREFIXES = ("model.", "data.", "trainer.", "seed_everything")
ENCODER_PARAMS = {"model.encoder", "model.random_like"}  # what differs between a run and its twin
TWIN_CANDIDATES = 20


def baseline_key(data, pairs: dict[str, list]) -> str:
    """Digest of what the baselines' scores depend on: the data's content and labels, the ids of
    each split's pairs (a train fraction or ``max_pairs`` is another key) and the baselines' code."""
    code = Path(baselines.__file__).read_bytes()
    identity = {
        "content": data.content_hash,
        "labels": list(data.labels),
        "positive": data.positive_label,
        "splits": {split: data.ids_by_column(rows) for split, rows in sorted(pairs.items())},
        "code": hashlib.sha256(code).hexdigest(),
        "seed": BASELINE_SEED,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def _scores(name: str, data, pairs: dict[str, list]) -> dict[str, float]:
    """The baseline ``name`` fitted on ``pairs["train"]``, scored on ``pairs["test"]`` as a run is."""
    predicted = baselines.fit_baseline(name, pairs["train"], {"test": pairs["test"]}, data, BASELINE_SEED)
    frame = predictions_frame(data, pairs["test"], predicted["test"])
    return split_metrics(frame, "test", data)


def baseline_scores(data, pairs: dict[str, list], cache_dir: str | Path | None) -> dict[str, dict | str]:
    """The task's baselines fitted on ``pairs["train"]`` and scored on ``pairs["test"]`` in its
    metrics: ``{"majority": {"test_acc", "test_f1"}, "tfidf-lr": …}`` for classes, ``{"overlap-cosine":
    {"test_pearson", "test_spearman"}, "tfidf-ridge": …}`` for a graded task; a system that cannot run
    there maps to the reason, in words.
    Read from ``<cache_dir>/baselines/<key>.json`` when there, else computed and written there
    (``cache_dir`` None: computed, nothing written)."""
    path = Path(cache_dir) / "baselines" / f"{baseline_key(data, pairs)}.json" if cache_dir else None
    if path is not None and path.is_file():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass  # unreadable: computed again and rewritten
    scores: dict[str, dict | str] = {}
    for name in data.task.baselines:
        if name in FEATURIZED and len(pairs["train"]) > TFIDF_MAX_TRAIN_PAIRS:
            scores[name] = f"not computed here above {TFIDF_MAX_TRAIN_PAIRS} train pairs (a benchmark runs it)"
            continue
        try:
            scores[name] = _scores(name, data, pairs)
        except ValueError as error:  # a train set of one class (or one score), say
            scores[name] = str(error).split(": ", 1)[-1]
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda temporary: temporary.write_text(json.dumps(scores, indent=1)))
        except OSError:
            pass  # a read-only or full cache folder costs the next run a recomputation, nothing more
    return scores


def same_settings(params: dict[str, str], other: dict[str, str]) -> bool:
    """Whether two runs' params agree on every model, data and trainer setting and the seed, the
    encoder they name aside."""

    def settings(values: dict[str, str]) -> dict[str, str]:
        return {
            key: value
            for key, value in values.items()
            if key.startswith(SETTING_PREFIXES) and key not in ENCODER_PARAMS
        }

    return settings(params) == settings(other)


def twin_run(client, experiment_id: str, run_id: str, tags: dict[str, str]):
    """The newest finished run of this run's other arm: same mode, mix, head, fraction, seed and
    data set, the other ``encoder`` label (``random-<label>`` for a pretrained run, ``<label>``
    for a twin), and the same settings in its params (:func:`same_settings`); None if none."""
    query = " and ".join(f"tags.{key} = '{tags[key]}'" for key in TWIN_TAGS if key in tags)
    query += f" and tags.encoder = '{twin_label(tags['encoder'])}' and attributes.status = 'FINISHED'"
    params = client.get_run(run_id).data.params
    for candidate in client.search_runs(
        [experiment_id], query, order_by=["attributes.start_time DESC"], max_results=TWIN_CANDIDATES
    ):
        if candidate.info.run_id != run_id and same_settings(params, candidate.data.params):
            return candidate
    return None


def test_pairs_title(test_title: str, test_pairs: int | None, all_test_pairs: int | None) -> str:
    """The test pairs every context row is scored on: ``MSR test, 1725 pairs``, or the subset a
    ``--data.max_pairs`` run uses, ``MSR test: 1000 of its 1725 pairs``."""
    if test_pairs is None:
        return test_title
    if all_test_pairs is not None and test_pairs < all_test_pairs:
        return f"{test_title}: {test_pairs} of its {all_test_pairs} pairs"
    return f"{test_title}, {test_pairs} pairs"


def context_lines(
    results: dict[str, float],
    scores: dict[str, dict | str] | None,
    twin,
    is_random: bool,
    f1_kind: str,
    test_title: str,
    twin_flags: str,
    collapsed: bool = False,
    test_pairs: int | None = None,
    all_test_pairs: int | None = None,
    interval: str | None = None,
    task: Task = CLASSES,
) -> list[str]:
    """The summary's ``context`` block of a task of classes (``task``): this run's test accuracy and
    F1 above its baselines (the majority class, TF-IDF + LR) and the other arm (``twin``: an MLflow
    run or None), then the gap pretrained − random, all as fractions, like the metrics. ``scores``
    None: the baselines were not computed here (a benchmark's cell: its own baseline cells hold
    them). ``twin_flags``: what to add to this command to run the missing arm; ``collapsed``: this
    run predicted one label for every test pair (said beside its row); ``test_pairs`` of
    ``all_test_pairs``: the test pairs scored, named in the header and beside the majority class
    (whose rate is that subset's, not the published one); ``interval``: this run's 95% intervals over
    those pairs (:mod:`downstream.run.item_intervals`), below its row."""
    other = "pretrained counterpart" if is_random else "random twin"
    scored_on = test_pairs_title(test_title, test_pairs, all_test_pairs)
    lines = [
        f"  {'context':<10} test acc  F1{f1_kind:<8} ({scored_on}, the same pairs in every row)",
        f"  {'':<10} {results['test_acc']:.3f}     {results['test_f1']:.3f}     this run"
        + (" (one label for every pair: collapsed)" if collapsed else ""),
        *([f"  {'':<10} {interval}"] if interval else []),
    ]
    for name in task.baselines:
        value, title = (scores or {}).get(name), baselines.BASELINES[name].title
        if isinstance(value, dict):
            subset = name == "majority" and None not in (test_pairs, all_test_pairs) and test_pairs < all_test_pairs
            note = baselines.BASELINES[name].note + (
                f"; these {test_pairs} of {all_test_pairs} test pairs" if subset else ""
            )
            lines.append(f"  {'':<10} {value['test_acc']:.3f}     {value['test_f1']:.3f}     {title} ({note})")
        elif isinstance(value, str):
            lines.append(f"  {'':<10} {'–':<9} {'–':<9} {title}: {value}")
    if twin is None:
        lines.append(f"  {'gap':<10} no {other} with these settings in the store yet; to run it, add")
        lines.append(f"  {'':<10}   {twin_flags}")
        return lines
    metrics = twin.data.metrics
    lines.append(
        f"  {'':<10} {metrics['test_acc']:.3f}     {metrics['test_f1']:.3f}     {other} (run {twin.info.run_id})"
    )
    pretrained, random = (metrics, results) if is_random else (results, metrics)
    gap = pretrained["test_acc"] - random["test_acc"]
    lines.append(f"  {'gap':<10} {gap:+.3f}    test acc (pretrained − random twin), 1 seed each:")
    lines.append(f"  {'':<10} `make benchmark` repeats seeds and tests such a gap")
    return lines


def scores_text(values: dict[str, float], task: Task, split: str = "test") -> str:
    """``Pearson r 71.2  Spearman ρ 69.8``: a split's scores in the task's metrics, × 100 (how a
    graded summary prints correlations)."""
    return "  ".join(f"{metric_title(metric)} {100 * values[f'{split}_{metric}']:.1f}" for metric in task.metrics)


def baseline_lines(scores: dict[str, dict | str] | None, task: Task) -> list[str]:
    """The task's baselines as rows of a graded summary's ``context`` block, below this run's row
    (``downstream.run.graded_summary``): each one's test scores × 100 (:func:`scores_text`), or why it
    did not run; none where ``scores`` is None (a benchmark's cell: its baseline cells hold them)."""
    lines = []
    for name in task.baselines:
        value, baseline = (scores or {}).get(name), baselines.BASELINES[name]
        if isinstance(value, dict):
            lines.append(f"  {'':<10} {scores_text(value, task)}   {baseline.title} ({baseline.note})")
        elif isinstance(value, str):
            lines.append(f"  {'':<10} –   {baseline.title}: {value}")
    return lines


def twin_flags(encoder) -> str:
    """The flags that turn the command of ``encoder``'s run into that of its other arm."""
    if encoder.is_random:
        return f"--model.encoder={reference_of(encoder).source}"
    return f"--model.encoder=random --model.random_like={reference_of(encoder)}"


def features_lines(finetune: str, standardize: bool) -> list[str]:
    """How the head saw the encoder: frozen and standardised (said, since it is the default), frozen
    and raw, or trained under the head."""
    if finetune != "frozen":
        return [f"  {'encoder':<10} trained under the head ({finetune}); features not standardised"]
    if standardize:
        return [
            f"  {'features':<10} frozen, standardised per dimension on the train tokens",
            f"  {'':<10} (--model.standardize: the default for frozen transfers, twins alike)",
        ]
    return [
        f"  {'features':<10} frozen, raw (--model.standardize=false: a random twin's head may not",
        f"  {'':<10} learn from raw features)",
    ]
