import gc
import hashlib

import pytest

from harness.datasets import mrpc, tsv
from harness.datasets.reader import read_pair_tsv
from harness.datasets.registry import load_pair_data
from harness.datasets.types import Pair, PairData, combine_digests
from harness.errors import UserError
from tests.helpers import assert_one_line_error
from tests.pair_files import HEADER, write_tsv

TRAIN_ROWS = [
    ("t1", 'A man says "hi" to a dog.', "A person greets an animal.", "entailment"),
    ("t2", "A woman rides a bike.", "Nobody is cycling.", "contradiction"),
    ("t3", "Kids play in the café – loudly.", "Children are at school.", "neutral"),
    ("t4", 'The "quote never closes.', "Someone left a quote open.", "neutral"),
    ("t5", "Two dogs run on grass.", "Animals are outside.", "entailment"),
]
DEV_ROWS = [
    ("d1", "A chef cooks pasta.", "Someone is cooking.", "entailment"),
    ("d2", "The sky is clear.", "It is raining hard.", "contradiction"),
]
TEST_ROWS = [
    ("e1", "A boy reads a book.", "A child is reading.", "entailment"),
    ("e2", "A cat sleeps.", "The cat is hungry.", "neutral"),
    ("e3", "The shop is closed.", "The shop is open.", "contradiction"),
]
# label order: strings sorted -> contradiction 0, entailment 1, neutral 2
TRAIN_PAIRS = [
    Pair(1, ("t1",), 'A man says "hi" to a dog.', "A person greets an animal."),
    Pair(0, ("t2",), "A woman rides a bike.", "Nobody is cycling."),
    Pair(2, ("t3",), "Kids play in the café – loudly.", "Children are at school."),
    Pair(2, ("t4",), 'The "quote never closes.', "Someone left a quote open."),
    Pair(1, ("t5",), "Two dogs run on grass.", "Animals are outside."),
]


@pytest.fixture
def three_label(tmp_path):
    """A small entailment / neutral / contradiction data set in the standard format: {split: path}."""
    folder = tmp_path / "nli3"
    folder.mkdir()
    rows = {"train": TRAIN_ROWS, "dev": DEV_ROWS, "test": TEST_ROWS}
    return {split: write_tsv(folder / f"{split}.tsv", split_rows) for split, split_rows in rows.items()}


# --- good files ---------------------------------------------------------------------------------


def test_header_file_keeps_quotes_and_sorts_string_labels(three_label):
    read = read_pair_tsv(three_label["train"])
    assert read.labels == ["contradiction", "entailment", "neutral"]
    assert read.pairs == TRAIN_PAIRS


def test_rows_without_id_column_are_numbered_by_line(tmp_path):
    rows = [row[1:] for row in TRAIN_ROWS]
    read = read_pair_tsv(write_tsv(tmp_path / "a.tsv", rows, header=HEADER[1:]))
    assert [pair.ids for pair in read.pairs] == [("2",), ("3",), ("4",), ("5",), ("6",)]
    assert [pair.label for pair in read.pairs] == [pair.label for pair in TRAIN_PAIRS]


def test_renamed_columns_in_any_order_with_extra_columns(tmp_path):
    header = ("genre", "gold", "hypothesis", "pairID", "premise")
    rows = [("fiction", label, second, identifier, first) for identifier, first, second, label in TRAIN_ROWS]
    path = write_tsv(tmp_path / "mnli_like.tsv", rows, header=header)
    read = read_pair_tsv(
        path, sentence1_column="premise", sentence2_column="hypothesis", label_column="gold", id_column="pairID"
    )
    assert read.pairs == TRAIN_PAIRS
    by_index = read_pair_tsv(path, sentence1_column=4, sentence2_column="2", label_column=1, id_column=3)
    assert by_index.pairs == TRAIN_PAIRS  # "2" from a command line is an index when no column has that name


def test_no_header_default_order_and_indexes(tmp_path):
    standard = [row[1:] for row in TRAIN_ROWS]  # sentence1, sentence2, label
    read = read_pair_tsv(write_tsv(tmp_path / "a.tsv", standard, header=None), has_header=False)
    assert [(p.sentence1, p.label, p.ids) for p in read.pairs][:2] == [
        (TRAIN_ROWS[0][1], 1, ("1",)),
        (TRAIN_ROWS[1][1], 0, ("2",)),
    ]
    shuffled = [(label, identifier, second, first) for identifier, first, second, label in TRAIN_ROWS]
    path = write_tsv(tmp_path / "b.tsv", shuffled, header=None)
    read = read_pair_tsv(path, has_header=False, sentence1_column=3, sentence2_column="2", label_column=0, id_column=1)
    assert read.pairs == TRAIN_PAIRS


def test_integer_labels_sort_numerically_and_read_canonically(tmp_path):
    rows = [("a b", "c d", "10"), ("e f", "g h", "2"), ("i j", "k l", "-1"), ("m n", "o p", " 02 ")]
    read = read_pair_tsv(write_tsv(tmp_path / "a.tsv", rows, header=HEADER[1:]))
    assert read.labels == ["-1", "2", "10"]  # string order would put "10" before "2"
    assert [pair.label for pair in read.pairs] == [2, 1, 0, 1]
    dev = read_pair_tsv(write_tsv(tmp_path / "dev.tsv", [("q", "r", "+10")], header=HEADER[1:]), read.labels)
    assert dev.pairs[0].label == 2


@pytest.mark.parametrize(
    "options",
    [
        dict(bom=True),
        dict(newline="\r\n"),
        dict(newline="\r"),
        dict(trailing_blank=3),
        dict(bom=True, newline="\r\n", trailing_blank=2),
    ],
)
def test_bom_line_ends_and_trailing_blanks_read_alike(tmp_path, options):
    reference = read_pair_tsv(write_tsv(tmp_path / "reference.tsv", TRAIN_ROWS))
    read = read_pair_tsv(write_tsv(tmp_path / "variant.tsv", TRAIN_ROWS, **options))
    assert read.pairs == reference.pairs == TRAIN_PAIRS
    assert read.digest == reference.digest


def test_digest_is_the_normalised_text_and_sees_every_character(tmp_path):
    path = write_tsv(tmp_path / "a.tsv", TRAIN_ROWS, bom=True, newline="\r\n", trailing_blank=1)
    lines = ["\t".join(HEADER)] + ["\t".join(row) for row in TRAIN_ROWS]
    expected = hashlib.sha256(("\n".join(lines) + "\n").encode("utf-8")).hexdigest()
    assert read_pair_tsv(path).digest == expected
    path.write_bytes(path.read_bytes().replace(b"hi", b"Hi"))
    assert read_pair_tsv(path).digest != expected


def test_three_label_data_set_through_the_interface(three_label):
    data = load_pair_data(dataset="tsv", **three_label)
    assert (data.name, data.labels, data.id_columns) == ("nli3", ["contradiction", "entailment", "neutral"], ("id",))
    assert (data.num_classes, data.positive_label, data.positive_class, data.f1_average) == (3, None, None, "macro")
    assert data.train == TRAIN_PAIRS
    assert [(p.ids, p.label) for p in data.test] == [(("e1",), 1), (("e2",), 2), (("e3",), 0)]
    assert data.label_counts("dev") == {"contradiction": 1, "entailment": 1, "neutral": 0}
    assert data.sentences("dev") == [
        "A chef cooks pasta.",
        "Someone is cooking.",
        "The sky is clear.",
        "It is raining hard.",
    ]
    assert len(data.sentences()) == 2 * (len(TRAIN_ROWS) + len(DEV_ROWS) + len(TEST_ROWS))
    assert data.ids_by_column(data.dev) == {"id": ["d1", "d2"]}
    digests = [read_pair_tsv(three_label[split]).digest for split in ("train", "dev", "test")]
    assert data.content_hash == combine_digests(digests)
    assert load_pair_data(dataset="tsv", **three_label, name="x").name == "x"


def test_binary_positive_label_defaults_to_the_later_label_and_can_be_chosen(tmp_path):
    header = HEADER[1:]
    files = {
        split: write_tsv(
            tmp_path / f"{split}.tsv", [(f"a {split}", "b", "yes"), ("c", f"d {split}", "no")], header=header
        )
        for split in ("train", "dev", "test")
    }
    data = load_pair_data(dataset="tsv", **files)
    assert (data.labels, data.positive_label, data.positive_class) == (["no", "yes"], "yes", 1)
    assert data.f1_average == "binary"
    chosen = load_pair_data(dataset="tsv", **files, positive_label="no")
    assert (chosen.positive_label, chosen.positive_class) == ("no", 0)
    assert_one_line_error(
        lambda: load_pair_data(dataset="tsv", **files, positive_label="maybe"), "--data.positive_label=maybe", "no, yes"
    )


def test_default_name_is_the_train_stem(tmp_path, three_label):
    train = write_tsv(tmp_path / "snli_train.tsv", TRAIN_ROWS)
    assert tsv.dataset_name(train) == "snli_train"
    assert tsv.dataset_name(three_label["train"]) == "nli3"


def test_pair_data_checks_its_invariants():
    pair = Pair(1, ("a",), "s", "t")
    assert PairData("x", ["a", "b"], ("id",), [pair], [], [], "h").positive_label == "b"
    with pytest.raises(ValueError):
        PairData("x", ["a"], ("id",), [], [], [], "h")
    with pytest.raises(ValueError):
        PairData("x", ["a", "b"], ("id",), [Pair(2, ("a",), "s", "t")], [], [], "h")
    with pytest.raises(ValueError):
        PairData("x", ["a", "b"], ("id1", "id2"), [pair], [], [], "h")
    with pytest.raises(ValueError):
        PairData("x", ["a", "b", "c"], ("id",), [pair], [], [], "h", positive_label="a")


# --- malformed files: one line naming file:line (or the file, or the flag) ----------------------


@pytest.mark.parametrize(
    "bad_row, fragment",
    [
        ("t9\tonly\tthree", "expected 4 tab-separated fields, found 3"),
        ('t9\ta "quoted\ttab" here\tb\tneutral', "expected 4 tab-separated fields, found 5"),
        ("t9\t  \tb\tneutral", "empty sentence1"),
        ("t9\ta\t\tneutral", "empty sentence2"),
        ("t9\ta\tb\t ", "empty label"),
        (" \ta\tb\tneutral", "empty id"),
        ("t1\ta\tb\tneutral", "id 't1' already used at line 2"),
        ("", "blank line before the end"),
    ],
)
def test_bad_row_names_file_and_line(tmp_path, bad_row, fragment):
    rows = TRAIN_ROWS[:1] + [bad_row] + TRAIN_ROWS[1:]
    path = write_tsv(tmp_path / "bad.tsv", rows, newline="\r\n")
    assert_one_line_error(lambda: read_pair_tsv(path), f"{path}:3: ", fragment)


def test_unknown_dev_or_test_label_names_file_and_line(three_label):
    dev = write_tsv(three_label["dev"], DEV_ROWS + [("d3", "a", "b", "unrelated")])
    message = assert_one_line_error(
        lambda: load_pair_data(dataset="tsv", train=three_label["train"], dev=dev, test=three_label["test"]),
        f"{dev}:4: ",
        "'unrelated'",
        "contradiction, entailment, neutral",
    )
    assert "train" in message


def test_train_labels_all_one_value(tmp_path):
    rows = [(identifier, first, second, "entailment") for identifier, first, second, _ in TRAIN_ROWS]
    path = write_tsv(tmp_path / "train.tsv", rows)
    assert_one_line_error(
        lambda: read_pair_tsv(path), f"--data.train={path}", "'entailment'", "at least 2 classes", "--data.label_column"
    )


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_undecodable_bytes_name_the_line(tmp_path, newline):
    path = write_tsv(tmp_path / "bad.tsv", TRAIN_ROWS, bom=True, newline=newline)
    path.write_bytes(path.read_bytes().replace("café".encode(), b"caf\xe9"))  # Latin-1 bytes on line 4
    assert_one_line_error(lambda: read_pair_tsv(path), f"{path}:4: ", "UTF-8", "0xe9")


def test_undecodable_bytes_far_into_a_file(tmp_path):
    rows = [(f"r{k}", f"sentence {k} one", f"sentence {k} two", "ab"[k % 2]) for k in range(20_000)]
    path = write_tsv(tmp_path / "big.tsv", rows)
    lines = path.read_bytes().split(b"\n")
    lines[15_000] += b"\xff"
    path.write_bytes(b"\n".join(lines))
    assert_one_line_error(lambda: read_pair_tsv(path), f"{path}:15001: ", "0xff")


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"\n\n", b"\r\n \r\n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.tsv"
    path.write_bytes(content)
    assert_one_line_error(lambda: read_pair_tsv(path, flag="--data.dev"), f"--data.dev={path}", "empty")


def test_header_only(tmp_path):
    path = write_tsv(tmp_path / "header.tsv", [], trailing_blank=1)
    assert_one_line_error(lambda: read_pair_tsv(path), str(path), "no pairs after the header")


def test_missing_or_doubled_header_column(tmp_path):
    header = ("id", "sentence1", "sentence2", "gold")
    path = write_tsv(tmp_path / "a.tsv", [row[:3] + ("x",) for row in TRAIN_ROWS], header=header)
    assert_one_line_error(lambda: read_pair_tsv(path), f"{path}:1: ", "no column 'label'", "--data.label_column")
    path = write_tsv(tmp_path / "b.tsv", TRAIN_ROWS, header=("id", "sentence1", "sentence1", "label"))
    assert_one_line_error(lambda: read_pair_tsv(path), f"{path}:1: ", "twice 'sentence1'", "--data.sentence1_column")


@pytest.mark.parametrize("has_header", [True, False])
def test_column_index_out_of_range(tmp_path, has_header):
    path = write_tsv(tmp_path / "a.tsv", TRAIN_ROWS, header=HEADER if has_header else None)
    assert_one_line_error(
        lambda: read_pair_tsv(path, label_column=7, has_header=has_header),
        "--data.label_column=7",
        "out of range",
        "4 columns",
    )


def test_column_flag_mistakes_name_the_flag(tmp_path):
    path = write_tsv(tmp_path / "a.tsv", TRAIN_ROWS, header=None)
    assert_one_line_error(
        lambda: read_pair_tsv(path, has_header=False, label_column="gold"),
        "--data.label_column=gold",
        "0-based column index",
    )
    assert_one_line_error(
        lambda: read_pair_tsv(path, has_header=False, label_column="²"), "--data.label_column=²", "0-based column index"
    )
    assert_one_line_error(
        lambda: read_pair_tsv(path, has_header=False, sentence2_column=0),
        "--data.sentence2_column",
        "already the sentence1 column",
    )


def test_load_flag_mistakes(three_label, tmp_path):
    files = dict(three_label)
    assert_one_line_error(
        lambda: load_pair_data(dataset="tsv", train=files["train"], dev=files["dev"]), "--data.test", "required"
    )
    assert_one_line_error(
        lambda: load_pair_data(dataset="csv", **files), "--data.dataset=csv", "mrpc, sick-e, sick-r, stsb or tsv"
    )
    assert_one_line_error(
        lambda: load_pair_data(dataset="mrpc", train=files["train"]), "--data.train", "--data.dataset=tsv"
    )
    missing = tmp_path / "nope.tsv"
    assert_one_line_error(
        lambda: load_pair_data(dataset="tsv", **{**files, "dev": missing}), f"--data.dev={missing}", "not found"
    )
    assert_one_line_error(
        lambda: load_pair_data(dataset="tsv", **{**files, "dev": tmp_path}), f"--data.dev={tmp_path}", "folder"
    )
    assert_one_line_error(
        lambda: load_pair_data(dataset="tsv", **{**files, "test": files["dev"]}),
        f"--data.test={files['dev']}",
        "same content as --data.dev",
    )
    assert_one_line_error(
        lambda: load_pair_data(dataset="tsv", **files, positive_label="neutral"),
        "--data.positive_label=neutral",
        "only for 2-label",
    )


def test_garbage_collector_is_restored_after_an_error(tmp_path):
    path = write_tsv(tmp_path / "bad.tsv", TRAIN_ROWS + ["x\ty"])
    assert gc.isenabled()
    with pytest.raises(UserError):
        read_pair_tsv(path)
    assert gc.isenabled()


def test_real_msr_file_reads_like_the_msr_reader(real_mrpc_dir):
    path = real_mrpc_dir / "msr_paraphrase_test.txt"  # BOM, quotes that never close, 1725 pairs
    read = read_pair_tsv(path, sentence1_column="#1 String", sentence2_column="#2 String", label_column="Quality")
    expected = [(p.label, p.sentence1, p.sentence2) for p in mrpc.read_msr_file(path)]
    assert read.labels == ["0", "1"]
    assert [(p.label, p.sentence1, p.sentence2) for p in read.pairs] == expected
    assert read.digest == mrpc.EXPECTED["test"][3]  # the release's hash of its normalised text


def test_read_benchmark_file_reads_back(tmp_path):
    from benchmarks.speed.read_speed import sentence_pool, write_pairs

    path = tmp_path / "train.tsv"
    write_pairs(path, 500, sentence_pool(50))
    read = read_pair_tsv(path)
    assert len(read.pairs) == 500 and read.labels == ["contradiction", "entailment", "neutral"]
    assert [pair.ids for pair in read.pairs[:2]] == [("p0",), ("p1",)]
    assert any('"' in pair.sentence1 for pair in read.pairs)


@pytest.mark.slow
def test_read_benchmark_command(tmp_path, capsys):
    from benchmarks.speed import read_speed

    assert read_speed.main(["--pairs", "300", "--json", str(tmp_path / "rows.json")]) == 0
    rows = read_speed.json.loads((tmp_path / "rows.json").read_text())
    assert [(row["row"], row["pairs"]) for row in rows] == [("read_pair_tsv", 300), ("load_pair_data", 306)]
    assert "pairs/s" in capsys.readouterr().out
