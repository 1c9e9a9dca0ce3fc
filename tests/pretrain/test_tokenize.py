import random

import pytest

from pretrain.tokenization.words import BOS_ID, EOS_ID, NUM, PAD_ID, SPECIALS, UNK, UNK_ID, Tokenizer


@pytest.fixture
def plain():
    """A tokenizer with only the specials: tokenize() does not depend on the vocabulary."""
    return Tokenizer(list(SPECIALS))


def test_special_ids_match_their_positions():
    assert SPECIALS[PAD_ID] == "<PAD>" and SPECIALS[UNK_ID] == UNK
    assert SPECIALS[BOS_ID] == "<S>" and SPECIALS[EOS_ID] == "</S>"


def test_lower_cases(plain):
    assert plain.tokenize("The CAT Sat") == ["the", "cat", "sat"]
    assert Tokenizer(list(SPECIALS), lowercase=False).tokenize("The CAT") == ["The", "CAT"]


@pytest.mark.parametrize("number", ["1,000", "3.5", "1990s", "42", "1,000.50", "5th", "2003", "10m", "12pct"])
def test_numbers_become_num(plain, number):
    assert plain.tokenize(f"about {number} people") == ["about", NUM, "people"]


def test_numbers_kept_when_disabled():
    assert Tokenizer(list(SPECIALS), numbers=False).tokenize("about 1,000 people") == ["about", "1,000", "people"]


def test_words_with_digits_are_not_numbers(plain):
    assert NUM not in plain.tokenize("mp3 players and b52 bombers")


def test_punctuation_is_split(plain):
    assert plain.tokenize("Yes, he said: no! (Really?)") == [
        "yes",
        ",",
        "he",
        "said",
        ":",
        "no",
        "!",
        "(",
        "really",
        "?",
        ")",
    ]
    assert plain.tokenize("end.") == ["end", "."]


def test_inner_apostrophes_and_hyphens_stay(plain):
    assert plain.tokenize("Don't co-operate") == ["don't", "co-operate"]


def test_quotes_are_separate_tokens(plain):
    assert plain.tokenize('He said "yes" to it.') == ["he", "said", '"', "yes", '"', "to", "it", "."]
    assert plain.tokenize('The "quote never closes.') == ["the", '"', "quote", "never", "closes", "."]


def test_unicode_words(plain):
    assert plain.tokenize("Café naïve Zürich – Ωmega") == ["café", "naïve", "zürich", "–", "ωmega"]


def test_whitespace_and_empty(plain):
    assert plain.tokenize("  a\tb \n c ") == ["a", "b", "c"]
    assert plain.tokenize("") == []


SENTENCES = ["the cat sat on the mat .", "a dog sat .", "the dog ran 3 miles .", "Zebra ate 1,000 apples"]


def test_build_puts_specials_first_then_frequency_then_alphabet():
    tokenizer = Tokenizer.build(SENTENCES)
    assert tuple(tokenizer.vocab[: len(SPECIALS)]) == SPECIALS
    words = tokenizer.vocab[len(SPECIALS) :]
    # the ×3, '.' ×3, then ties at 2 alphabetically ('dog' < 'sat'), then singletons alphabetically
    assert words[:4] == [".", "the", "dog", "sat"]
    assert words[4:] == sorted(words[4:])
    assert NUM not in words  # <NUM> is a special, counted once
    assert len(set(tokenizer.vocab)) == len(tokenizer.vocab)


def test_build_is_deterministic_and_order_independent():
    first = Tokenizer.build(SENTENCES)
    again = Tokenizer.build(list(SENTENCES))
    shuffled = list(SENTENCES)
    random.Random(0).shuffle(shuffled)
    assert first.vocab == again.vocab == Tokenizer.build(shuffled).vocab


def test_min_frequency_maps_rare_words_to_unk():
    tokenizer = Tokenizer.build(SENTENCES, min_frequency=2)
    assert tokenizer.vocab[len(SPECIALS) :] == [".", "the", "dog", "sat"]
    assert tokenizer.encode("the zebra sat", boundaries=False) == [
        tokenizer.index["the"],
        UNK_ID,
        tokenizer.index["sat"],
    ]


def test_max_size_keeps_most_frequent():
    tokenizer = Tokenizer.build(SENTENCES, max_size=len(SPECIALS) + 2)
    assert tokenizer.vocab == [*SPECIALS, ".", "the"]
    assert len(Tokenizer.build(SENTENCES, max_size=1)) == len(SPECIALS)


def test_vocabulary_must_start_with_specials():
    with pytest.raises(ValueError):
        Tokenizer(["a", *SPECIALS])


def test_encode_adds_boundaries_and_decode_inverts():
    tokenizer = Tokenizer.build(SENTENCES)
    ids = tokenizer.encode("The cat ran 5 miles!")
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID
    assert ids[1:-1] == tokenizer.encode("The cat ran 5 miles!", boundaries=False)
    assert tokenizer.decode(ids) == ["<S>", "the", "cat", "ran", NUM, "miles", UNK, "</S>"]
    assert tokenizer.encode("") == [BOS_ID, EOS_ID]


def test_dict_round_trip():
    tokenizer = Tokenizer.build(SENTENCES, min_frequency=1)
    plain_data = tokenizer.to_dict()
    restored = Tokenizer.from_dict(plain_data)
    assert restored.vocab == tokenizer.vocab
    assert (restored.lowercase, restored.numbers) == (tokenizer.lowercase, tokenizer.numbers)
    for sentence in [*SENTENCES, "Unseen WORDS 12"]:
        assert restored.encode(sentence) == tokenizer.encode(sentence)
    cased = Tokenizer.from_dict(Tokenizer.build(SENTENCES, lowercase=False, numbers=False).to_dict())
    assert (cased.lowercase, cased.numbers) == (False, False)
    assert "Zebra" in cased.index and "1,000" in cased.index
