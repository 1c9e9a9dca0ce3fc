"""MRPC pairs for the frozen-feature classifier: GLUE train / GLUE dev / MSR test over a
per-layer feature store, so a training epoch costs no encoder pass."""

from __future__ import annotations

from pathlib import Path

import pytorch_lightning as pl
import torch
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

from downstream.features import FeatureStore
from harness.batching import BucketBatchSampler
from harness.errors import UserError
from harness.mrpc import Pair, load_mrpc
from harness.tracking import REPO_ROOT

SPLITS = ("train", "dev", "test")


def subsample(pairs: list[Pair], fraction: float, seed: int) -> list[Pair]:
    """A stratified, seeded ``fraction`` of ``pairs`` (1.0: all of them, in order)."""
    if not 0.0 < fraction <= 1.0:
        raise UserError(f"--data.train_fraction={fraction}: must be in (0, 1]")
    if fraction == 1.0:
        return list(pairs)
    labels = [pair.label for pair in pairs]
    try:
        kept, _ = train_test_split(pairs, train_size=fraction, stratify=labels, random_state=seed)
    except ValueError:  # too few pairs left to hold both classes
        raise UserError(f"--data.train_fraction={fraction}: too small for {len(pairs)} training pairs "
                        f"(a stratified sample needs at least one pair per class); use a larger fraction") from None
    return kept


class PairBatches:
    """Collate pair indices into per-layer features of both sentences.

    Returns per batch: ``layers_a`` (L, B, Ta, D), ``mask_a`` (B, Ta), ``layers_b`` (L, B, Tb, D),
    ``mask_b`` (B, Tb), ``labels`` (B,), ``pair_index`` (B,).
    """

    def __init__(self, store: FeatureStore, first: list[int], second: list[int], labels: list[int]):
        self.store, self.first, self.second, self.labels = store, first, second, labels

    def __call__(self, pair_indices: list[int]):
        layers_a, mask_a = self.store.batch([self.first[i] for i in pair_indices])
        layers_b, mask_b = self.store.batch([self.second[i] for i in pair_indices])
        labels = torch.tensor([self.labels[i] for i in pair_indices])
        return layers_a, mask_a, layers_b, mask_b, labels, torch.tensor(pair_indices)


class MRPCPairs(pl.LightningDataModule):
    """MRPC read and checked at construction; features computed in :meth:`setup`, once the
    encoder is attached (by the CLI, from ``--model.encoder``).

    Args:
        mrpc_dir: folder with the MSR release files (default: ``$MRPC_DIR`` or ``data/mrpc``).
        batch_size: pairs per batch.
        train_fraction: a stratified, seeded subsample of GLUE train (learning curves).
        subsample_seed: seed of that subsample (default: the run's ``seed_everything``).
        max_pairs: cap every split at its first N pairs (smoke tests).
        cache_dir: on-disk feature cache (``none``: keep features in memory).
    """

    def __init__(
        self,
        mrpc_dir: str | None = None,
        batch_size: int = 32,
        train_fraction: float = 1.0,
        subsample_seed: int | None = None,
        max_pairs: int | None = None,
        cache_dir: str = str(REPO_ROOT / ".cache" / "features"),
        num_workers: int = 0,
    ):
        super().__init__()
        self.save_hyperparameters(logger=False)
        splits = load_mrpc(mrpc_dir)
        self.pairs = {"train": splits.train, "dev": splits.dev, "test": splits.test}
        if max_pairs is not None:  # cap first, so that train_fraction still subsamples a capped run
            self.pairs = {name: pairs[:max_pairs] for name, pairs in self.pairs.items()}
        seed = subsample_seed if subsample_seed is not None else torch.initial_seed() % 2**32
        self.pairs["train"] = subsample(self.pairs["train"], train_fraction, seed)
        self.content_hash = splits.content_hash
        self.encoder = None
        self.store: FeatureStore | None = None

    def attach(self, encoder) -> None:
        self.encoder = encoder

    def sentences(self) -> list[str]:
        """Unique sentences of all splits, in first-seen order (the feature store's rows)."""
        return list(dict.fromkeys(s for name in SPLITS for p in self.pairs[name] for s in (p.sentence1, p.sentence2)))

    def setup(self, stage: str | None = None) -> None:
        if self.store is not None:
            return
        if self.encoder is None:
            raise RuntimeError("attach an encoder before setup")
        sentences = self.sentences()
        cache = None if self.hparams.cache_dir in (None, "none") else Path(self.hparams.cache_dir)
        self.store = FeatureStore.build(self.encoder, sentences, cache)
        row = {sentence: index for index, sentence in enumerate(sentences)}
        self.collators = {
            name: PairBatches(self.store, [row[p.sentence1] for p in pairs], [row[p.sentence2] for p in pairs],
                              [p.label for p in pairs])
            for name, pairs in self.pairs.items()
        }

    def loader(self, split: str, shuffle: bool = False) -> DataLoader:
        """Batches of pairs of similar length (the longer sentence of each pair), so that the
        mix and the head spend little on padding; shuffled pools for training."""
        collate = self.collators[split]
        lengths = [max(self.store.lengths[a], self.store.lengths[b]) for a, b in zip(collate.first, collate.second)]
        indices = range(len(lengths))
        sampler = RandomSampler(indices) if shuffle else SequentialSampler(indices)
        batches = BucketBatchSampler(sampler, self.hparams.batch_size, drop_last=False, lengths=lengths,
                                     pool_batches=50 if shuffle else len(lengths))
        return DataLoader(indices, batch_sampler=batches, collate_fn=collate, num_workers=self.hparams.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self.loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader("dev")

    def summary(self) -> dict:
        counts = {f"{name}_pairs": len(pairs) for name, pairs in self.pairs.items()}
        positives = {f"{name}_positive": sum(p.label for p in pairs) for name, pairs in self.pairs.items()}
        return {**counts, **positives, "mrpc_hash": self.content_hash,
                "feature_cache": self.store.key if self.store else None}
