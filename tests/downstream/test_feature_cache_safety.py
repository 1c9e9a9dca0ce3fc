"""The feature cache on a hostile disk: full (a fake free-space function, a refused allocation, a
real tiny tmpfs where mounting is allowed), read-only, left-over temporaries of killed processes,
and bytes changed behind its back that stay finite. Each ends in one line naming
``--data.cache_dir`` or in a rebuild that says so; nothing half-written stays behind."""

import errno
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from downstream.data.features import FeatureStore
from harness.errors import UserError
from pretrain.encoders.protocol import Encoder
from pretrain.models.bilm import BiLM, BiLMConfig
from pretrain.tokenization.words import Tokenizer

SENTENCES = [
    "He said yes to the plan.",
    "Shares fell 3 percent on Monday after the report.",
    "Prices rose.",
    "The company said the deal would close next year, pending approval.",
    "Yes.",
]


def make_encoder() -> Encoder:
    torch.manual_seed(0)
    tokenizer = Tokenizer.build(SENTENCES)
    config = {"vocab_size": len(tokenizer), "hidden_size": 8, "num_layers": 2, "dropout": 0.0}
    model = BiLM(BiLMConfig(len(tokenizer), hidden_size=8, num_layers=2, dropout=0.0))
    return Encoder(model, tokenizer, family="elmo", config=config, fingerprint="abc", source="test")


def never_called(encoder: Encoder, monkeypatch) -> None:
    def fail(sentences):
        raise AssertionError("the encoder ran although the cache could not be written")

    monkeypatch.setattr(encoder, "embed_layers", fail)


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


def mounted_tmpfs(directory, options: str):
    """Mount a tmpfs at ``directory`` (root with CAP_SYS_ADMIN only); skip the test when not allowed."""
    directory.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or result.returncode})")
    return directory


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs: far too small for any cache below (skips where mounting is not allowed)."""
    directory = mounted_tmpfs(tmp_path / "full", "size=64k")
    yield directory
    subprocess.run(["umount", "-l", str(directory)], check=False)


def test_a_cache_larger_than_the_free_space_is_refused_before_the_encoder_runs(tmp_path, monkeypatch):
    encoder = make_encoder()
    never_called(encoder, monkeypatch)
    monkeypatch.setattr("harness.diskspace.free_bytes", lambda path: 1000)  # a disk with 1000 bytes free
    with pytest.raises(UserError) as raised:
        FeatureStore.build(encoder, SENTENCES, tmp_path / "cache", progress=False)
    message = one_line(raised)
    assert message.startswith(f"--data.cache_dir={tmp_path / 'cache'}: needs ") and "only 1000 B free" in message
    assert "--data.cache_dir=none" in message
    assert list((tmp_path / "cache").iterdir()) == []


def test_an_allocation_the_disk_refuses_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    encoder = make_encoder()
    never_called(encoder, monkeypatch)

    def full(descriptor, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(UserError) as raised:
        FeatureStore.build(encoder, SENTENCES, tmp_path / "cache", progress=False)
    assert "cannot write the feature cache (a file: no space left" in one_line(raised)
    assert list((tmp_path / "cache").iterdir()) == []  # no .<key>.tmp-<pid> folder


def test_a_real_full_tmpfs_fails_at_allocation_not_with_sigbus(tiny_tmpfs, monkeypatch):
    """The free-space check is bypassed so the write reaches the disk: the allocation must fail
    (ENOSPC) before the memory map is written through. Without it the process dies of SIGBUS."""
    monkeypatch.setattr("harness.diskspace.free_bytes", lambda path: 2**40)
    sentences = [f"sentence number {i} says something about the plan ." for i in range(400)]
    encoder = make_encoder()
    never_called(encoder, monkeypatch)
    with pytest.raises(UserError) as raised:
        FeatureStore.build(encoder, sentences, tiny_tmpfs, progress=False)
    assert "no space left" in one_line(raised)
    assert list(tiny_tmpfs.iterdir()) == []


def test_a_cache_dir_that_cannot_be_created_is_one_line(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    encoder = make_encoder()
    never_called(encoder, monkeypatch)
    with pytest.raises(UserError) as raised:
        FeatureStore.build(encoder, SENTENCES, blocker / "cache", progress=False)
    message = one_line(raised)
    assert message.startswith(f"--data.cache_dir={blocker / 'cache'}: cannot write the feature cache")


def test_a_read_only_cache_dir_is_one_line_and_a_valid_cache_there_still_loads(tmp_path):
    """A real read-only filesystem (root ignores chmod): writing is refused in one line; a cache
    that is already there is read without writing anything."""
    encoder = make_encoder()
    folder = tmp_path / "ro"
    written = FeatureStore.build(encoder, SENTENCES, folder, progress=False)
    mounted_tmpfs(tmp_path / "empty-ro", "ro,size=1m")
    try:
        with pytest.raises(UserError) as raised:
            FeatureStore.build(encoder, SENTENCES, tmp_path / "empty-ro" / "cache", progress=False)
        assert "read-only filesystem" in one_line(raised)
    finally:
        subprocess.run(["umount", "-l", str(tmp_path / "empty-ro")], check=False)
    result = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True)
    if result.returncode != 0:
        pytest.skip("cannot bind-mount read-only here")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        again = FeatureStore.build(encoder, SENTENCES, folder, progress=False)
        assert again.cache_hit and again.key == written.key
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_temporaries_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(finished.stdout)
    cache = tmp_path / "cache"
    for name in (f".abc.tmp-{dead}", f".abc.stale-{dead}", f".abc.tmp-{os.getppid()}", "keep-me"):
        (cache / name).mkdir(parents=True)
        (cache / name / "features.npy").write_bytes(b"\0" * 1000)
    FeatureStore.build(make_encoder(), SENTENCES, cache, progress=False)
    left = sorted(path.name for path in cache.iterdir() if len(path.name) != 64)
    assert left == sorted([f".abc.tmp-{os.getppid()}", "keep-me"])


def test_flipped_bytes_that_stay_finite_are_noticed_and_rebuilt(tmp_path, monkeypatch, capsys):
    """Same key, same shape, finite values: only the checksum can tell; without it the run would
    train on other features than its encoder's."""
    encoder = make_encoder()
    store = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    expected = [store.get(i) for i in range(len(SENTENCES))]
    del store
    features = np.lib.format.open_memmap(tmp_path / _only_key(tmp_path) / "features.npy", mode="r+")
    features[2:5] = np.float16(0.5)  # finite, plausible, wrong
    features.flush()
    del features
    calls = []
    original = encoder.embed_layers
    monkeypatch.setattr(encoder, "embed_layers", lambda sentences: calls.append(1) or original(sentences))
    rebuilt = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    assert calls and not rebuilt.cache_hit
    assert (
        "does not match the checksum in its meta.json (its bytes changed on disk): rebuilding it"
        in capsys.readouterr().err
    )
    for index, tensor in enumerate(expected):
        assert torch.equal(rebuilt.get(index), tensor)
    assert FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).cache_hit


def test_the_checksum_is_in_the_meta_and_a_cache_without_one_is_rebuilt(tmp_path, capsys):
    from downstream.data.features import checksum

    encoder = make_encoder()
    store = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    meta_path = tmp_path / store.key / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert meta["checksum"] == checksum(np.asarray(store.features)) and meta["checksum"].startswith("sha256:")
    del meta["checksum"]
    meta_path.write_text(json.dumps(meta))
    assert not FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).cache_hit
    assert "has no checksum in its meta.json (written by an older version): rebuilding it" in capsys.readouterr().err


def _only_key(folder) -> str:
    (key,) = [path.name for path in folder.iterdir() if not path.name.startswith(".")]
    return key
