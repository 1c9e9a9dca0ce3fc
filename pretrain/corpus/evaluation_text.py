"""Evaluation sentences in pretraining text: counted for every task whose data is at hand, and kept
out on request.

A transfer result means less where the encoder was pretrained on the sentences it is tested on
(STS-B's news genre holds MSR Paraphrase pairs; SICK's splits share sentences with each other), so
a pretraining run counts, for its own pair data set, each data set ``--data.keep_out`` names and
every other registered data set whose files are where it looks without flags (``DataSet.findable``:
``$SICK_DIR``, ``$STSB_DIR``, ``$DATA_ROOT/…``; sick-e and sick-r share SICK's sentences), the
distinct dev and test sentences its pretraining text holds (params ``contamination_<task>_dev`` and
``_test``); ``--data.keep_out`` removes those sentences from the whole pretraining text, a pair
data set's own train sentences included. :func:`contamination_table` gives the same counts for any
named corpora, per (corpus, task, split). Sentences are compared as a model sees them:
:func:`harness.datasets.overlap.seen_text` (NFKC, invisible characters dropped, case folded, spaces
normalised) — the one normalisation the harness uses for overlap.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.datasets.overlap import seen_text
from harness.datasets.registry import DATASETS, dataset_choices, dataset_entry, load_pair_data
from harness.datasets.spec import PairDataSpec
from harness.datasets.types import PairData
from harness.errors import UserError

EVALUATION_SPLITS = ("dev", "test")
FLAG = "--data.keep_out"


@dataclass(frozen=True)
class EvaluationText:
    """The dev and test sentences of one task, as a model sees them (:func:`seen_text`)."""

    task: str  # the data set's name, as params name it
    sentences: dict[str, frozenset[str]]  # split -> distinct seen texts

    def param_name(self, split: str) -> str:
        return f"contamination_{self.task.replace('-', '_')}_{split}"


def evaluation_text(data: PairData) -> EvaluationText:
    """The dev and test sentences of a data set already read."""
    return EvaluationText(
        data.name, {split: frozenset(map(seen_text, data.sentences(split))) for split in EVALUATION_SPLITS}
    )


def findable_evaluation_texts(skip: Iterable[str] = ()) -> list[EvaluationText]:
    """The evaluation text of every registered data set whose files are in its default folder
    (``DataSet.findable``), in registry order, but those named in ``skip``. Read without the split
    checks (nothing is trained here); one that cannot be read is said in one line on stderr and
    left out."""
    texts = []
    for name, entry in DATASETS.items():
        if name in skip or not entry.findable():
            continue
        try:
            texts.append(evaluation_text(entry.load(PairDataSpec(dataset=name))))
        except UserError as error:
            print(f"contamination: {name} not counted: {error}", file=sys.stderr)
    return texts


def named_evaluation_texts(names: list[str] | None, own: PairData) -> list[EvaluationText]:
    """The run's own pair data set's evaluation text, then that of each named data set (read from
    its default folder: ``$MRPC_DIR``, ``$SICK_DIR`` …), each once, then that of every other data set
    whose files are at hand (:func:`findable_evaluation_texts`, counted only); a name that is no data
    set, or one whose files cannot be read, is a one-line UserError naming the flag."""
    texts = [evaluation_text(own)]
    for name in dict.fromkeys(names or []):
        if name in {text.task for text in texts}:
            continue
        try:
            dataset_entry(name)
        except UserError:
            raise UserError(f"{FLAG}={name}: not a named data set; expected {dataset_choices()}") from None
        try:
            data = load_pair_data(dataset=name)
        except UserError as error:
            raise UserError(f"{FLAG}={name}: {error}") from None
        texts.append(evaluation_text(data))
    return texts + findable_evaluation_texts({own.kind, *(text.task for text in texts)})


def contamination(train: list[str], texts: list[EvaluationText]) -> dict[str, int]:
    """``contamination_<task>_<split>``: how many distinct dev / test sentences of each task the
    pretraining sentences ``train`` hold, compared as seen texts."""
    seen = set(map(seen_text, train))
    return {text.param_name(split): len(text.sentences[split] & seen) for text in texts for split in EVALUATION_SPLITS}


def contamination_table(
    corpora: Mapping[str, Iterable[str]], texts: list[EvaluationText] | None = None
) -> dict[tuple[str, str, str], tuple[int, int]]:
    """For each corpus (name → its sentences) and each task's dev and test split (``texts``; default:
    every data set at hand, :func:`findable_evaluation_texts`): how many of the split's distinct
    sentences the corpus holds, compared as seen texts, and how many distinct sentences the split has.

    Returns:
        ``{(corpus, task, split): (found, distinct sentences of the split)}``.
    """
    texts = findable_evaluation_texts() if texts is None else texts
    table = {}
    for corpus, sentences in corpora.items():
        seen = set(map(seen_text, sentences))
        for text in texts:
            for split in EVALUATION_SPLITS:
                table[corpus, text.task, split] = (len(text.sentences[split] & seen), len(text.sentences[split]))
    return table


def keep_out(train: list[str], texts: list[EvaluationText]) -> tuple[list[str], int]:
    """``train`` without any sentence that is (as a seen text) a dev or test sentence of ``texts``.

    Returns:
        the kept sentences in order, and how many were removed.
    """
    banned = frozenset().union(*(text.sentences[split] for text in texts for split in EVALUATION_SPLITS))
    kept = [sentence for sentence in train if seen_text(sentence) not in banned]
    return kept, len(train) - len(kept)


def contamination_line(params: dict) -> str:
    """The pretraining summary's line: each task's dev and test sentences found in the text."""
    counts = {
        key.removeprefix("contamination_"): value for key, value in params.items() if key.startswith("contamination_")
    }
    tasks = dict.fromkeys(key.rsplit("_", 1)[0] for key in counts)
    found = "; ".join(
        f"{task.replace('_', '-')} dev {counts[f'{task}_dev']}, test {counts[f'{task}_test']}" for task in tasks
    )
    kept = f" (after keeping out {params['kept_out_sentences']} sentences)" if "kept_out_sentences" in params else ""
    return f"{found} distinct sentences in the pretraining text{kept}"
