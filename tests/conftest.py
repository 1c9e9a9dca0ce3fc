"""Shared fixtures: tiny MRPC-format files and the real data set when it is available."""

import os
import random
from pathlib import Path

import pytest
import torch

from harness.datasets.overlap import pair_key
from pretrain.encoders.checkpoints import slim_checkpoint
from pretrain.families import family_of
from pretrain.tokenization.bpe import SubwordTokenizer
from pretrain.tokenization.words import Tokenizer
from tests.pair_files import write_tsv

REPO_ROOT = Path(__file__).resolve().parents[1]

# Tests run the CLI in subprocesses with other working directories: make a relative
# MRPC_DIR (CI passes ../shared/data/mrpc) absolute once, here.
if os.environ.get("MRPC_DIR", "").strip():
    os.environ["MRPC_DIR"] = str(Path(os.environ["MRPC_DIR"]).expanduser().resolve())

MSR_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"

SAMPLE_ROWS = [
    ("1", "101", "102", 'He said "yes" to the plan.', "He agreed to the plan."),
    ("0", "103", "104", 'The "quote never closes.', "Shares fell 3 percent."),
    ("1", "105", "106", "Café prices rose – sharply.", "Prices at the café climbed steeply."),
]


def write_msr(path, rows, bom=True, crlf=False, trailing_blank=0, header=MSR_HEADER) -> Path:
    """Write an MSR-format file. A row is a sequence of fields (joined by tabs) or a raw line."""
    return write_tsv(
        path, rows, header=(header,), bom=bom, newline="\r\n" if crlf else "\n", trailing_blank=trailing_blank
    )


@pytest.fixture(name="write_msr")
def write_msr_fixture():
    """The ``write_msr`` helper, for tests that make their own MRPC-format files."""
    return write_msr


@pytest.fixture
def sample_rows():
    return list(SAMPLE_ROWS)


def write_synthetic_mrpc(directory: Path, extra_train: int = 600, test_pairs: int = 400) -> Path:
    """A small but valid MSR-format data set: the train file holds the 408 GLUE dev id pairs (so
    the split applies) plus ``extra_train`` pairs, the test file ``test_pairs``. Sentences come
    from a few templates and a seeded shuffle of words; a paraphrase pair shares its content
    words, a non-paraphrase pair does not — enough signal for smoke runs, no licensed text."""
    generator = random.Random(0)
    subjects = [
        "the company",
        "the minister",
        "shares",
        "the court",
        "police",
        "the team",
        "analysts",
        "the bank",
        "the senator",
        "the union",
        "investors",
        "the agency",
        "officials",
        "the board",
        "the city",
    ]
    verbs = ["said", "reported", "rose", "fell", "announced", "denied", "expected", "approved", "rejected", "warned"]
    objects = [
        "profits",
        "the plan",
        "a new law",
        "the merger",
        "sales",
        "the deal",
        "prices",
        "the report",
        "the vote",
        "earnings",
        "the budget",
        "the strike",
        "the offer",
        "the ruling",
        "the forecast",
    ]
    times = ["on monday", "on friday", "last week", "in march", "this year", "today", "in 2003", "by 5 percent"]

    def sentence(subject, verb, thing, when):
        return f"{subject.capitalize()} {verb} {thing} {when}."

    taken = set()  # no pair twice: the splits share none, as the harness requires

    def pair(paraphrase: bool) -> tuple[str, str]:
        while True:
            parts = [generator.choice(options) for options in (subjects, verbs, objects, times)]
            first = sentence(*parts)
            if paraphrase:  # the same content, reordered or with a synonym-ish time
                second = f"{parts[3].capitalize()}, {parts[0]} {parts[1]} {parts[2]}."
            else:
                second = sentence(*[generator.choice(options) for options in (subjects, verbs, objects, times)])
            if pair_key(first, second) not in taken:
                taken.add(pair_key(first, second))
                return first, second

    dev_ids = (REPO_ROOT / "harness" / "resources" / "mrpc_dev_ids.tsv").read_text().split()
    dev_ids = list(zip(dev_ids[0::2], dev_ids[1::2]))
    rows, next_id = [], 900000
    for id1, id2 in dev_ids:
        label = int(generator.random() < 0.68)
        rows.append((str(label), id1, id2, *pair(bool(label))))
    for _ in range(extra_train):
        label = int(generator.random() < 0.68)
        rows.append((str(label), str(next_id), str(next_id + 1), *pair(bool(label))))
        next_id += 2
    generator.shuffle(rows)
    directory.mkdir(parents=True, exist_ok=True)
    write_msr(directory / "msr_paraphrase_train.txt", rows)
    test = []
    for _ in range(test_pairs):
        label = int(generator.random() < 0.66)
        test.append((str(label), str(next_id), str(next_id + 1), *pair(bool(label))))
        next_id += 2
    write_msr(directory / "msr_paraphrase_test.txt", test)
    return directory


@pytest.fixture(scope="session")
def mrpc_dir(tmp_path_factory) -> Path:
    """The MSR release from ``$MRPC_DIR`` when it is there, else a small synthetic MSR-format data
    set (``write_synthetic_mrpc``), so the CLI smoke tests always run."""
    configured = os.environ.get("MRPC_DIR", "")
    if configured and (Path(configured) / "msr_paraphrase_train.txt").is_file():
        return Path(configured).resolve()
    return write_synthetic_mrpc(tmp_path_factory.mktemp("synthetic-mrpc"))


@pytest.fixture(scope="session")
def real_mrpc_dir() -> Path:
    """The full MSR release from ``$MRPC_DIR`` (resolved); skips the tests that need it when it is
    not there. Module fixtures that need the real data ask for this one."""
    configured = os.environ.get("MRPC_DIR", "")
    if not configured or not (Path(configured) / "msr_paraphrase_train.txt").is_file():
        pytest.skip("MRPC_DIR does not point at the MSR release files")
    return Path(configured).resolve()


# The longest files, longest first (``pytest --durations=0``, summed by file). ``make test`` hands
# files to its xdist workers in collection order: these first, then the other files with slow tests,
# then the unit tests, so that no long file starts last and runs alone.
LONGEST_FILES = (
    "benchmarks/test_suite.py",
    "benchmarks/test_cluster.py",
    "ui/test_server.py",
    "ui/test_browser.py",
    "downstream/test_cli.py",
    "downstream/test_families_cli.py",
    "pretrain/test_mid_epoch_resume.py",
    "test_failed_runs.py",
    "downstream/test_first_look.py",
    "harness/test_server.py",
)


def pytest_collection_modifyitems(items):
    """Order the files as :data:`LONGEST_FILES` says; a file's own tests keep their order."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    rank = {REPO_ROOT / "tests" / name: place for place, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: (rank.get(item.path, len(rank)), item.path not in slow_files))


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny models gain nothing from threads, and spinning threads stall on a busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ── tiny encoders of every family, saved the way pretraining exports them ──────────────────

TINY_SENTENCES = [
    "the cat sat on the mat .",
    "a dog barked at the cat , loudly .",
    "shares fell 3 percent on monday .",
    "the market rose sharply after the report .",
    "he said so .",
    "she agreed to the plan at once .",
]


def tokenizer_for(family: str):
    """A tokenizer of the family's kind, built on the tiny sentences."""
    if family_of(family).tokenizer == "subword":
        return SubwordTokenizer.build(TINY_SENTENCES * 3, vocab_size=300, min_frequency=1)
    return Tokenizer.build(TINY_SENTENCES)


def tiny_module(family: str, vocab_size: int):
    """The family's LightningModule at its test size (the registry's ``tiny`` config)."""
    spec = family_of(family)
    return spec.lightning_class()(**spec.tiny_config(vocab_size).to_dict())


def _save_encoder(family: str, directory) -> tuple:
    """A tiny, untrained ``family`` encoder saved as a slim checkpoint; returns (path, module)."""
    tokenizer = tokenizer_for(family)
    torch.manual_seed(0)
    lit = tiny_module(family, len(tokenizer))
    lit.tokenizer = tokenizer
    state = {"state_dict": lit.state_dict(), "epoch": 0, "global_step": 0}
    lit.on_save_checkpoint(state)
    path = directory / f"{family}.ckpt"
    torch.save(slim_checkpoint(state), path)
    return path, lit


@pytest.fixture(scope="session")
def tiny_sentences() -> list[str]:
    """The sentences the tiny encoders' tokenizers were built on."""
    return list(TINY_SENTENCES)


@pytest.fixture(name="save_encoder", scope="session")
def save_encoder_fixture():
    """``save_encoder(family, directory) -> (path, LightningModule)``: a tiny untrained encoder of
    ``family`` with its tokenizer, as a slim checkpoint."""
    return _save_encoder


# ── tiny published-style models for the hf family (tests/hf_fixtures.py), made once a session ──


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory, mrpc_dir) -> Path:
    """A ``save_pretrained`` folder: a random 2 × 16 BERT and its WordPiece tokenizer."""
    from tests.hf_fixtures import make_tiny_bert, train_sentences

    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), train_sentences(mrpc_dir))


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory, mrpc_dir) -> Path:
    """A ``save_pretrained`` folder: a random 2 × 16 GPT-2 and its byte-level BPE tokenizer."""
    from tests.hf_fixtures import make_tiny_gpt2, train_sentences

    return make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), train_sentences(mrpc_dir))
