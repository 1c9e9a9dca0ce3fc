import functools
import hashlib
import http.server
import shutil
import threading

import pytest

from harness.datasets import mrpc, registry
from harness.datasets.mrpc import TEST_FILE, TRAIN_FILE
from harness.datasets.reader import read_pair_tsv
from harness.datasets.types import SPLITS, Pair
from harness.errors import UserError
from tests.helpers import assert_one_line_error

EXPECTED_PAIRS = [
    Pair(1, ("101", "102"), 'He said "yes" to the plan.', "He agreed to the plan."),
    Pair(0, ("103", "104"), 'The "quote never closes.', "Shares fell 3 percent."),
    Pair(1, ("105", "106"), "Café prices rose – sharply.", "Prices at the café climbed steeply."),
]


# --- reader -------------------------------------------------------------------------------------


def test_quotes_keep_tab_boundaries(tmp_path, write_msr, sample_rows):
    assert mrpc.read_msr_file(write_msr(tmp_path / "a.txt", sample_rows)) == EXPECTED_PAIRS


@pytest.mark.parametrize(
    "options",
    [dict(bom=False), dict(crlf=True), dict(trailing_blank=3), dict(bom=False, crlf=True, trailing_blank=1)],
)
def test_encodings_and_line_endings_parse_alike(tmp_path, write_msr, sample_rows, options):
    path = write_msr(tmp_path / "a.txt", sample_rows, **options)
    assert mrpc.read_msr_file(path) == EXPECTED_PAIRS
    reference = write_msr(tmp_path / "reference.txt", sample_rows, bom=False)
    digest = read_pair_tsv(path, **mrpc.MSR_FORMAT).digest
    assert digest == read_pair_tsv(reference, **mrpc.MSR_FORMAT).digest
    assert digest == hashlib.sha256(reference.read_bytes()).hexdigest()  # BOM-less, LF, one final line end


def test_old_mac_line_endings(tmp_path, write_msr, sample_rows):
    path = write_msr(tmp_path / "a.txt", sample_rows)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r"))
    assert mrpc.read_msr_file(path) == EXPECTED_PAIRS


@pytest.mark.parametrize(
    "bad_row, fragment",
    [
        ("1\t107\t108\tonly four fields", "expected 5 tab-separated fields, found 4"),
        ("1\t107\t108\ta\tb\tc", "expected 5 tab-separated fields, found 6"),
        ("x\t107\t108\ta\tb", "label 'x' is not among MRPC's labels (0, 1)"),
        ("1\t107\t108\t  \tb", "empty sentence1 (column 3)"),
        ("1\t107\t\ta\tb", "empty id (column 2)"),
        ("1\t101\t102\ta\tb", "id '101/102' already used at line 2"),
        ("", "blank line"),
    ],
)
def test_bad_row_names_file_and_line(tmp_path, write_msr, sample_rows, bad_row, fragment):
    rows = sample_rows[:1] + [bad_row] + sample_rows[1:]
    path = write_msr(tmp_path / "bad.txt", rows, crlf=True)
    assert_one_line_error(lambda: mrpc.read_msr_file(path), f"{path}:3: ", fragment)


def test_undecodable_bytes_name_the_line(tmp_path, write_msr, sample_rows):
    path = write_msr(tmp_path / "bad.txt", sample_rows, crlf=True)
    lines = path.read_bytes().split(b"\r\n")
    lines[3] = lines[3].replace(b"caf\xc3\xa9", b"caf\xe9")  # Latin-1 bytes in the last row
    path.write_bytes(b"\r\n".join(lines))
    assert_one_line_error(lambda: mrpc.read_msr_file(path), f"{path}:4: ", "UTF-8")


def test_bad_header(tmp_path, write_msr, sample_rows):
    path = write_msr(tmp_path / "bad.txt", sample_rows, header="Quality,#1 ID,#2 ID,#1 String,#2 String")
    assert_one_line_error(lambda: mrpc.read_msr_file(path), f"{path}:1: ", "header")


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"\n\n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    assert_one_line_error(lambda: mrpc.read_msr_file(path), str(path), "empty")


def test_header_only(tmp_path, write_msr):
    path = write_msr(tmp_path / "header.txt", [])
    assert_one_line_error(lambda: mrpc.read_msr_file(path), str(path), "no pairs")


def test_directory_and_missing_paths(tmp_path):
    assert_one_line_error(lambda: mrpc.read_msr_file(tmp_path), str(tmp_path), "folder")
    missing = tmp_path / "nope.txt"
    assert_one_line_error(lambda: mrpc.read_msr_file(missing), str(missing), "not found")
    assert_one_line_error(lambda: mrpc.verify_msr_file(missing, "train"), str(missing), "MRPC_DIR")


def test_default_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MRPC_DIR", str(tmp_path))
    assert mrpc.default_mrpc_dir() == tmp_path
    monkeypatch.delenv("MRPC_DIR")
    assert mrpc.default_mrpc_dir() == mrpc.Path(mrpc.__file__).resolve().parents[2] / "data" / "mrpc"


# --- content checks -----------------------------------------------------------------------------


def test_real_files_verify(real_mrpc_dir):
    mrpc.verify_msr_file(real_mrpc_dir / TRAIN_FILE, "train")
    mrpc.verify_msr_file(real_mrpc_dir / TEST_FILE, "test")


def test_crlf_without_bom_still_verifies(real_mrpc_dir, tmp_path):
    raw = (real_mrpc_dir / TRAIN_FILE).read_bytes().removeprefix(b"\xef\xbb\xbf")
    copy = tmp_path / TRAIN_FILE
    copy.write_bytes(raw.replace(b"\n", b"\r\n") + b"\r\n\r\n")
    mrpc.verify_msr_file(copy, "train")


def test_wrong_file_fails_verification(real_mrpc_dir, tmp_path):
    lines = (real_mrpc_dir / TRAIN_FILE).read_bytes().split(b"\n")
    lines[5] = (b"0" if lines[5][:1] == b"1" else b"1") + lines[5][1:]
    flipped = tmp_path / TRAIN_FILE
    flipped.write_bytes(b"\n".join(lines))
    assert_one_line_error(lambda: mrpc.verify_msr_file(flipped, "train"), str(flipped), "positive pairs")
    assert_one_line_error(lambda: mrpc.verify_msr_file(real_mrpc_dir / TEST_FILE, "train"), TEST_FILE, "rows")


# --- download -----------------------------------------------------------------------------------


@pytest.fixture
def serve(tmp_path, monkeypatch):
    """Serve a folder over HTTP on 127.0.0.1; returns (folder, base_url)."""
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    folder = tmp_path / "served"
    folder.mkdir()

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=folder))
    thread = threading.Thread(target=server.serve_forever, kwargs=dict(poll_interval=0.05), daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def copy_real_files(source, destination):
    for name in (TRAIN_FILE, TEST_FILE):
        shutil.copyfile(source / name, destination / name)


def test_download_good_files(real_mrpc_dir, serve, tmp_path):
    served, base_url = serve
    copy_real_files(real_mrpc_dir, served)
    destination = tmp_path / "new" / "mrpc"
    mrpc.download_mrpc(destination, base_url=base_url)
    assert {path.name for path in destination.iterdir()} == {TRAIN_FILE, TEST_FILE}
    for name in (TRAIN_FILE, TEST_FILE):
        assert (destination / name).read_bytes() == (real_mrpc_dir / name).read_bytes()


def test_download_corrupt_file_leaves_nothing(real_mrpc_dir, serve, tmp_path):
    served, base_url = serve
    copy_real_files(real_mrpc_dir, served)
    test_bytes = (served / TEST_FILE).read_bytes()
    (served / TEST_FILE).write_bytes(test_bytes.replace(b"percent", b"per cent", 1))
    destination = tmp_path / "destination"
    destination.mkdir()
    assert_one_line_error(lambda: mrpc.download_mrpc(destination, base_url=base_url), TEST_FILE, "sha256")
    assert list(destination.iterdir()) == []


def test_download_truncated_file_names_it(real_mrpc_dir, serve, tmp_path):
    served, base_url = serve
    copy_real_files(real_mrpc_dir, served)
    (served / TRAIN_FILE).write_bytes((real_mrpc_dir / TRAIN_FILE).read_bytes()[:5000])
    destination = tmp_path / "destination"
    assert_one_line_error(lambda: mrpc.download_mrpc(destination, base_url=base_url), TRAIN_FILE)
    assert not destination.exists() or list(destination.iterdir()) == []


def test_download_404(serve, tmp_path):
    _, base_url = serve
    destination = tmp_path / "destination"
    assert_one_line_error(lambda: mrpc.download_mrpc(destination, base_url=base_url), "404", "MRPC_DIR", TRAIN_FILE)
    assert not destination.exists()


def test_download_unreachable(tmp_path):
    assert_one_line_error(lambda: mrpc.download_mrpc(tmp_path, base_url="file:///nonexistent/folder"), "MRPC_DIR")
    assert list(tmp_path.iterdir()) == []


def test_download_from_file_url(real_mrpc_dir, tmp_path):
    mrpc.download_mrpc(tmp_path, base_url=real_mrpc_dir.resolve().as_uri())
    mrpc.verify_msr_file(tmp_path / TRAIN_FILE, "train")
    mrpc.verify_msr_file(tmp_path / TEST_FILE, "test")


# --- GLUE split ---------------------------------------------------------------------------------


def test_load_real_data(real_mrpc_dir):
    splits = mrpc.load_mrpc(real_mrpc_dir, download=False)
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (3668, 408, 1725)
    assert sum(pair.label for pair in splits.dev) == 279
    assert sum(pair.label for pair in splits.test) == 1147
    dev_ids = {pair.ids for pair in splits.dev}
    assert not dev_ids & {pair.ids for pair in splits.train}
    assert splits.content_hash == "704e94466deb0a1aa268875f81a5d0e472cd23cb4ff7fa38508cffca3b878df6"


def test_split_matches_glue_files(real_mrpc_dir):
    glue_dev = real_mrpc_dir / "dev.tsv"
    if not glue_dev.is_file():
        pytest.skip("no GLUE dev.tsv beside the MSR files")
    splits = mrpc.load_mrpc(real_mrpc_dir, download=False)
    assert splits.dev == mrpc.read_msr_file(glue_dev)  # same rows, same order


def test_load_uses_environment_and_never_downloads_there(real_mrpc_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("MRPC_DIR", str(real_mrpc_dir))
    assert len(mrpc.load_mrpc().dev) == 408
    monkeypatch.setenv("MRPC_DIR", str(tmp_path))
    assert_one_line_error(mrpc.load_mrpc, f"MRPC_DIR={tmp_path}", TRAIN_FILE)
    assert list(tmp_path.iterdir()) == []


def test_load_downloads_missing_file_into_explicit_folder(real_mrpc_dir, tmp_path):
    shutil.copyfile(real_mrpc_dir / TRAIN_FILE, tmp_path / TRAIN_FILE)
    splits = mrpc.load_mrpc(tmp_path, base_url=real_mrpc_dir.resolve().as_uri())
    assert len(splits.test) == 1725
    assert splits.content_hash == mrpc.load_mrpc(real_mrpc_dir, download=False).content_hash
    with pytest.raises(UserError):
        mrpc.load_mrpc(tmp_path / "empty", download=False)


def test_user_files_are_read_without_hash_check(real_mrpc_dir, tmp_path):
    lines = (real_mrpc_dir / TRAIN_FILE).read_text(encoding="utf-8-sig").splitlines()
    lines[1] = "\t".join(["1"] + lines[1].split("\t")[1:3] + ["My own sentence.", "Another one."])
    (tmp_path / TRAIN_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copyfile(real_mrpc_dir / TEST_FILE, tmp_path / TEST_FILE)
    splits = mrpc.load_mrpc(tmp_path, download=False)
    assert "My own sentence." in {pair.sentence1 for pair in splits.train + splits.dev}


def test_missing_dev_ids_are_reported(tmp_path, write_msr, sample_rows):
    write_msr(tmp_path / TRAIN_FILE, sample_rows)
    write_msr(tmp_path / TEST_FILE, sample_rows)
    assert_one_line_error(lambda: mrpc.load_mrpc(tmp_path, download=False), TRAIN_FILE, "408", "dev id pairs")


# --- MRPC through the pair-data-set interface ---------------------------------------------------


def test_glue_split_as_pair_data(mrpc_dir):
    data = mrpc.load_mrpc(mrpc_dir, download=False)
    assert (data.name, data.kind, data.labels, data.id_columns) == ("mrpc", "mrpc", ["0", "1"], ("id1", "id2"))
    assert (data.num_classes, data.positive_label, data.positive_class, data.f1_average) == (2, "1", 1, "binary")
    assert (data.source, data.train_file) == (str(mrpc_dir), str(mrpc_dir / TRAIN_FILE))
    assert len(data.dev) == 408
    assert data.ids_by_column(data.test[:2]) == {
        "id1": [p.ids[0] for p in data.test[:2]],
        "id2": [p.ids[1] for p in data.test[:2]],
    }


def test_real_data_through_the_interface(real_mrpc_dir, monkeypatch):
    data = registry.load_pair_data(dataset="mrpc", mrpc_dir=str(real_mrpc_dir))
    splits = mrpc.load_mrpc(real_mrpc_dir, download=False)
    assert (len(data.train), len(data.dev), len(data.test)) == (3668, 408, 1725)
    assert data.label_counts("dev") == {"0": 129, "1": 279}
    assert data.label_counts("test") == {"0": 578, "1": 1147}
    assert (data.labels, data.id_columns, data.positive_label) == (["0", "1"], ("id1", "id2"), "1")
    assert data.content_hash == splits.content_hash
    assert data.content_hash == "704e94466deb0a1aa268875f81a5d0e472cd23cb4ff7fa38508cffca3b878df6"
    for name in SPLITS:
        assert data.split(name) == splits.split(name)
    assert not set(data.sentences("test")) - set(data.sentences())
    monkeypatch.setenv("MRPC_DIR", str(real_mrpc_dir))
    assert registry.load_pair_data().dev == data.dev
    assert registry.load_pair_data(positive_label="0").positive_class == 0
    assert registry.load_pair_data(name="msrp").name == "msrp"
