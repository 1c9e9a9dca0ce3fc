"""Which sentences reach the biLM, and how they are batched. Uses the real MSR release."""

from pathlib import Path

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler, SequentialSampler

from harness.datasets.mrpc import load_mrpc
from harness.errors import UserError
from harness.training.batching import BucketBatchSampler, pad_batch
from pretrain.corpus.corpora import read_text_file
from pretrain.corpus.datamodule import CorpusDataModule, unique
from pretrain.tokenization.words import PAD_ID, SPECIALS, Tokenizer


def sentences_of(pairs) -> list[str]:
    return unique([s for pair in pairs for s in (pair.sentence1, pair.sentence2)])


@pytest.fixture(scope="module")
def mrpc_dir(real_mrpc_dir) -> Path:
    return real_mrpc_dir


@pytest.fixture(scope="module")
def splits(mrpc_dir):
    return load_mrpc(mrpc_dir)


@pytest.fixture(scope="module")
def text(splits):
    """Sentences of each split, and the words that only the test split has."""
    train, dev, test = (sentences_of(split) for split in (splits.train, splits.dev, splits.test))
    probe = Tokenizer(list(SPECIALS))
    words = {
        name: {w for s in sentences for w in probe.tokenize(s)}
        for name, sentences in (("train", train), ("dev", dev), ("test", test))
    }
    test_only_words = words["test"] - words["train"] - words["dev"]
    # a test sentence (in no train/dev pair) holding a word no other split has
    test_only_sentence = next(
        s for s in test if s not in set(train) | set(dev) and test_only_words & set(probe.tokenize(s))
    )
    dev_only_sentence = next(s for s in dev if s not in set(train))
    return {
        "train": train,
        "dev": dev,
        "test": test,
        "words": words,
        "test_only_words": test_only_words,
        "test_only_sentence": test_only_sentence,
        "dev_only_sentence": dev_only_sentence,
    }


@pytest.fixture(scope="module")
def datamodule(mrpc_dir):
    return CorpusDataModule(mrpc_dir=str(mrpc_dir))


def encoded(tokenizer, sentences):
    return [tuple(tokenizer.encode(s)) for s in sentences]


# --- what the biLM may see --------------------------------------------------------------------------


def test_pretraining_text_is_exactly_the_glue_train_sentences(datamodule, text):
    assert [tuple(ids.tolist()) for ids in datamodule.train_ids] == encoded(datamodule.tokenizer, text["train"])
    assert datamodule.summary["train_sentences"] == len(text["train"])
    assert datamodule.summary["removed_evaluation_sentences"] == 0


def test_vocabulary_has_only_train_words(datamodule, text):
    vocabulary = set(datamodule.tokenizer.vocab) - set(SPECIALS)
    assert vocabulary == text["words"]["train"] - set(SPECIALS)
    assert not vocabulary & text["test_only_words"]
    assert not vocabulary & (text["words"]["dev"] - text["words"]["train"])
    assert datamodule.summary["vocab_size"] == len(datamodule.tokenizer)


def test_transductive_adds_dev_and_test(mrpc_dir, text):
    transductive = CorpusDataModule(mrpc_dir=str(mrpc_dir), transductive=True)
    vocabulary = set(transductive.tokenizer.vocab)
    assert text["test_only_words"] <= vocabulary
    pretraining = {tuple(ids.tolist()) for ids in transductive.train_ids}
    assert tuple(transductive.tokenizer.encode(text["test_only_sentence"])) in pretraining
    assert tuple(transductive.tokenizer.encode(text["dev_only_sentence"])) in pretraining
    summary = transductive.summary
    assert summary["train_sentences"] + summary["validation_sentences"] == len(
        unique(text["train"] + text["dev"] + text["test"])
    )


def test_transductive_perplexity_is_held_out(mrpc_dir, text):
    """Transductive pretraining sees every dev/test sentence, so held-out perplexity must come from
    other text kept out of training — never from training sentences (early stopping reads it)."""
    transductive = CorpusDataModule(mrpc_dir=str(mrpc_dir), transductive=True)
    training = {tuple(ids.tolist()) for ids in transductive.train_ids}
    held_out = [tuple(ids.tolist()) for ids in transductive.validation_ids]
    assert len(held_out) >= 100 and not training & set(held_out)
    assert not set(transductive.validation_sentences) & (set(text["dev"]) | set(text["test"]))


def test_validation_is_dev_sentences_not_in_training(datamodule, text):
    training = set(text["train"])
    assert datamodule.validation_sentences == [s for s in text["dev"] if s not in training]
    assert not set(datamodule.validation_sentences) & training
    assert len(datamodule.validation_ids) == len(datamodule.validation_sentences)
    assert datamodule.summary["validation_sentences"] == len(datamodule.validation_sentences)
    assert 0 < datamodule.summary["unk_rate_validation"] < 0.5


def test_max_sentences_limits_text_and_vocabulary(mrpc_dir, text):
    small = CorpusDataModule(mrpc_dir=str(mrpc_dir), max_sentences=50)
    assert encoded(small.tokenizer, text["train"][:50]) == [tuple(ids.tolist()) for ids in small.train_ids]
    probe = Tokenizer(list(SPECIALS))
    assert set(small.tokenizer.vocab) - set(SPECIALS) == {
        w for s in text["train"][:50] for w in probe.tokenize(s)
    } - set(SPECIALS)
    # held out: every dev sentence not among the 50
    assert small.validation_sentences == [s for s in text["dev"] if s not in set(text["train"][:50])]


def test_data_hash_is_stable_and_content_sensitive(mrpc_dir, datamodule):
    assert CorpusDataModule(mrpc_dir=str(mrpc_dir)).content_hash == datamodule.content_hash
    assert CorpusDataModule(mrpc_dir=str(mrpc_dir), max_sentences=50).content_hash != datamodule.content_hash


# --- extra and replacement corpora ------------------------------------------------------------------


def test_extra_corpus_adds_sentences_but_never_evaluation_ones(mrpc_dir, tmp_path, datamodule, text):
    extra = tmp_path / "extra.txt"
    lines = [
        "The zyzzyva quokka danced at midnight .",
        text["test_only_sentence"],
        "",
        text["dev_only_sentence"],
        text["train"][0],
        "The zyzzyva quokka danced at midnight .",
    ]
    extra.write_text("\n".join(lines) + "\n", encoding="utf-8")
    extended = CorpusDataModule(mrpc_dir=str(mrpc_dir), extra_corpus=[str(extra)])
    vocabulary = set(extended.tokenizer.vocab)
    assert {"zyzzyva", "quokka"} <= vocabulary
    assert extended.summary["train_sentences"] == datamodule.summary["train_sentences"] + 1
    assert extended.removed_evaluation_sentences == 2
    assert not vocabulary & text["test_only_words"]
    pretraining = {tuple(ids.tolist()) for ids in extended.train_ids}
    assert tuple(extended.tokenizer.encode(text["test_only_sentence"])) not in pretraining
    # the dev sentence stays held out
    assert text["dev_only_sentence"] in extended.validation_sentences


def test_extra_corpus_evaluation_lines_kept_when_transductive(mrpc_dir, tmp_path, text):
    extra = tmp_path / "extra.txt"
    extra.write_text(f"The zyzzyva quokka danced .\n{text['test_only_sentence']}\n", encoding="utf-8")
    extended = CorpusDataModule(mrpc_dir=str(mrpc_dir), extra_corpus=[str(extra)], transductive=True)
    assert "zyzzyva" in extended.tokenizer.index
    assert text["test_only_words"] <= set(extended.tokenizer.vocab)


def test_corpus_file_replaces_mrpc_text(mrpc_dir, tmp_path, text):
    corpus = tmp_path / "corpus.txt"
    lines = [
        "The zyzzyva quokka danced .",
        "A second line , with 42 words .",
        text["test_only_sentence"],
        text["dev_only_sentence"],
    ]
    corpus.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8") + b"\r\n\r\n")
    module = CorpusDataModule(mrpc_dir=str(mrpc_dir), corpus=str(corpus))
    assert module.summary["train_sentences"] == 2
    assert module.removed_evaluation_sentences == 2
    assert module.tokenizer.vocab[len(SPECIALS) :] == sorted(
        ["the", "zyzzyva", "quokka", "danced", ".", "a", "second", "line", ",", "with", "words"],
        key=lambda w: (-(2 if w == "." else 1), w),
    )
    assert module.validation_sentences == text["dev"]  # nothing of dev is trained on


def test_read_text_file_tolerates_bom_crlf_and_blank_lines(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbffirst line\r\n\r\n  second line  \r\n\n")
    assert read_text_file(path, "--data.corpus") == ["first line", "second line"]


@pytest.mark.parametrize("flag", ["corpus", "extra_corpus"])
def test_missing_text_file_names_the_flag(mrpc_dir, tmp_path, flag):
    missing = tmp_path / "nope.txt"
    value = str(missing) if flag == "corpus" else [str(missing)]
    with pytest.raises(UserError) as caught:
        CorpusDataModule(mrpc_dir=str(mrpc_dir), **{flag: value})
    message = str(caught.value)
    assert "\n" not in message and f"--data.{flag}" in message and str(missing) in message


def test_non_utf8_text_file_names_file_and_line(mrpc_dir, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("fine\nalso fine\ncaf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(UserError) as caught:
        CorpusDataModule(mrpc_dir=str(mrpc_dir), extra_corpus=[str(path)])
    message = str(caught.value)
    assert "\n" not in message and f"{path}:3" in message and "UTF-8" in message


def test_empty_text_file_is_a_user_error(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(UserError, match="--data.corpus"):
        read_text_file(path, "--data.corpus")


def test_corpus_of_only_evaluation_sentences_is_a_user_error(mrpc_dir, tmp_path, text):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text["test_only_sentence"] + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="--data.corpus"):
        CorpusDataModule(mrpc_dir=str(mrpc_dir), corpus=str(corpus))


# --- batching ---------------------------------------------------------------------------------------


@pytest.fixture
def lengths():
    generator = torch.Generator().manual_seed(0)
    return torch.randint(3, 60, (1000,), generator=generator).tolist()


def padding_fraction(batches, lengths) -> float:
    real = sum(lengths[i] for batch in batches for i in batch)
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    return 1 - real / padded


def test_bucket_batches_cover_every_index_once(lengths):
    torch.manual_seed(0)
    sampler = BucketBatchSampler(
        RandomSampler(lengths), batch_size=16, drop_last=False, lengths=lengths, pool_batches=10
    )
    for _ in range(2):  # every epoch
        batches = list(sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
        assert len(batches) == len(sampler)
        assert all(1 <= len(batch) <= 16 for batch in batches)


def test_bucket_batches_are_length_sorted_and_pad_less(lengths):
    torch.manual_seed(0)
    bucketed = list(BucketBatchSampler(RandomSampler(lengths), 16, False, lengths, pool_batches=10))
    for batch in bucketed:
        assert [lengths[i] for i in batch] == sorted(lengths[i] for i in batch)
    random_batches = list(BatchSampler(RandomSampler(lengths), 16, False))
    assert padding_fraction(bucketed, lengths) < padding_fraction(random_batches, lengths) / 4


def test_bucket_batches_shuffle_only_for_random_samplers(lengths):
    torch.manual_seed(0)
    first = list(BucketBatchSampler(RandomSampler(lengths), 16, False, lengths, pool_batches=10))
    second = list(BucketBatchSampler(RandomSampler(lengths), 16, False, lengths, pool_batches=10))
    assert first != second
    sequential = list(BucketBatchSampler(SequentialSampler(lengths), 16, False, lengths, pool_batches=len(lengths)))
    flat = [i for batch in sequential for i in batch]
    assert flat == sorted(range(len(lengths)), key=lambda i: lengths[i])  # stable sort: deterministic


def test_bucket_drop_last(lengths):
    batches = list(BucketBatchSampler(RandomSampler(lengths), 16, True, lengths, pool_batches=7))
    assert len(batches) == len(lengths) // 16
    assert all(len(batch) == 16 for batch in batches)
    flat = [i for batch in batches for i in batch]
    assert len(set(flat)) == len(flat)


def test_bucket_batches_follow_a_distributed_sampler(lengths):
    torch.manual_seed(0)
    ranks = []
    for rank in (0, 1):
        distributed = DistributedSampler(lengths, num_replicas=2, rank=rank, shuffle=True, seed=0)
        expected = list(distributed)
        batches = list(BucketBatchSampler(distributed, 16, False, lengths, pool_batches=10))
        flat = [i for batch in batches for i in batch]
        assert sorted(flat) == sorted(expected)
        assert len(batches) == len(BucketBatchSampler(distributed, 16, False, lengths))
        ranks.append(set(flat))
    assert not ranks[0] & ranks[1]
    assert ranks[0] | ranks[1] == set(range(len(lengths)))


def test_lightning_can_inject_a_distributed_sampler(mrpc_dir):
    """Lightning re-creates the batch sampler with its own sampler under DDP."""
    from lightning_fabric.utilities.data import _replace_dunder_methods
    from pytorch_lightning.utilities.data import _update_dataloader

    module = CorpusDataModule(mrpc_dir=str(mrpc_dir), max_sentences=300, batch_size=8)
    with _replace_dunder_methods(DataLoader, "dataset"), _replace_dunder_methods(BatchSampler):
        loader = module.train_dataloader()
    distributed = DistributedSampler(module.train_ids, num_replicas=2, rank=0, shuffle=True, seed=0)
    injected = _update_dataloader(loader, distributed)
    assert isinstance(injected.batch_sampler, BucketBatchSampler)
    assert injected.batch_sampler.sampler is distributed
    assert injected.batch_sampler.lengths == [len(ids) for ids in module.train_ids]
    flat = [i for batch in injected.batch_sampler for i in batch]
    assert sorted(flat) == sorted(distributed)


def test_loaders_pad_at_the_end(mrpc_dir):
    module = CorpusDataModule(mrpc_dir=str(mrpc_dir), max_sentences=200, batch_size=16)
    seen = 0
    for token_ids, lengths in module.train_dataloader():
        assert token_ids.shape == (len(lengths), int(lengths.max()))
        mask = torch.arange(token_ids.shape[1])[None, :] < lengths[:, None]
        assert (token_ids[~mask] == PAD_ID).all() and (token_ids[mask] != PAD_ID).all()
        seen += len(lengths)
    assert seen == 200
    validation = list(module.val_dataloader())
    assert sum(len(lengths) for _, lengths, _ in validation) == len(module.validation_ids)
    words = torch.cat([batch[2] for batch in validation])  # whitespace words + 1 per sentence
    assert sorted(words.tolist()) == sorted(len(s.split()) + 1 for s in module.validation_sentences)
    assert list(module.val_dataloader())[0][0].tolist() == validation[0][0].tolist()  # deterministic


def test_pad_batch():
    ids, lengths = pad_batch([torch.tensor([2, 5, 3]), torch.tensor([2, 3])])
    assert ids.tolist() == [[2, 5, 3], [2, 3, PAD_ID]] and lengths.tolist() == [3, 2]
