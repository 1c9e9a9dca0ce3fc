"""The vocabulary flags, checked per tokenizer kind before and after a vocabulary is built.

A vocabulary of only the special tokens turns every word into ``<UNK>``: the LM then learns to
predict ``<UNK>``, reaches a flattering perplexity and would be registered as the next encoder.
``--data.max_vocab_size`` unset means "no cap" for the word tokenizer and 8000 for byte-level BPE;
``0`` or any other value below a kind's minimum is refused, never read as the default. A size
above the minimum is still refused when the vocabulary knows less than :data:`MIN_KNOWN_SHARE` of
the pretraining text's words (the rest ``<UNK>``): what counts is what the text needs, not a size.
"""

from __future__ import annotations

import torch

from harness.errors import UserError
from pretrain.tokenization import bpe
from pretrain.tokenization import words as word_tokenizer

SIZE_FLAG, FREQUENCY_FLAG = "--data.max_vocab_size", "--data.min_frequency"
MIN_KNOWN_SHARE = 0.5  # of the pretraining text's words (sentence boundaries not counted)
DEFAULT_SUBWORD_SIZE = 8000
# entries a vocabulary needs beyond its specials: one word (word); the 256 byte symbols (BPE)
MINIMUM_SIZE = {"word": len(word_tokenizer.SPECIALS) + 1, "subword": bpe.MIN_VOCAB_SIZE}
WHAT_IS_IN = {
    "word": f"{len(word_tokenizer.SPECIALS)} special tokens + at least one word",
    "subword": f"{len(bpe.SPECIALS)} special tokens + {len(bpe.BYTE_ALPHABET)} byte symbols",
}


def requested_size(kind: str, max_vocab_size: int | None) -> int | None:
    """The size cap to build with (None: no cap), after refusing one no vocabulary of ``kind`` can meet."""
    if max_vocab_size is None:
        return DEFAULT_SUBWORD_SIZE if kind == "subword" else None
    if isinstance(max_vocab_size, bool) or max_vocab_size < MINIMUM_SIZE[kind]:
        unset = (
            "unset it for every word of the text"
            if kind == "word"
            else f"unset it for the default {DEFAULT_SUBWORD_SIZE}"
        )
        raise UserError(
            f"{SIZE_FLAG}={max_vocab_size}: a {kind} vocabulary needs at least {MINIMUM_SIZE[kind]} "
            f"entries ({WHAT_IS_IN[kind]}); {unset}"
        )
    return max_vocab_size


def check_built(tokenizer, kind: str, min_frequency: int) -> None:
    """Refuse a built word vocabulary that holds only its special tokens (no word passed ``min_frequency``)."""
    if kind == "word" and len(tokenizer) <= len(word_tokenizer.SPECIALS):
        raise UserError(
            f"{FREQUENCY_FLAG}={min_frequency}: no word of the pretraining text occurs that often, so "
            f"the vocabulary would hold only the special tokens (every word <UNK>); lower it"
        )


def known_share(tokenizer, sequences: list[torch.Tensor]) -> float:
    """The share of the words of ``sequences`` (ids, boundaries not counted) that are not ``<UNK>``;
    1 for a tokenizer without an unknown token (byte-level BPE)."""
    unknown = getattr(tokenizer, "unk_id", None)
    if unknown is None or not sequences:
        return 1.0
    ids = torch.cat(sequences)  # (tokens,)
    words = ids[(ids != word_tokenizer.BOS_ID) & (ids != word_tokenizer.EOS_ID)]  # (words,)
    return 1.0 if not len(words) else 1.0 - float((words == unknown).float().mean())


def check_known_share(
    tokenizer,
    sequences: list[torch.Tensor],
    max_vocab_size: int | None,
    min_frequency: int,
    init_from: str | None = None,
) -> float:
    """Refuse, before training, a vocabulary that turns most of the pretraining text into ``<UNK>``:
    the LM would learn to predict ``<UNK>`` and reach a flattering perplexity."""
    share = known_share(tokenizer, sequences)
    if share < MIN_KNOWN_SHARE:
        source = (
            f"--model.init_from={init_from}: its vocabulary"
            if init_from
            else f"{SIZE_FLAG}={max_vocab_size} {FREQUENCY_FLAG}={min_frequency}: the vocabulary"
        )
        remedy = (
            "pretrain from scratch or on text closer to that run's"
            if init_from
            else f"raise {SIZE_FLAG} (or unset it) or lower {FREQUENCY_FLAG}"
        )
        raise UserError(
            f"{source} of {len(tokenizer)} entries knows {share:.0%} of the pretraining text's words "
            f"(the rest <UNK>, a flattering perplexity); at least {MIN_KNOWN_SHARE:.0%} needed: {remedy}"
        )
    return share
