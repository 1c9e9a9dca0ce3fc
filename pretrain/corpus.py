"""Pretraining corpus: which sentences the biLM may see, tokenized and batched by length.

Pretraining text is the GLUE train split of MRPC (de-duplicated), or a user's plain-text file,
optionally plus extra plain-text corpora. Held-out perplexity is measured on GLUE dev sentences
that are not in the pretraining text. Dev and test sentences never reach the vocabulary or the
pretraining text unless ``transductive=True``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from harness.batching import BucketBatchSampler, pad_batch

from harness.errors import UserError
from harness.mrpc import load_mrpc
from pretrain.checkpoints import build_tokenizer, tokenizer_class
from pretrain.tokenize import Tokenizer


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


def encode_sentences(tokenizer, sentences: list[str]) -> list[torch.Tensor]:
    return [torch.tensor(tokenizer.encode(sentence), dtype=torch.long) for sentence in sentences]


def word_count(sentence: str) -> int:
    """Whitespace words + 1 for the sentence's end: the unit of ``val_ppl_word``."""
    return len(sentence.split()) + 1


def collate_with_words(items: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (B, T) padded ids, (B,) lengths and (B,) word counts."""
    token_ids, lengths = pad_batch([ids for ids, _ in items])
    return token_ids, lengths, torch.tensor([words for _, words in items])


def hold_out(sentences: list[str], keep: set[str], fraction: float = 0.02, minimum: int = 100,
             seed: int = 0) -> tuple[list[str], list[str]]:
    """Split a seeded random ``fraction`` (at least ``minimum``) of the sentences not in ``keep``
    off ``sentences``, for held-out perplexity. Returns (kept, held_out)."""
    candidates = [i for i, sentence in enumerate(sentences) if sentence not in keep]
    count = min(len(candidates) // 2, max(minimum, round(fraction * len(sentences))))
    order = torch.randperm(len(candidates), generator=torch.Generator().manual_seed(seed)).tolist()
    chosen = {candidates[i] for i in order[:count]}
    return ([s for i, s in enumerate(sentences) if i not in chosen],
            [s for i, s in enumerate(sentences) if i in chosen])


class BiLMDataModule(pl.LightningDataModule):
    """Sentences for biLM pretraining, read and checked in full at construction.

    Args:
        mrpc_dir: folder with the MSR release files (default: ``$MRPC_DIR`` or ``data/mrpc``).
        tokenizer: ``word`` (the biLM's and AWD-LSTM's) or ``subword`` (byte-level BPE, GPT's),
            trained on the pretraining text only.
        corpus: ``"mrpc"`` (GLUE train sentences) or a plain-text file, one sentence per line.
        extra_corpus: more plain-text files added to the pretraining text.
        transductive: also pretrain (and build the vocabulary) on GLUE dev and MSR test sentences;
            held-out perplexity then uses a seeded 2% of the other pretraining text, kept out of
            training (never the evaluation sentences themselves).
        min_frequency: words seen fewer times in the pretraining text become ``<UNK>``.
        max_vocab_size: keep at most this many entries, most frequent first (subword: the BPE
            vocabulary size, default 8000).
        batch_size: sentences per batch.
        bucket: length-bucketed batches (False: random batches, more padding).
        max_sentences: use only the first N pretraining sentences (smoke tests, learning curves).
        init_from: linked from ``--model.init_from``: keep that run's tokenizer (ULMFiT stage 2).
    """

    def __init__(
        self,
        mrpc_dir: str | None = None,
        tokenizer: str = "word",
        corpus: str = "mrpc",
        extra_corpus: list[str] | None = None,
        transductive: bool = False,
        min_frequency: int = 1,
        max_vocab_size: int | None = None,
        batch_size: int = 16,
        bucket: bool = True,
        max_sentences: int | None = None,
        num_workers: int = 0,
        init_from: str | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(logger=False)
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
        validation = [s for s in held_out if s not in training]
        if not validation:  # transductive: every dev sentence is training text; hold other text out
            train, validation = hold_out(train, keep=set(held_out) | set(test))
        self.tokenizer = self._tokenizer(train, tokenizer, min_frequency, max_vocab_size, init_from)
        self.train_ids = encode_sentences(self.tokenizer, train)
        self.validation_ids = encode_sentences(self.tokenizer, validation)
        self.validation_words = [word_count(sentence) for sentence in validation]
        self.validation_sentences = validation
        self.train_tokens = sum(len(ids) for ids in self.train_ids)
        self.content_hash = hashlib.sha256(
            "\n".join(["train", *train, "validation", *validation]).encode()
        ).hexdigest()
        self.summary = {
            "data_hash": self.content_hash,
            "mrpc_hash": splits.content_hash,
            "vocab_size": len(self.tokenizer),
            "train_sentences": len(train),
            "train_tokens": self.train_tokens,
            "validation_sentences": len(validation),
            "validation_tokens": sum(len(ids) for ids in self.validation_ids),
            "unk_rate_validation": self._unk_rate(self.validation_ids),
        }
        if not transductive:
            self.summary["removed_evaluation_sentences"] = self.removed_evaluation_sentences

    @staticmethod
    def _tokenizer(train: list[str], kind: str, min_frequency: int, max_vocab_size: int | None, init_from: str | None):
        """The pretraining text's tokenizer, or the one of the run ``init_from`` continues."""
        if init_from:
            from pretrain.runs import init_checkpoint  # needs the run store: import on use

            return build_tokenizer(init_checkpoint(init_from)["tokenizer"])
        if kind == "word":
            return Tokenizer.build(train, min_frequency=min_frequency, max_size=max_vocab_size)
        if kind == "subword":
            return tokenizer_class(kind).build(train, vocab_size=max_vocab_size or 8000, min_frequency=min_frequency)
        raise UserError(f"--data.tokenizer={kind}: choose word or subword")

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def _unk_rate(self, sequences: list[torch.Tensor]) -> float:
        tokens = torch.cat(sequences)
        unknown = getattr(self.tokenizer, "unk_id", None)  # byte-level BPE has no unknown token
        return 0.0 if unknown is None else round(float((tokens == unknown).float().mean()), 4)

    def _loader(self, sequences: list, train: bool, collate=pad_batch) -> DataLoader:
        batch_size = self.hparams.batch_size
        sampler = RandomSampler(sequences) if train else SequentialSampler(sequences)
        if self.hparams.bucket or not train:
            lengths = [len(sequence) if train else len(sequence[0]) for sequence in sequences]
            pool = 50 if train else len(sequences)
            batch_sampler = BucketBatchSampler(sampler, batch_size, drop_last=False, lengths=lengths, pool_batches=pool)
        else:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last=False)
        return DataLoader(sequences, batch_sampler=batch_sampler, collate_fn=collate,
                          num_workers=self.hparams.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_ids, train=True)

    def val_dataloader(self) -> DataLoader:
        items = list(zip(self.validation_ids, self.validation_words))
        return self._loader(items, train=False, collate=collate_with_words)
