"""Pretraining corpora: which texts ``--data.corpus`` names, read once, and how a run records them.

``--data.corpus`` takes one entry or a list; an entry is a named set or a plain-text file (one
sentence per line). Names, joinable with ``+`` (``mrpc+reuters``):

- ``mrpc`` (alias ``pairs``): the train sentences of the pair data set in use (``--data.dataset``;
  MRPC's GLUE train by default);
- ``reuters``, ``brown``, ``sotu``: ``sentences.txt`` of ``reuters21578/``, ``brown/``, ``sotu/``
  under the corpora folder (``--data.corpora_dir``, else ``$CORPORA_DIR``, else
  ``<repo>/../shared/data``);
- ``all-shared``: ``mrpc+reuters+brown+sotu``.

An entry that is not made of names only is a file path (write ``./reuters`` for a file of that name).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UserError
from harness.tracking.runs import REPO_ROOT

PAIR_TRAIN = "mrpc"  # the pair data set's train sentences
PAIR_TRAIN_ALIASES = ("mrpc", "pairs")
SHARED_FOLDERS = {"reuters": "reuters21578", "brown": "brown", "sotu": "sotu"}
GROUPS = {"all-shared": (PAIR_TRAIN, *SHARED_FOLDERS)}
SENTENCES_FILE = "sentences.txt"
DIGEST_LENGTH = 32  # hex characters of sha256 kept as an MLflow dataset digest (its column holds 36)
_UNSAFE = re.compile(r"[^\w.\- ]+")


@dataclass(frozen=True)
class Corpus:
    """One source of pretraining text, as read (before de-duplication and the dev/test filter)."""

    name: str  # the corpus's name in params and MLflow inputs: a set's name or the file's stem
    source: str  # the file it was read from
    sentences: list[str]
    digest: str  # sha256 hex of the sentences, one per line


def default_corpora_dir() -> Path:
    """``$CORPORA_DIR`` if set, else the shared data folder beside the repository."""
    configured = os.environ.get("CORPORA_DIR", "").strip()
    return Path(configured).expanduser() if configured else REPO_ROOT.parent / "shared" / "data"


def read_text_file(path: str | Path, flag: str) -> list[str]:
    """Read one sentence per line (UTF-8, BOM and CRLF tolerated, blank lines skipped).

    Returns:
        the non-blank lines, stripped. ``flag`` names the option in error messages.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{flag}={path}: no such file (expected plain text, one sentence per line)")
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 ({error.reason} at byte {error.start})") from None
    sentences = [line.strip() for line in text.split("\n") if line.strip()]  # strip() drops a CR
    if not sentences:
        raise UserError(f"{flag}={path}: the file has no sentences")
    return sentences


def digest_of(sentences: list[str]) -> str:
    """sha256 hex of the sentences, one per line."""
    hasher = hashlib.sha256()
    for start in range(0, len(sentences), 4096):
        hasher.update("".join(sentence + "\n" for sentence in sentences[start : start + 4096]).encode("utf-8"))
    return hasher.hexdigest()


def entries(corpus: str | list[str] | None) -> list[str]:
    """The corpus flag as a flat list of set names and file paths, in order, each once."""
    items = [corpus] if isinstance(corpus, str) else list(corpus or [])
    if not items:
        raise UserError("--data.corpus: empty; name a set (mrpc, reuters, brown, sotu, all-shared) or a file")
    names = {*PAIR_TRAIN_ALIASES, *SHARED_FOLDERS, *GROUPS}
    flat = []
    for item in map(str, items):
        parts = item.split("+")
        if all(part in names for part in parts):
            for part in parts:
                flat += GROUPS.get(part, (PAIR_TRAIN if part in PAIR_TRAIN_ALIASES else part,))
        else:
            flat.append(item)
    return list(dict.fromkeys(flat))


def _unique_name(name: str, taken: set[str]) -> str:
    name = _UNSAFE.sub("_", name).strip() or "text"
    candidate, number = name, 2
    while candidate in taken:
        candidate, number = f"{name}-{number}", number + 1
    taken.add(candidate)
    return candidate


def read_corpora(
    corpus: str | list[str] | None,
    extra_corpus: list[str] | None,
    pair_train: list[str],
    pair_source: str,
    pair_name: str = PAIR_TRAIN,
    corpora_dir: str | None = None,
) -> list[Corpus]:
    """Read every corpus ``--data.corpus`` and ``--data.extra_corpus`` name, in order.

    ``pair_train``: the pair data set's train sentences (the ``mrpc`` set), read from ``pair_source``;
    that corpus is named ``pair_name`` (the data set's name).

    Returns:
        one Corpus per source; a missing or unreadable one raises a one-line UserError.
    """
    folder = Path(corpora_dir).expanduser() if corpora_dir else default_corpora_dir()
    taken: set[str] = set()
    corpora = []
    for entry in entries(corpus):
        if entry == PAIR_TRAIN:
            corpora.append(Corpus(_unique_name(pair_name, taken), pair_source, list(pair_train), digest_of(pair_train)))
            continue
        if entry in SHARED_FOLDERS:
            path = folder / SHARED_FOLDERS[entry] / SENTENCES_FILE
            if not path.is_file():
                raise UserError(
                    f"--data.corpus={entry}: {path} not found; set --data.corpora_dir (or CORPORA_DIR) "
                    f"to the folder holding {SHARED_FOLDERS[entry]}/{SENTENCES_FILE}"
                )
            name, flag = entry, "--data.corpus"
        else:
            path, name, flag = Path(entry), Path(entry).stem, "--data.corpus"
        sentences = read_text_file(path, flag)
        corpora.append(Corpus(_unique_name(name, taken), str(path), sentences, digest_of(sentences)))
    for entry in extra_corpus or []:
        sentences = read_text_file(entry, "--data.extra_corpus")
        corpora.append(Corpus(_unique_name(Path(entry).stem, taken), str(entry), sentences, digest_of(sentences)))
    return corpora


def combine(corpora: list[Corpus]) -> tuple[list[str], dict[str, str]]:
    """All corpora's sentences, de-duplicated (first occurrence kept, in corpus order).

    Returns:
        (sentences, origin): ``origin[sentence]`` is the name of the corpus that contributed it.
    """
    origin: dict[str, str] = {}
    for corpus in corpora:
        for sentence in corpus.sentences:
            origin.setdefault(sentence, corpus.name)
    return list(origin), origin


def cut_note(limit: int, sentences: list[str], origin: dict[str, str]) -> str:
    """What keeping the first ``limit`` of ``sentences`` (in corpus order) cut, per corpus:
    ``--data.max_sentences=400 kept the first 400 of 632 pretraining sentences: nli3 232 of 232,
    notes 168 of 400`` (the corpora listed first fill the limit; a later one may lose the most)."""
    before = Counter(origin.get(sentence, "evaluation") for sentence in sentences)
    after = Counter(origin.get(sentence, "evaluation") for sentence in sentences[:limit])
    kept = ", ".join(f"{name} {after[name]} of {count}" for name, count in before.items())
    return f"--data.max_sentences={limit} kept the first {limit} of {len(sentences)} pretraining sentences: {kept}"


def contribution(
    corpora: list[Corpus], origin: dict[str, str], sentences: list[str], token_counts: list[int]
) -> dict[str, dict[str, int]]:
    """Per corpus, the sentences and tokens it contributed to the final pretraining text.

    Returns:
        ``{"corpus_sentences": {name: n}, "corpus_tokens": {name: n}}``, every corpus listed; the
        counts add up to the text's sentences and tokens (``token_counts`` aligns with ``sentences``).
    """
    counted_sentences, counted_tokens = Counter(), Counter()
    for sentence, tokens in zip(sentences, token_counts):
        name = origin.get(sentence, "evaluation")  # transductive: dev/test sentences of the pair data set
        counted_sentences[name] += 1
        counted_tokens[name] += tokens
    names = [corpus.name for corpus in corpora] + (["evaluation"] if "evaluation" in counted_sentences else [])
    return {
        "corpus_sentences": {name: counted_sentences[name] for name in names},
        "corpus_tokens": {name: counted_tokens[name] for name in names},
    }


def log_corpora(client, run_id: str, corpora: list[Corpus]) -> None:
    """Log each corpus as an MLflow dataset input of the run (context ``pretrain``): its name, a
    content digest (sha256 prefix of its sentences) and its source file."""
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.data.sources import LocalArtifactDatasetSource
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.exceptions import MlflowException
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    inputs = []
    for corpus in corpora:
        dataset = MetaDataset(
            LocalArtifactDatasetSource(str(Path(corpus.source).resolve())),
            name=corpus.name,
            digest=corpus.digest[:DIGEST_LENGTH],
        )
        inputs.append(DatasetInput(dataset._to_mlflow_entity(), tags=[InputTag(MLFLOW_DATASET_CONTEXT, "pretrain")]))
    for attempt in range(3):
        try:
            client.log_inputs(run_id, datasets=inputs)
            return
        except MlflowException:
            # Runs started together may insert the same dataset row at once; the store keeps one
            # and refuses the other (a unique constraint). The row exists now: log again.
            if attempt == 2:
                raise
            time.sleep(0.2 * (attempt + 1))
