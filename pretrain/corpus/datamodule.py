"""The pretraining data module: which sentences a language model may see, tokenized and batched by length.

Pretraining text is the train sentences of the pair data set in use (``--data.dataset``: MRPC's GLUE
train by default), or any list of corpora (``pretrain.corpus.corpora``: named sets, plain-text files),
de-duplicated. Held-out perplexity is measured on the pair data set's dev sentences that are not in
the pretraining text. Dev and test sentences never reach the vocabulary or the pretraining text
unless ``transductive=True``.

A pretraining sentence longer than ``max_tokens`` tokens (a paragraph, or a file without sentence
breaks) is cut into near-equal pieces of at most ``max_tokens`` tokens, each its own boundary-wrapped
sequence: the longest training batch is then ``batch_size × (max_tokens + 2)`` tokens whatever
the corpus holds, and the memory a step needs is bounded and checked before training.
"""

from __future__ import annotations

import hashlib
import math
import sys
import warnings

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_only
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

from harness.datasets.registry import dataset_params, load_pair_data
from harness.datasets.spec import PairDataSpec
from harness.errors import UserError
from harness.training.batching import BucketBatchSampler, pad_batch
from harness.training.resumable_batches import EpochPosition, ResumableBatchSampler, mid_epoch_state
from pretrain.corpus.corpora import combine, contribution, cut_note, read_corpora
from pretrain.corpus.evaluation_text import FLAG as KEEP_OUT_FLAG
from pretrain.corpus.evaluation_text import contamination, named_evaluation_texts
from pretrain.corpus.evaluation_text import keep_out as keep_out_of
from pretrain.encoders.checkpoints import build_tokenizer, tokenizer_class
from pretrain.tokenization.vocabulary_checks import check_built, check_known_share, requested_size
from pretrain.tokenization.words import Tokenizer

# A mid-epoch checkpoint resumes exactly here (state_dict / load_state_dict below), which Lightning
# cannot see from the DataLoader alone.
warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")

# Above MRPC's longest sentence, so MRPC is never cut and a pathological line (a file without
# sentence breaks) costs no more memory than MRPC's longest batch (docs/pretraining.md, Long sentences).
DEFAULT_MAX_TOKENS = 48


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


def hold_out(
    sentences: list[str], keep: set[str], fraction: float = 0.02, minimum: int = 100, seed: int = 0
) -> tuple[list[str], list[str]]:
    """Split a seeded random ``fraction`` (at least ``minimum``) of the sentences not in ``keep``
    off ``sentences``, for held-out perplexity. Returns (kept, held_out)."""
    candidates = [i for i, sentence in enumerate(sentences) if sentence not in keep]
    count = min(len(candidates) // 2, max(minimum, round(fraction * len(sentences))))
    order = torch.randperm(len(candidates), generator=torch.Generator().manual_seed(seed)).tolist()
    chosen = {candidates[i] for i in order[:count]}
    return (
        [s for i, s in enumerate(sentences) if i not in chosen],
        [s for i, s in enumerate(sentences) if i in chosen],
    )


def split_long(sequences: list[torch.Tensor], max_tokens: int) -> tuple[list[torch.Tensor], int]:
    """Cut every boundary-wrapped sequence of more than ``max_tokens`` tokens into the fewest
    near-equal pieces of at most ``max_tokens`` tokens, each wrapped in the same boundary tokens.

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
            pieces.append(torch.cat([sequence[:1], part, sequence[-1:]]))
    return pieces, cut


class CorpusDataModule(pl.LightningDataModule):
    """Sentences for language-model pretraining (every family), read and checked in full at construction.

    Args:
        tokenizer: ``word`` (the biLM's and AWD-LSTM's) or ``subword`` (byte-level BPE, GPT's),
            trained on the pretraining text only.
        corpus: one entry or a list: ``mrpc`` (the pair data set's train sentences), ``reuters``,
            ``brown``, ``sotu``, ``all-shared``, names joined by ``+``, or plain-text files, one
            sentence per line (``pretrain.corpus.corpora``).
        extra_corpus: more plain-text files added to the pretraining text.
        transductive: also pretrain (and build the vocabulary) on the dev and test sentences;
            held-out perplexity then uses a seeded 2% of the other pretraining text, kept out of
            training (never the evaluation sentences themselves).
        keep_out: named data sets (``mrpc``, ``sick-e``, …) whose dev and test sentences are
            removed from the whole pretraining text, a pair data set's own train sentences
            included (``pretrain.corpus.evaluation_text``); each is read from its default folder.
            Every run counts the dev and test sentences of its pair data set, of these and of every
            data set whose files are at hand in its pretraining text (``contamination_<task>_<split>``
            params).
        min_frequency: words seen fewer times in the pretraining text become ``<UNK>``.
        max_vocab_size: keep at most this many entries, most frequent first (word: unset keeps every
            word; subword: the BPE vocabulary size, default 8000); a size that leaves no room for a
            word (or, with BPE, the 256 byte symbols) is refused (``pretrain.tokenization.vocabulary_checks``).
        batch_size: sentences per batch.
        bucket: length-bucketed batches (False: random batches, more padding).
        max_sentences: use only the first N pretraining sentences, in corpus order (smoke tests,
            learning curves); a cut is named on stderr and in the summary, per corpus.
        init_from: linked from ``--model.init_from``: keep that run's tokenizer (ULMFiT stage 2).
        corpora_dir: the folder of the named corpora (default: ``$CORPORA_DIR`` or
            ``<repo>/../shared/data``).
        max_tokens: pretraining sentences longer than this many tokens are cut into pieces
            (counted in the run's ``long_sentences_split`` param); held-out sentences stay whole.
        **pair_data: the pair data set, with the flags of finetuning
            (:class:`~harness.datasets.spec.PairDataSpec`): its train sentences are the ``mrpc``
            corpus, its dev/test sentences are kept out (``positive_label`` is not used here).
    """

    def __init__(
        self,
        tokenizer: str = "word",
        corpus: str | list[str] = "mrpc",
        extra_corpus: list[str] | None = None,
        transductive: bool = False,
        keep_out: list[str] | None = None,
        min_frequency: int = 1,
        max_vocab_size: int | None = None,
        batch_size: int = 16,
        bucket: bool = True,
        max_sentences: int | None = None,
        num_workers: int = 0,
        init_from: str | None = None,
        corpora_dir: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        **pair_data,
    ):
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.train_position = EpochPosition()
        if batch_size < 1:
            raise UserError(f"--data.batch_size={batch_size}: must be at least 1")
        if max_tokens < 1:
            raise UserError(f"--data.max_tokens={max_tokens}: must be at least 1")
        pairs = load_pair_data(PairDataSpec(**pair_data))
        self.pair_data = pairs
        pair_train, held_out, test = pairs.sentences("train"), pairs.sentences("dev"), pairs.sentences("test")
        self.corpora = read_corpora(corpus, extra_corpus, pair_train, pairs.train_file, pairs.name, corpora_dir)
        train, origin = combine(self.corpora)
        if transductive:
            train = unique(train + held_out + test)
        else:
            excluded = set(held_out) | set(test)
            # Pair sentences can recur across pairs: a dev/test sentence that is also part of a
            # train pair is legitimately seen. Only *other* text (named sets, files) is
            # filtered, so no dev/test-only sentence sneaks in through it.
            pair_train = set(pair_train)
            before = len(train)
            train = [s for s in train if s in pair_train or s not in excluded]
            self.removed_evaluation_sentences = before - len(train)
        if keep_out and transductive:
            raise UserError(f"{KEEP_OUT_FLAG}: not with --data.transductive=true, which pretrains on them")
        evaluation_texts = named_evaluation_texts(keep_out, pairs)
        kept_out = None
        if keep_out:
            named = set(keep_out)
            train, kept_out = keep_out_of(train, [text for text in evaluation_texts if text.task in named])
        self.cut_note = None
        if max_sentences is not None and len(train) > max_sentences:
            self.cut_note = cut_note(max_sentences, train, origin)
            train = train[:max_sentences]
            if rank_zero_only.rank == 0:
                print(f"corpus: {self.cut_note}", file=sys.stderr)
        if not train:
            raise UserError("--data.corpus: no pretraining sentences left")
        training = set(train)
        validation = [s for s in held_out if s not in training]
        if not validation:  # transductive: every dev sentence is training text; hold other text out
            train, validation = hold_out(train, keep=set(held_out) | set(test))
        self.tokenizer = self._tokenizer(train, tokenizer, min_frequency, max_vocab_size, init_from)
        self.train_ids, self.long_sentences = split_long(encode_sentences(self.tokenizer, train), max_tokens)
        check_known_share(self.tokenizer, self.train_ids, max_vocab_size, min_frequency, init_from)
        self.validation_ids = encode_sentences(self.tokenizer, validation)
        self.validation_words = [word_count(sentence) for sentence in validation]
        self.validation_sentences = validation
        self.train_sentences = train  # the pretraining text, in order, before long sentences are cut
        self.train_tokens = sum(len(ids) for ids in self.train_ids)
        # the pieces are part of what is trained on; a corpus with nothing to cut keeps its hash
        cutting = [f"max_tokens={max_tokens}"] if self.long_sentences else []
        self.content_hash = hashlib.sha256(
            "\n".join(["train", *train, "validation", *validation, *cutting]).encode()
        ).hexdigest()
        if self.long_sentences and rank_zero_only.rank == 0:
            print(
                f"corpus: {self.long_sentences} sentence(s) longer than --data.max_tokens={max_tokens} words "
                f"cut into pieces ({len(self.train_ids)} training sequences)",
                file=sys.stderr,
            )
        self.summary = {
            "data_hash": self.content_hash,
            **dataset_params(pairs),
            "vocab_size": len(self.tokenizer),
            "train_sentences": len(train),
            "train_sequences": len(self.train_ids),
            "long_sentences_split": self.long_sentences,
            "train_tokens": self.train_tokens,
            "train_words": sum(len(sentence.split()) for sentence in train),
            "validation_sentences": len(validation),
            "validation_tokens": sum(len(ids) for ids in self.validation_ids),
            "unk_rate_validation": self._unk_rate(self.validation_ids),
            **contribution(self.corpora, origin, train, [len(ids) for ids in self.train_ids]),
        }
        if not transductive:
            self.summary["removed_evaluation_sentences"] = self.removed_evaluation_sentences
        if kept_out is not None:
            self.summary["kept_out_sentences"] = kept_out
        self.summary.update(contamination(train, evaluation_texts))

    @staticmethod
    def _tokenizer(train: list[str], kind: str, min_frequency: int, max_vocab_size: int | None, init_from: str | None):
        """The pretraining text's tokenizer, or the one of the run ``init_from`` continues."""
        if init_from:
            from pretrain.encoders.loading import init_checkpoint  # needs the run store: import on use

            return build_tokenizer(init_checkpoint(init_from, tokenizer=kind)["tokenizer"])
        if kind not in ("word", "subword"):
            raise UserError(f"--data.tokenizer={kind}: choose word or subword")
        size = requested_size(kind, max_vocab_size)
        if kind == "word":
            tokenizer = Tokenizer.build(train, min_frequency=min_frequency, max_size=size)
        else:
            tokenizer = tokenizer_class(kind).build(train, vocab_size=size, min_frequency=min_frequency)
        check_built(tokenizer, kind, min_frequency)
        return tokenizer

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
        position = self.train_position if train else None
        if self.hparams.bucket or not train:
            lengths = [len(sequence) if train else len(sequence[0]) for sequence in sequences]
            pool = 50 if train else len(sequences)
            batch_sampler = BucketBatchSampler(
                sampler, batch_size, drop_last=False, lengths=lengths, pool_batches=pool, position=position
            )
        else:
            batch_sampler = ResumableBatchSampler(sampler, batch_size, drop_last=False, position=position)
        return DataLoader(
            sequences, batch_sampler=batch_sampler, collate_fn=collate, num_workers=self.hparams.num_workers
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_ids, train=True)

    def state_dict(self) -> dict:
        """In a checkpoint written mid-epoch: where the epoch stands (``harness.training.resumable_batches``)."""
        return mid_epoch_state(self.train_position, self.trainer)

    def load_state_dict(self, state_dict: dict) -> None:
        if state_dict.get("order_rng") is not None:
            self.train_position.resume = dict(state_dict)

    def val_dataloader(self) -> DataLoader:
        items = list(zip(self.validation_ids, self.validation_words))
        return self._loader(items, train=False, collate=collate_with_words)
