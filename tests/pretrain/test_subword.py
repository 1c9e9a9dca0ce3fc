"""The byte-level BPE tokenizer: trained on the text given only, deterministic, self-describing."""

import json
import subprocess
import sys

import pytest

from harness.errors import UserError
from pretrain.tokenization.bpe import (
    BOS_ID,
    CLS_ID,
    DELIM_ID,
    EOS_ID,
    MIN_VOCAB_SIZE,
    PAD_ID,
    SPECIALS,
    SubwordTokenizer,
)

TRAIN = [
    "The company said its shares rose 5 percent in early trading.",
    "Shares of the company fell sharply after the report.",
    "He said the plan would be announced on Monday.",
    "The report said the company's profit rose in the third quarter.",
    "Officials said the talks would resume next week in Geneva.",
    "Prices at the café climbed steeply – analysts were surprised.",
] * 4
SENTINEL = "zqxwvkjh"
TEST = [f"The {SENTINEL} said its shares rose.", f"Analysts expect {SENTINEL} to report a profit."]


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer.build(TRAIN, vocab_size=MIN_VOCAB_SIZE + 60)


def test_specials_are_fixed(tokenizer):
    assert tokenizer.vocab[: len(SPECIALS)] == list(SPECIALS)
    assert (PAD_ID, BOS_ID, EOS_ID, DELIM_ID, CLS_ID) == (0, 1, 2, 3, 4)
    assert SPECIALS[PAD_ID] == "<pad>" and SPECIALS[CLS_ID] == "<cls>" and SPECIALS[DELIM_ID] == "<delim>"


def test_vocabulary_size_and_merges_learned(tokenizer):
    assert len(tokenizer) == MIN_VOCAB_SIZE + 60 == len(tokenizer.vocab)
    # frequent training words became single tokens
    assert tokenizer.tokenize("the company said") == ["Ġthe", "Ġcompany", "Ġsaid"]


def test_a_word_seen_only_in_test_text_is_not_in_the_vocabulary(tokenizer):
    assert not any(SENTINEL in token for token in tokenizer.vocab)
    for sentence in TEST:
        ids = tokenizer.encode(sentence)
        assert ids[0] == BOS_ID and ids[-1] == EOS_ID
        assert tokenizer.decode_text(ids) == sentence.lower()  # round trip through bytes
    pieces = tokenizer.tokenize(f"the {SENTINEL}")
    assert len(pieces) > 2 and "".join(pieces).replace("Ġ", " ").strip() == f"the {SENTINEL}"
    # the same tokenizer trained with the test text does learn the word: the check can fail
    leaked = SubwordTokenizer.build(TRAIN + TEST * 3, vocab_size=MIN_VOCAB_SIZE + 200)
    assert any(SENTINEL in token for token in leaked.vocab)


def test_any_unicode_round_trips(tokenizer):
    text = "naïve Zürich 東京 emoji 🙂 and tabs\tand  spaces"
    assert tokenizer.decode_text(tokenizer.encode(text)) == "naïve zürich 東京 emoji 🙂 and tabs and spaces"
    assert tokenizer.encode("") == [BOS_ID, EOS_ID]


def test_special_strings_in_text_are_text(tokenizer):
    ids = tokenizer.encode("a <cls> b <delim> c <pad> </s>", boundaries=False)
    assert not set(ids) & set(range(len(SPECIALS)))
    assert tokenizer.decode_text(ids) == "a <cls> b <delim> c <pad> </s>"


def test_pair_layout(tokenizer):
    first, second = "Shares fell.", "The report said so."
    ids = tokenizer.encode_pair(first, second)
    a, b = tokenizer.encode(first, boundaries=False), tokenizer.encode(second, boundaries=False)
    assert ids == [BOS_ID, *a, DELIM_ID, *b, CLS_ID]
    assert ids.count(DELIM_ID) == 1 and ids.count(CLS_ID) == 1 and EOS_ID not in ids


def test_dict_round_trip_gives_identical_ids(tokenizer):
    state = json.loads(json.dumps(tokenizer.to_dict()))  # as a checkpoint stores it
    again = SubwordTokenizer.from_dict(state)
    assert again.vocab == tokenizer.vocab
    for sentence in TRAIN[:6] + TEST + ["a <cls> b"]:
        assert again.encode(sentence) == tokenizer.encode(sentence)
        assert again.tokenize(sentence) == tokenizer.tokenize(sentence)
    with pytest.raises(ValueError):
        SubwordTokenizer.from_dict({"vocab": tokenizer.vocab, "lowercase": True, "numbers": True})


_TRAIN_IN_A_FRESH_PROCESS = """
import json, sys
from pretrain.tokenization.bpe import SubwordTokenizer
sentences = json.loads(sys.stdin.read())
print(json.dumps(SubwordTokenizer.build(sentences, vocab_size=400).to_dict(), sort_keys=True))
"""


@pytest.mark.slow
def test_training_is_deterministic_across_processes():
    """Hash seeds differ per process (Python's and the Rust library's): ties must not depend on them."""
    corpus = TRAIN + [f"{a} {b}" for a in TRAIN[:6] for b in TRAIN[:6]]
    elsewhere = subprocess.run(
        [sys.executable, "-c", _TRAIN_IN_A_FRESH_PROCESS],
        input=json.dumps(corpus),
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    here = SubwordTokenizer.build(corpus, vocab_size=400).to_dict()
    assert json.loads(elsewhere) == json.loads(json.dumps(here))
    assert SubwordTokenizer.build(corpus, vocab_size=400).to_dict() == here


def test_vocabulary_smaller_than_specials_and_bytes_is_a_user_error():
    with pytest.raises(UserError) as error:
        SubwordTokenizer.build(TRAIN, vocab_size=MIN_VOCAB_SIZE - 1)
    message = str(error.value)
    assert "--data.max_vocab_size" in message and str(MIN_VOCAB_SIZE) in message and "\n" not in message
    assert len(SubwordTokenizer.build(TRAIN, vocab_size=MIN_VOCAB_SIZE)) == MIN_VOCAB_SIZE  # the edge is allowed


def test_lowercase_option_and_word_counts():
    cased = SubwordTokenizer.build(TRAIN, vocab_size=MIN_VOCAB_SIZE + 20, lowercase=False)
    assert cased.decode_text(cased.encode("The  CAT")) == "The CAT"
    assert cased.normalize("  The \t CAT  sat ") == "The CAT sat"
    assert cased.count_words("  The \t CAT  sat. ") == 3
    assert cased.count_words("") == 0
