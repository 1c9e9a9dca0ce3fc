"""Pretraining corpus: which sentences the biLM may see, tokenized and batched by length.

Pretraining text is the GLUE train split of MRPC (de-duplicated), or a user's plain-text file,
optionally plus extra plain-text corpora. Held-out perplexity is measured on GLUE dev sentences
that are not in the pretraining text. Dev and test sentences never reach the vocabulary or the
pretraining text unless ``transductive=True``.

A pretraining sentence longer than ``max_tokens`` words (a paragraph, or a file without sentence
breaks) is cut into near-equal pieces of at most ``max_tokens`` words, each its own ``<S> … </S>``
sequence: the longest training batch is then ``batch_size × (max_tokens + 2)`` tokens whatever
the corpus holds, and the memory a step needs is bounded and checked before training.
"""

from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_only
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from harness.batching import BucketBatchSampler, pad_batch
from harness.errors import UserError
from harness.mrpc import load_mrpc
from pretrain.tokenize import BOS_ID, EOS_ID, Tokenizer

# Above MRPC's longest sentence (41 words), so MRPC is never cut and a pathological line (a file
# without sentence breaks) costs no more memory than MRPC's longest batch. Cuts 3.8% of the
# Reuters-21578 and Brown sentences and 16% of SOTU's, into pieces of 24 words or more (bilm-tf
# trains on windows of 20 tokens).
DEFAULT_MAX_TOKENS = 48


def read_text_file(path: str | Path, flag: str) -> list[str]:
    """Read one sentence per line (UTF-8, BOM and CRLF tolerated, blank lines skipped).

    Returns:
        the non-blank lines, stripped. ``flag`` names the option in error messages.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{flag}={path}: no such file (expected plain text, one sentence per line)")
    sentences = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise UserError(f"{path}:{number}: not UTF-8 ({error.reason} at byte {error.start})") from None
            if line.strip():
                sentences.append(line.strip())
    if not sentences:
        raise UserError(f"{flag}={path}: the file has no sentences")
    return sentences


def unique(sentences: list[str]) -> list[str]:
    """De-duplicate, keeping first occurrences in order."""
    return list(dict.fromkeys(sentences))


def encode_sentences(tokenizer: Tokenizer, sentences: list[str]) -> list[torch.Tensor]:
    return [torch.tensor(tokenizer.encode(sentence), dtype=torch.long) for sentence in sentences]


def split_long(sequences: list[torch.Tensor], max_tokens: int) -> tuple[list[torch.Tensor], int]:
    """Cut every ``<S> … </S>`` sequence of more than ``max_tokens`` words into the fewest
    near-equal pieces of at most ``max_tokens`` words, each wrapped in its own ``<S> … </S>``.

    Returns:
        the sequences in order (pieces in place of the long ones), and how many were cut.
    """
    pieces, cut = [], 0
    for sequence in sequences:
        words = sequence[1:-1]
        if len(words) <= max_tokens:
            pieces.append(sequence)
            continue
        cut += 1
        for part in torch.tensor_split(words, math.ceil(len(words) / max_tokens)):
            pieces.append(torch.cat([torch.tensor([BOS_ID]), part, torch.tensor([EOS_ID])]))
    return pieces, cut


class BiLMDataModule(pl.LightningDataModule):
    """Sentences for biLM pretraining, read and checked in full at construction.

    Args:
        mrpc_dir: folder with the MSR release files (default: ``$MRPC_DIR`` or ``data/mrpc``).
        corpus: ``"mrpc"`` (GLUE train sentences) or a plain-text file, one sentence per line.
        extra_corpus: more plain-text files added to the pretraining text.
        transductive: also pretrain (and build the vocabulary) on GLUE dev and MSR test sentences.
        min_frequency: words seen fewer times in the pretraining text become ``<UNK>``.
        max_vocab_size: keep at most this many entries, most frequent first.
        batch_size: sentences per batch.
        bucket: length-bucketed batches (False: random batches, more padding).
        max_sentences: use only the first N pretraining sentences (smoke tests, learning curves).
        max_tokens: pretraining sentences longer than this many words are cut into pieces
            (counted in the run's ``long_sentences_split`` param); held-out sentences stay whole.
    """

    def __init__(
        self,
        mrpc_dir: str | None = None,
        corpus: str = "mrpc",
        extra_corpus: list[str] | None = None,
        transductive: bool = False,
        min_frequency: int = 1,
        max_vocab_size: int | None = None,
        batch_size: int = 16,
        bucket: bool = True,
        max_sentences: int | None = None,
        num_workers: int = 0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ):
        super().__init__()
        self.save_hyperparameters(logger=False)
        if batch_size < 1:
            raise UserError(f"--data.batch_size={batch_size}: must be at least 1")
        if max_tokens < 1:
            raise UserError(f"--data.max_tokens={max_tokens}: must be at least 1")
        splits = load_mrpc(mrpc_dir)
        held_out = unique([s for pair in splits.dev for s in (pair.sentence1, pair.sentence2)])
        test = unique([s for pair in splits.test for s in (pair.sentence1, pair.sentence2)])
        if corpus == "mrpc":
            train = [s for pair in splits.train for s in (pair.sentence1, pair.sentence2)]
        else:
            train = read_text_file(corpus, "--data.corpus")
        for path in extra_corpus or []:
            train += read_text_file(path, "--data.extra_corpus")
        train = unique(train)
        if transductive:
            train = unique(train + held_out + test)
        else:
            excluded = set(held_out) | set(test)
            # MRPC sentences can recur across pairs: a dev/test sentence that is also part of a
            # GLUE train pair is legitimately seen. Only *other* text (user or extra corpora)
            # is filtered, so no dev/test-only sentence sneaks in through it.
            mrpc_train = {s for pair in splits.train for s in (pair.sentence1, pair.sentence2)}
            before = len(train)
            train = [s for s in train if s in mrpc_train or s not in excluded]
            self.removed_evaluation_sentences = before - len(train)
        if max_sentences is not None:
            train = train[:max_sentences]
        if not train:
            raise UserError("--data.corpus: no pretraining sentences left")
        training = set(train)
        validation = [s for s in held_out if s not in training] or held_out
        self.tokenizer = Tokenizer.build(train, min_frequency=min_frequency, max_size=max_vocab_size)
        self.train_ids, self.long_sentences = split_long(encode_sentences(self.tokenizer, train), max_tokens)
        self.validation_ids = encode_sentences(self.tokenizer, validation)
        self.validation_sentences = validation
        self.train_tokens = sum(len(ids) for ids in self.train_ids)
        # the pieces are part of what is trained on; a corpus with nothing to cut keeps its hash
        cutting = [f"max_tokens={max_tokens}"] if self.long_sentences else []
        self.content_hash = hashlib.sha256(
            "\n".join(["train", *train, "validation", *validation, *cutting]).encode()
        ).hexdigest()
        if self.long_sentences and rank_zero_only.rank == 0:
            print(f"corpus: {self.long_sentences} sentence(s) longer than --data.max_tokens={max_tokens} words "
                  f"cut into pieces ({len(self.train_ids)} training sequences)", file=sys.stderr)
        self.summary = {
            "data_hash": self.content_hash,
            "mrpc_hash": splits.content_hash,
            "vocab_size": len(self.tokenizer),
            "train_sentences": len(train),
            "train_sequences": len(self.train_ids),
            "long_sentences_split": self.long_sentences,
            "train_tokens": self.train_tokens,
            "validation_sentences": len(validation),
            "validation_tokens": sum(len(ids) for ids in self.validation_ids),
            "unk_rate_validation": self._unk_rate(self.validation_ids),
        }
        if not transductive:
            self.summary["removed_evaluation_sentences"] = self.removed_evaluation_sentences

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    @staticmethod
    def _unk_rate(sequences: list[torch.Tensor]) -> float:
        tokens = torch.cat(sequences)
        return round(float((tokens == 1).float().mean()), 4)

    def _loader(self, sequences: list[torch.Tensor], train: bool) -> DataLoader:
        batch_size = self.hparams.batch_size
        sampler = RandomSampler(sequences) if train else SequentialSampler(sequences)
        if self.hparams.bucket or not train:
            lengths = [len(sequence) for sequence in sequences]
            pool = 50 if train else len(sequences)
            batch_sampler = BucketBatchSampler(sampler, batch_size, drop_last=False, lengths=lengths, pool_batches=pool)
        else:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last=False)
        return DataLoader(sequences, batch_sampler=batch_sampler, collate_fn=pad_batch,
                          num_workers=self.hparams.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_ids, train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.validation_ids, train=False)
