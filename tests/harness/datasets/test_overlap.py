"""Split overlap of pair data sets: the pair is the unit (either order, as a model sees it);
the three shapes a hostile tester tried (dev = train + one row, dev = train with each pair's
sentences swapped, half of test copied from train) are refused in one line; MRPC's own files pass."""

from types import SimpleNamespace

import pytest

from harness.datasets.overlap import check_split_overlap, pair_key, split_overlap
from harness.errors import UserError

NAMES = {"train": "--data.train=train.tsv", "dev": "--data.dev=dev.tsv", "test": "--data.test=test.tsv"}


def pairs(count: int, prefix: str) -> list:
    return [
        SimpleNamespace(sentence1=f"{prefix} sentence {i} one .", sentence2=f"{prefix} sentence {i} two .")
        for i in range(count)
    ]


def swapped(pair) -> SimpleNamespace:
    return SimpleNamespace(sentence1=pair.sentence2, sentence2="  " + pair.sentence1.replace(" ", "\t", 1))


def test_the_key_ignores_order_whitespace_case_and_invisible_characters_but_not_punctuation():
    assert pair_key("A  b ", "c") == pair_key("c", " A\tb") == ("a b", "c")
    assert pair_key("a b", "c") == pair_key("A B", "C") == pair_key("a\u200b b", "\ufeffc") == pair_key("ａ b", "c")
    assert pair_key("a b", "c") != pair_key("a b.", "c")


@pytest.mark.parametrize(
    "disguise",
    [str.upper, lambda text: text.replace(" ", " \u200b", 1), lambda text: "\u2060" + text.title()],
    ids=["upper-cased", "zero-width space", "word joiner and title case"],
)
def test_dev_that_is_train_disguised_is_refused(disguise):
    train = pairs(50, "t")
    dev = [SimpleNamespace(sentence1=disguise(p.sentence1), sentence2=disguise(p.sentence2)) for p in train[:10]]
    with pytest.raises(UserError, match="10 of its 10 pairs are also pairs of --data.train"):
        check_split_overlap({"train": train, "dev": dev, "test": pairs(5, "e")}, 0.01, NAMES)


@pytest.mark.parametrize("shape", ["dev is train plus a row", "dev is train swapped", "half of test from train"])
def test_the_three_leaks_are_refused_in_one_line(shape):
    train = pairs(200, "train")
    splits = {"train": train, "dev": pairs(50, "dev"), "test": pairs(50, "test")}
    if shape == "dev is train plus a row":
        splits["dev"] = train + pairs(1, "extra")
        leaked, into = 200, "dev"
    elif shape == "dev is train swapped":
        splits["dev"] = [swapped(pair) for pair in reversed(train)]
        leaked, into = 200, "dev"
    else:
        splits["test"] = train[:25] + pairs(25, "test")
        leaked, into = 25, "test"
    with pytest.raises(UserError) as raised:
        check_split_overlap(splits, 0.01, NAMES)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        f"{NAMES[into]}: {leaked} of its {len(splits[into])} pairs are also pairs of {NAMES['train']}"
    )
    assert "--data.max_split_overlap" in message
    assert check_split_overlap(splits, 1.0, NAMES).counts[f"train/{into}"] == leaked  # the flag accepts it


def test_a_few_shared_pairs_under_the_threshold_are_counted_not_refused():
    train, test = pairs(1000, "train"), pairs(500, "test")
    overlap = check_split_overlap(
        {"train": train, "dev": pairs(100, "dev"), "test": test[:-5] + train[:5]}, 0.01, NAMES
    )
    assert overlap.counts == {"train/dev": 0, "train/test": 5, "dev/test": 0}
    assert overlap.params() == {"overlap_train_dev": 0, "overlap_train_test": 5, "overlap_dev_test": 0}
    with pytest.raises(UserError):
        check_split_overlap({"train": train, "dev": pairs(100, "dev"), "test": test[:-5] + train[:5]}, 0.0, NAMES)


def test_a_shared_sentence_in_different_pairs_is_not_overlap():
    train = [SimpleNamespace(sentence1="He said so .", sentence2="He agreed .")]
    dev = [SimpleNamespace(sentence1="He said so .", sentence2="She refused .")]
    assert split_overlap({"train": train, "dev": dev, "test": []}).counts["train/dev"] == 0


def test_a_fraction_outside_zero_one_is_refused():
    with pytest.raises(UserError, match=r"^--data.max_split_overlap=1.5: "):
        check_split_overlap({"train": [], "dev": [], "test": []}, 1.5, NAMES)


# ── through the registry: the user's TSV files, MRPC's own files, the CLI ─────────────────────


def write_splits(folder, train_rows, dev_rows, test_rows) -> dict:
    from tests.pair_files import write_tsv

    folder.mkdir(parents=True, exist_ok=True)
    return {
        split: str(write_tsv(folder / f"{split}.tsv", rows))
        for split, rows in (("train", train_rows), ("dev", dev_rows), ("test", test_rows))
    }


def rows(count: int, prefix: str) -> list[tuple[str, str, str, str]]:
    return [
        (
            f"{prefix}{i}",
            f"{prefix} sentence {i} says one thing .",
            f"{prefix} sentence {i} says another .",
            "yes" if i % 2 else "no",
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("shape", ["dev = train + one row", "dev = train reversed", "half of test from train"])
def test_a_leaking_tsv_set_is_refused_by_load_pair_data(tmp_path, shape):
    from harness.datasets.registry import load_pair_data

    train, dev, test = rows(100, "tr"), rows(30, "dv"), rows(30, "te")
    if shape == "dev = train + one row":
        dev = train + rows(1, "extra")
    elif shape == "dev = train reversed":  # rows in reverse order, each pair's sentences swapped
        dev = [(identifier, second, first, label) for identifier, first, second, label in reversed(train)]
    else:
        test = train[:15] + rows(15, "te")
    files = write_splits(tmp_path, train, dev, test)
    into = "test" if shape.startswith("half") else "dev"
    with pytest.raises(UserError) as raised:
        load_pair_data(dataset="tsv", **files)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"--data.{into}={files[into]}: ")
    assert f"also pairs of --data.train={files['train']}" in message
    accepted = load_pair_data(dataset="tsv", **files, max_split_overlap=1.0)
    assert accepted.split_overlap[f"overlap_train_{into}"] == (15 if into == "test" else 100)


def test_mrpcs_own_files_pass_with_no_shared_pair(real_mrpc_dir):
    """MRPC shares sentences across its splits (43 train sentences recur in GLUE dev, 244 in MSR
    test, 24 dev sentences in test) but not one pair."""
    from harness.datasets.registry import load_pair_data

    data = load_pair_data(dataset="mrpc", mrpc_dir=str(real_mrpc_dir), max_split_overlap=0.0)
    assert data.split_overlap == {"overlap_train_dev": 0, "overlap_train_test": 0, "overlap_dev_test": 0}
    shared = {}
    for earlier, later in (("train", "dev"), ("train", "test"), ("dev", "test")):
        shared[f"{earlier}/{later}"] = len(set(data.sentences(earlier)) & set(data.sentences(later)))
    assert shared == {"train/dev": 43, "train/test": 244, "dev/test": 24}


@pytest.mark.slow
def test_the_finetune_cli_refuses_a_leaking_set_before_any_run(tmp_path, monkeypatch, capsys, save_encoder):
    from tests.helpers import finetune_refused_before_any_run

    encoder, _ = save_encoder("elmo", tmp_path)
    train = rows(100, "tr")
    files = write_splits(tmp_path / "leak", train, rows(30, "dv"), train[:15] + rows(15, "te"))
    line = finetune_refused_before_any_run(files, encoder, tmp_path, monkeypatch, capsys)
    assert line.startswith(f"error: --data.test={files['test']}: 15 of its 30 pairs"), line
