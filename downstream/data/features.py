"""Frozen per-layer features, computed once per sentence and cached (in memory or on disk).

A downstream epoch then reads features instead of running the encoder. Sentences are stored in
the order given (the caller de-duplicates); each holds (L, T_i, D) with T_i its word count.

On disk: ``<cache_dir>/<key>/features.npy`` (one flat (total_tokens, L, D) array, opened as a
read-only memmap) and ``meta.json`` (lengths, L, D, dtype, key, n_sentences, and the sha256 of the
array's bytes). A cache directory is written under a temporary name and renamed into place whole,
so a crash never leaves a half cache behind (the temporaries of processes that died are removed by
the next build); one that fails validation is treated as a miss and rebuilt. Every load checks
the array against its checksum: a damaged file of the right size and shape (flipped bytes, NaN)
is rebuilt once, with a line saying so; one that still does not match, or an encoder that produces
NaN/inf, stops the run with one line instead of training on it.

Processes on one machine that need the same features at once (benchmark cells, whatever runs
them) compute them once: the lookup and the write of a key happen under a lock per cache folder
and key (:func:`building`); the others wait, then load what the first wrote.

Before writing, the cache's size (known from the token counts) is checked against the free space
of its disk and allocated in full (``harness.diskspace``), so a full disk is one line naming
``--data.cache_dir``, never a SIGBUS from writing through the memory map.

Shapes: B batch, T tokens, H hidden per direction, D = 2H, L = layers + 1.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from harness.atomic import atomic_folder
from harness.diskspace import allocate, check_free, disk_problem
from harness.errors import UserError
from harness.training.worker_reuse import reusing

FORMAT_VERSION = 1
FEATURES_FILE = "features.npy"
META_FILE = "meta.json"
_NUMPY_DTYPES = {torch.float16: np.float16, torch.float32: np.float32}
_SLICE_ROWS = 8192  # tokens per slice when scanning or hashing a cache
_META_SLACK = 4096  # bytes of meta.json beyond its lengths, and of the .npy header
CACHE_FLAG = "--data.cache_dir"
CACHE_FIX = (
    f"free space there, point {CACHE_FLAG} at another disk, or set {CACHE_FLAG}=none to keep the features in memory"
)


def cache_key(fingerprint: str, sentences: list[str], dtype: torch.dtype) -> str:
    """The data hash: sha256 of the encoder weights' fingerprint, the sentence list, dtype and format."""
    sentences_hash = hashlib.sha256(json.dumps(sentences, ensure_ascii=False).encode("utf-8")).hexdigest()
    parts = [fingerprint, sentences_hash, str(dtype), f"format-{FORMAT_VERSION}"]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


class FeatureStore:
    """Per-layer features of a fixed list of unique sentences: (L, T_i, D) per sentence, stored as one flat
    float16 array of shape (total_tokens, L, D) plus offsets; in memory or as an on-disk memmap."""

    def __init__(self, features: np.ndarray, lengths: np.ndarray, key: str, cache_hit: bool):
        self.features = features  # (total_tokens, L, D); a read-only memmap when loaded from disk
        self.lengths = lengths.astype(np.int64)  # (n_sentences,) words per sentence
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)  # (n_sentences + 1,)
        self._key = key
        self._cache_hit = cache_hit

    @classmethod
    def build(
        cls,
        encoder,
        sentences: list[str],
        cache_dir: str | Path | None,
        batch_size: int = 64,
        dtype: torch.dtype = torch.float16,
        progress: bool = True,
    ) -> FeatureStore:
        """Features of ``sentences`` under ``encoder``, from ``cache_dir`` when a valid cache is there.

        The cache key is the data hash: sha256 of ``encoder.fingerprint``, the sha256 of the sentence
        list, ``dtype`` and the format version; any change to one of them is a different cache entry.
        ``cache_dir=None`` computes in memory and writes nothing.

        Returns:
            a :class:`FeatureStore`; ``get(i)`` is (L, T_i, D) float32 for ``sentences[i]``.
        """
        if dtype not in _NUMPY_DTYPES:
            raise ValueError(f"dtype must be one of {list(_NUMPY_DTYPES)}, not {dtype}")
        sentences = list(sentences)
        key = cache_key(encoder.fingerprint, sentences, dtype)
        shape = (encoder.num_layers, encoder.dim)
        lengths = _token_counts(encoder, sentences, key)
        if cache_dir is None:
            features = np.zeros((int(lengths.sum()), *shape), dtype=_NUMPY_DTYPES[dtype])  # (total, L, D)
            _compute_into(features, encoder, sentences, lengths, batch_size, progress)
            return cls(features, lengths, key, cache_hit=False)

        cache_dir = Path(cache_dir)
        with building(cache_dir, key):  # concurrent cells needing the same features compute them once
            return cls._load_or_write(encoder, sentences, cache_dir, key, lengths, shape, dtype, batch_size, progress)

    @classmethod
    def _load_or_write(
        cls,
        encoder,
        sentences: list[str],
        cache_dir: Path,
        key: str,
        lengths: np.ndarray,
        shape: tuple[int, int],
        dtype: torch.dtype,
        batch_size: int,
        progress: bool,
    ) -> FeatureStore:
        target = cache_dir / key
        loaded = _load(target, key, lengths, shape, dtype)
        if loaded is not None:
            problem = _checksum_problem(*loaded, target / FEATURES_FILE)
            if problem is None:
                return cls(loaded[0], lengths, key, cache_hit=True)
            print(f"feature cache {target} {problem}: rebuilding it", file=sys.stderr)
            del loaded  # close the map before the folder is replaced

        try:
            _write(cache_dir, key, encoder, sentences, lengths, shape, dtype, batch_size, progress)
        except OSError as error:
            problem = disk_problem(error) or f"{type(error).__name__}: {error}"
            raise UserError(
                f"{CACHE_FLAG}={cache_dir}: cannot write the feature cache ({problem}); {CACHE_FIX}"
            ) from None

        loaded = _load(target, key, lengths, shape, dtype)
        if loaded is None:
            raise RuntimeError(f"feature cache {target} failed validation right after it was written")
        if _checksum_problem(*loaded, target / FEATURES_FILE) is not None:
            raise UserError(
                f"feature cache {target} still does not match its checksum after a rebuild; delete "
                f"{cache_dir} and check the disk it is on"
            )
        return cls(loaded[0], lengths, key, cache_hit=False)

    @property
    def num_layers(self) -> int:
        """L = encoder layers + 1."""
        return int(self.features.shape[1])

    @property
    def dim(self) -> int:
        """D = 2H."""
        return int(self.features.shape[2])

    @property
    def cache_hit(self) -> bool:
        """Whether :meth:`build` found the features on disk (no encoder call)."""
        return self._cache_hit

    @property
    def key(self) -> str:
        return self._key

    def __len__(self) -> int:
        return len(self.lengths)

    def _rows(self, index: int) -> np.ndarray:
        if not 0 <= index < len(self):
            raise IndexError(f"sentence index {index} out of range for {len(self)} sentences")
        return self.features[self.offsets[index] : self.offsets[index + 1]]  # (T_i, L, D)

    def get(self, index: int) -> torch.Tensor:
        """Returns (L, T_i, D) float32, a copy (never a view of the cache)."""
        rows = np.array(self._rows(index), dtype=np.float32)  # (T_i, L, D)
        return torch.from_numpy(rows).permute(1, 0, 2).contiguous()  # (L, T_i, D)

    def batch(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns layers (L, B, T, D) float32, zero at padding (trailing), and mask (B, T) bool.

        T is the longest word count among ``indices`` (0 when all are empty).
        """
        rows = [self._rows(int(i)) for i in indices]  # (T_i, L, D) each; also checks the range
        lengths = [len(row) for row in rows]
        steps = max(lengths, default=0)
        mask = torch.arange(steps)[None, :] < torch.tensor(lengths, dtype=torch.long)[:, None]  # (B, T)
        layers = torch.empty(self.num_layers, len(rows), steps, self.dim)  # (L, B, T, D), written once:
        written = layers.numpy()  # the same memory; NumPy copies from the read-only cache without a tensor view of it
        for position, row in enumerate(rows):  # each sentence's stored (half) rows, converted as they are copied
            if len(row):
                written[:, position, : len(row)] = row.transpose(1, 0, 2)  # (L, T_i, D)
            written[:, position, len(row) :] = 0.0  # and its padding
        return layers, mask


def checksum(features: np.ndarray) -> str:
    """``sha256:<hex>`` of a (total, L, D) array's bytes, read in slices (it may be a large memmap)."""
    digest = hashlib.sha256()
    for start in range(0, len(features), _SLICE_ROWS):
        digest.update(np.ascontiguousarray(features[start : start + _SLICE_ROWS]))
    return f"sha256:{digest.hexdigest()}"


def _checksum_problem(features: np.ndarray, meta: dict, path: Path) -> str | None:
    """None when the array matches the checksum its meta.json recorded, else what is wrong, in words.
    A benchmark worker verifies each version of a file once (``harness.training.worker_reuse``)."""
    if "checksum" not in meta:
        return f"has no checksum in its {META_FILE} (written by an older version)"
    version = _file_version(path, meta["checksum"])
    if reusing() and version in _VERIFIED:
        return None
    if meta["checksum"] != checksum(features):
        return f"does not match the checksum in its {META_FILE} (its bytes changed on disk)"
    _VERIFIED.add(version)
    return None


_VERIFIED: set[tuple] = set()  # file versions whose checksum this process verified
_TOKEN_COUNTS: dict[str, np.ndarray] = {}  # cache key → token counts of its sentences (reuse only)


def _file_version(path: Path, recorded: str) -> tuple:
    """What changes when the file does: its inode, size, modification and change times (ns), and
    the checksum its meta records."""
    status = os.stat(path)
    return str(path), status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns, recorded


def _token_counts(encoder, sentences: list[str], key: str) -> np.ndarray:
    """(n_sentences,) tokens per sentence; the key covers the encoder's fingerprint (its tokenizer
    included) and the sentences, so a benchmark worker counts each list once."""
    if reusing() and key in _TOKEN_COUNTS:
        return _TOKEN_COUNTS[key]
    counts = np.array([len(encoder.tokenize(s)) for s in sentences], dtype=np.int64)
    if reusing():
        _TOKEN_COUNTS[key] = counts
    return counts


LOCK_FOLDER = Path(tempfile.gettempdir()) / "lm-transfer-bench-feature-locks"


@contextmanager
def building(cache_dir: Path, key: str):
    """An exclusive lock per (cache folder, key) among this machine's processes, held while a
    cache is looked up and, on a miss, written: a second cell that needs the same features waits
    for the first to write them, then loads them. Lock files live outside the cache (in the
    temporary folder), so a read-only or full cache folder is unaffected; without a lock file
    (an unwritable temporary folder) builds go on unlocked, still correct (atomic renames)."""
    name = hashlib.sha256(f"{Path(cache_dir).absolute()}\n{key}".encode()).hexdigest()[:32]
    try:
        LOCK_FOLDER.mkdir(mode=0o777, exist_ok=True)
        handle = open(LOCK_FOLDER / f"{name}.lock", "a+")  # held for the block
    except OSError:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"feature cache {Path(cache_dir) / key}: another process is computing these features; waiting for it",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write(
    cache_dir: Path,
    key: str,
    encoder,
    sentences: list[str],
    lengths: np.ndarray,
    shape: tuple[int, int],
    dtype: torch.dtype,
    batch_size: int,
    progress: bool,
) -> None:
    """Compute the features into ``<cache_dir>/.<key>.tmp-<pid>/`` and rename that folder to ``<key>``.

    Raises:
        UserError when the disk lacks the space; OSError when a write fails (read-only, full).
    """
    meta = {
        "key": key,
        "format_version": FORMAT_VERSION,
        "n_sentences": len(sentences),
        "num_layers": shape[0],
        "dim": shape[1],
        "dtype": str(dtype),
        "lengths": lengths.tolist(),
    }
    array_bytes = int(lengths.sum()) * shape[0] * shape[1] * np.dtype(_NUMPY_DTYPES[dtype]).itemsize
    cache_dir.mkdir(parents=True, exist_ok=True)
    remove_dead_temporaries(cache_dir)
    check_free(
        cache_dir,
        array_bytes + len(json.dumps(meta)) + _META_SLACK,
        f"{CACHE_FLAG}={cache_dir}",
        f"the feature cache of {len(sentences)} sentences does not fit; {CACHE_FIX}",
    )

    def write(temporary: Path) -> None:
        features = np.lib.format.open_memmap(
            temporary / FEATURES_FILE, mode="w+", dtype=_NUMPY_DTYPES[dtype], shape=(int(lengths.sum()), *shape)
        )  # (total, L, D)
        allocate(temporary / FEATURES_FILE)  # every block now, or ENOSPC now: never a SIGBUS mid-write
        _compute_into(features, encoder, sentences, lengths, batch_size, progress)
        features.flush()
        meta["checksum"] = checksum(features)
        del features  # close the writable map before the directory moves
        (temporary / META_FILE).write_text(json.dumps(meta), encoding="utf-8")

    atomic_folder(cache_dir / key, write)


def remove_dead_temporaries(cache_dir: Path) -> list[Path]:
    """Remove the ``.<key>.tmp-<pid>`` and ``.<key>.stale-<pid>`` folders of processes that no longer
    run (killed mid-write: SIGKILL, SIGBUS, power cut). Returns what was removed."""
    removed = []
    for path in cache_dir.glob(".*-*"):
        name, _, pid = path.name.rpartition("-")
        if not (name.endswith((".tmp", ".stale")) and pid.isdigit()) or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _compute_into(
    features: np.ndarray, encoder, sentences: list[str], lengths: np.ndarray, batch_size: int, progress: bool
) -> None:
    """Fill ``features`` (total, L, D) from the encoder, in batches of sentences of similar length.
    An encoder output with NaN or inf is a :class:`UserError` naming the encoder and the sentence."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    order = sorted(range(len(sentences)), key=lambda i: (int(lengths[i]), i))  # length-sorted: little padding
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    model = getattr(encoder, "model", None)
    if model is not None:
        model.eval()
    show = progress and sys.stderr.isatty()
    with torch.no_grad():
        for batch in tqdm(batches, desc="features", unit="batch", disable=not show):
            layers, mask = encoder.embed_layers([sentences[i] for i in batch])  # (L, B, T, D), (B, T)
            counts = mask.sum(dim=1).tolist()
            rows = layers.detach().to("cpu", torch.float32).permute(1, 2, 0, 3).numpy()  # (B, T, L, D)
            for row, index in enumerate(batch):
                if counts[row] != lengths[index]:
                    raise RuntimeError(
                        f"encoder gave {counts[row]} words for sentence {index}, its tokenizer {int(lengths[index])}"
                    )
                features[offsets[index] : offsets[index + 1]] = rows[row, : counts[row]]  # (T_i, L, D)
                if not np.isfinite(features[offsets[index] : offsets[index + 1]]).all():  # also float16 overflow
                    raise UserError(
                        f"encoder {getattr(encoder, 'source', '')} gives NaN/inf features for sentence "
                        f"{index} ({sentences[index][:60]!r}); its weights are unusable: check the "
                        f"pretrain run that made them"
                    )


def _load(
    target: Path, key: str, lengths: np.ndarray, shape: tuple[int, int], dtype: torch.dtype
) -> tuple[np.ndarray, dict] | None:
    """The cached (total, L, D) memmap, read-only, and its meta; None when missing, incomplete or inconsistent."""
    try:
        meta = json.loads((target / META_FILE).read_text(encoding="utf-8"))
        features = np.lib.format.open_memmap(target / FEATURES_FILE, mode="r")
    except (OSError, ValueError, EOFError):
        return None
    expected = (int(lengths.sum()), *shape)
    valid = (
        isinstance(meta, dict)
        and meta.get("key") == key
        and meta.get("format_version") == FORMAT_VERSION
        and meta.get("n_sentences") == len(lengths)
        and meta.get("lengths") == lengths.tolist()
        and meta.get("num_layers") == shape[0]
        and meta.get("dim") == shape[1]
        and meta.get("dtype") == str(dtype)
        and features.shape == expected
        and features.dtype == _NUMPY_DTYPES[dtype]
    )
    return (features, meta) if valid else None
