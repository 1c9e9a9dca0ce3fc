"""Sentence pairs for the classifier: the pair data set's train / dev / test (MRPC: GLUE train,
GLUE dev, MSR test; or any TSV, ``harness.datasets``), batched by length.

What a batch holds depends on how the encoder is used (``attach``):

- ``features`` (frozen encoder): per-layer features of both sentences from the feature store,
  computed once per sentence, so a training epoch costs no encoder pass;
- ``tokens`` (fine-tuned encoder): the token ids of both sentences, encoded once; the encoder
  runs inside the training step;
- ``joint`` (the joint pair classifier): each pair as one sequence, GPT's ``<s> s1 <delim> s2 <cls>``
  in both orders, or BERT's ``[CLS] s1 [SEP] s2 [SEP]`` with segment ids (``Encoder.pair_input``).
"""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

from downstream.data.equal_steps import DEFAULT_MAX_REPEATS, epoch_size, repeated_indices
from downstream.data.features import FeatureStore
from downstream.data.input_limits import DEFAULT_MAX_TOKENS, check_frozen_memory, longest_input
from downstream.data.joint_segments import SegmentBatches, segment_pair
from downstream.data.validation_schedule import DEFAULT_VALIDATIONS_PER_EPOCH
from harness.datasets.registry import dataset_params, load_pair_data
from harness.datasets.spec import PairDataSpec
from harness.datasets.task import CLASSES, Task
from harness.datasets.types import SPLITS, Pair, PairData
from harness.errors import UserError
from harness.tracking.runs import REPO_ROOT
from harness.training.batching import BucketBatchSampler, pad_batch
from pretrain.memory import available_bytes

GRADED_STRATA = 5  # a graded train split is subsampled stratified over its score quintiles


def strata(pairs: list[Pair], task: Task = CLASSES) -> list[int]:
    """What a subsample is stratified over: each pair's class, or for a graded task the quintile
    of its score among the split's (equal-frequency bins, ties by order), so that a fraction keeps
    the score distribution."""
    if not task.graded:
        return [pair.label for pair in pairs]
    ranks = np.argsort(np.argsort([float(pair.label) for pair in pairs], kind="stable"), kind="stable")
    return (ranks * GRADED_STRATA // max(len(pairs), 1)).tolist()


def subsample(pairs: list[Pair], fraction: float, seed: int, task: Task = CLASSES) -> list[Pair]:
    """A seeded ``fraction`` of ``pairs``, stratified over :func:`strata` (1.0: all of them, in order)."""
    if not 0.0 < fraction <= 1.0:
        raise UserError(f"--data.train_fraction={fraction}: must be in (0, 1]")
    if fraction == 1.0:
        return list(pairs)
    try:
        kept, _ = train_test_split(pairs, train_size=fraction, stratify=strata(pairs, task), random_state=seed)
    except ValueError:  # too few pairs left to hold both classes
        raise UserError(
            f"--data.train_fraction={fraction}: too small for {len(pairs)} training pairs "
            f"(a stratified sample needs at least one pair per class or score quintile); use a larger fraction"
        ) from None
    return kept


def task_params(data: PairData) -> dict:
    """What a run predicts: a task of classes' labels, their count and F1 kind (MRPC's params as they
    always were), or a graded task's target and score range, without the classes it has none of."""
    if data.task.graded:
        return {"task": data.task.target, "score_range": json.dumps(list(data.task.score_range))}
    return {
        "labels": json.dumps(data.labels),
        "num_classes": data.num_classes,
        "f1_average": data.f1_average,
        "positive_label": data.positive_label,
    }


INPUT_KINDS = ("features", "tokens", "joint")
DEFAULT_CACHE_DIR = str(REPO_ROOT / ".cache" / "features")  # --data.cache_dir


class PairBatches:
    """Collate pair indices into per-layer features of both sentences (``features``).

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


class TokenBatches:
    """Collate pair indices into the token ids of both sentences (``tokens``).

    Returns per batch: ``ids_a`` (B, Ta + 2), ``lengths_a`` (B,), ``ids_b`` (B, Tb + 2),
    ``lengths_b`` (B,), ``labels`` (B,), ``pair_index`` (B,) — boundaries included, as the
    encoder's ``features`` expects them.
    """

    def __init__(self, encoded: list[torch.Tensor], first: list[int], second: list[int], labels: list[int]):
        self.encoded, self.first, self.second, self.labels = encoded, first, second, labels

    def __call__(self, pair_indices: list[int]):
        ids_a, lengths_a = pad_batch([self.encoded[self.first[i]] for i in pair_indices])
        ids_b, lengths_b = pad_batch([self.encoded[self.second[i]] for i in pair_indices])
        labels = torch.tensor([self.labels[i] for i in pair_indices])
        return ids_a, lengths_a, ids_b, lengths_b, labels, torch.tensor(pair_indices)


class JointBatches:
    """Collate pair indices into GPT's joint sequences of both orders (``joint``).

    Returns per batch: ``ids_ab`` (B, T), ``lengths_ab`` (B,), ``ids_ba`` (B, T'), ``lengths_ba``
    (B,), ``labels`` (B,), ``pair_index`` (B,).
    """

    def __init__(self, forward: list[torch.Tensor], backward: list[torch.Tensor], labels: list[int]):
        self.forward, self.backward, self.labels = forward, backward, labels

    def __call__(self, pair_indices: list[int]):
        ids_ab, lengths_ab = pad_batch([self.forward[i] for i in pair_indices])
        ids_ba, lengths_ba = pad_batch([self.backward[i] for i in pair_indices])
        labels = torch.tensor([self.labels[i] for i in pair_indices])
        return ids_ab, lengths_ab, ids_ba, lengths_ba, labels, torch.tensor(pair_indices)


def joint_ids(encoder, first: str, second: str) -> torch.Tensor:
    """``<s> first <delim> second <cls>`` as ids; longer than the encoder's positions is a UserError."""
    ids = encoder.tokenizer.encode_pair(first, second)
    limit = encoder.model.max_positions
    if limit is not None and len(ids) > limit:
        raise UserError(
            f"a pair of {len(ids)} tokens is longer than this {encoder.family} encoder's max_positions "
            f"{limit}: {first[:40]!r} / {second[:40]!r}"
        )
    return torch.tensor(ids, dtype=torch.long)


class PairDataModule(pl.LightningDataModule):
    """The pair data set read and checked at construction; the encoder's inputs are made in
    :meth:`setup`, once the CLI has attached the resolved encoder.

    Args:
        batch_size: pairs per training batch.
        eval_batch_size: pairs per batch of the dev and test passes (no gradients; the logits of a
            pair do not depend on its batch, so this changes their speed only).
        train_fraction: a seeded subsample of train, stratified over the labels (learning curves).
        subsample_seed: seed of that subsample (default: the run's ``seed_everything``).
        equal_steps: with a ``train_fraction`` below 1, each training epoch repeats the subset up
            to the whole train split's size (``downstream.data.equal_steps``), so a fraction trains the
            full set's number of optimiser steps; the same for a pretrained cell and its twin.
        max_repeats: with ``equal_steps``, at most this many passes over the subset per epoch.
        validations_per_epoch: dev is scored this many times an epoch, evenly spaced in optimiser
            steps, at every fraction (``downstream.data.validation_schedule``); early stopping's
            patience counts these validations.
        max_pairs: cap every split at its first N pairs (smoke tests).
        cache_dir: on-disk feature cache (``none``: keep features in memory).
        max_tokens: the longest sentence (GPT's joint input: pair sequence) in tokens; a longer one
            is refused before the run, as are frozen features that would not fit in memory
            (``downstream.data.input_limits``). The encoder's position table may set a lower limit.
        **pair_data: the pair data set's flags (:class:`~harness.datasets.spec.PairDataSpec`):
            ``dataset``, ``mrpc_dir``, ``train``, ``dev``, ``test``, the column flags,
            ``has_header``, ``positive_label``, ``name``.
    """

    def __init__(
        self,
        batch_size: int = 32,
        eval_batch_size: int = 256,
        train_fraction: float = 1.0,
        subsample_seed: int | None = None,
        equal_steps: bool = False,
        max_repeats: int = DEFAULT_MAX_REPEATS,
        validations_per_epoch: int = DEFAULT_VALIDATIONS_PER_EPOCH,
        max_pairs: int | None = None,
        cache_dir: str = DEFAULT_CACHE_DIR,
        num_workers: int = 0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        **pair_data,
    ):
        super().__init__()
        if eval_batch_size < 1:
            raise UserError(f"--data.eval_batch_size={eval_batch_size}: must be at least 1")
        if max_repeats < 1:
            raise UserError(f"--data.max_repeats={max_repeats}: must be at least 1")
        if validations_per_epoch < 1:
            raise UserError(f"--data.validations_per_epoch={validations_per_epoch}: must be at least 1")
        self.save_hyperparameters(logger=False)
        self.pair_data = load_pair_data(PairDataSpec(**pair_data))
        self.pairs = {split: self.pair_data.split(split) for split in SPLITS}
        if max_pairs is not None:  # cap first, so that train_fraction still subsamples a capped run
            self.pairs = {name: pairs[:max_pairs] for name, pairs in self.pairs.items()}
        self.all_pairs = dict(self.pairs)  # before the subsample: the feature store's sentences
        seed = subsample_seed if subsample_seed is not None else torch.initial_seed() % 2**32
        self.pairs["train"] = subsample(self.pairs["train"], train_fraction, seed, self.pair_data.task)
        self.epoch_order = None  # with equal_steps: an epoch's positions into the train subset
        if equal_steps and len(self.pairs["train"]) < len(self.all_pairs["train"]):
            size = epoch_size(len(self.all_pairs["train"]), len(self.pairs["train"]), max_repeats)
            self.epoch_order = repeated_indices(len(self.pairs["train"]), size, seed)
        self.content_hash = self.pair_data.content_hash
        self.encoder = None
        self.input_kind = "features"
        self.store: FeatureStore | None = None
        self.collators = None

    @property
    def num_classes(self) -> int:
        """Labels of the data set (linked to ``--model.num_classes``)."""
        return self.pair_data.num_classes

    @property
    def target(self) -> str:
        """The task's target, ``classes`` or ``graded`` (linked to ``--model.target``)."""
        return self.pair_data.task.target

    @property
    def score_range(self) -> tuple[float, float] | None:
        """A graded task's (low, high), else None (linked to ``--model.score_range``)."""
        return self.pair_data.task.score_range

    @property
    def positive_class(self) -> int:
        """With 2 labels, the class id of the positive label (linked to ``--model.positive_class``)."""
        positive = self.pair_data.positive_class
        return 1 if positive is None else positive

    def attach(self, encoder, input_kind: str = "features") -> None:
        """Use ``encoder``: ``features`` caches its frozen outputs, ``tokens`` feeds it ids."""
        if input_kind not in INPUT_KINDS:
            raise ValueError(f"input_kind must be one of {INPUT_KINDS}, not {input_kind!r}")
        self.encoder, self.input_kind = encoder, input_kind

    def check_inputs(self, encoder, input_kind: str) -> None:
        """Refuse, before the run exists, a pair longer than ``max_tokens`` or the encoder's
        positions, and frozen features of the longest batch that would not fit in memory."""
        data = self.pair_data
        named = {
            (f"--data.{split}={getattr(self.hparams, split)}" if data.kind == "tsv" else f"{data.name} {split}"): pairs
            for split, pairs in self.pairs.items()
        }
        longest = longest_input(named, encoder, input_kind, self.hparams.max_tokens)
        if input_kind == "features":
            largest = max(self.hparams.batch_size, self.hparams.eval_batch_size)
            check_frozen_memory(encoder, largest, longest, self.hparams.max_tokens, available_bytes("cpu"))

    def sentences(self) -> list[str]:
        """Unique sentences of all splits, in first-seen order (the feature store's rows): of the
        whole train split, not only the ``train_fraction`` subsample, so that every fraction and
        subsample seed of one encoder and data set reads one feature cache, computed once."""
        return list(
            dict.fromkeys(s for name in SPLITS for p in self.all_pairs[name] for s in (p.sentence1, p.sentence2))
        )

    def setup(self, stage: str | None = None) -> None:
        if self.collators is not None:
            return
        if self.encoder is None:
            raise RuntimeError("attach an encoder before setup")
        sentences = self.sentences()
        row = {sentence: index for index, sentence in enumerate(sentences)}
        if self.input_kind == "joint" and self.encoder.pair_input == "segments":
            self.collators = {
                name: SegmentBatches(
                    [segment_pair(self.encoder, p.sentence1, p.sentence2) for p in pairs], [p.label for p in pairs]
                )
                for name, pairs in self.pairs.items()
            }
            return
        if self.input_kind == "joint":
            self.collators = {}
            for name, pairs in self.pairs.items():
                forward = [joint_ids(self.encoder, p.sentence1, p.sentence2) for p in pairs]
                backward = [joint_ids(self.encoder, p.sentence2, p.sentence1) for p in pairs]
                self.collators[name] = JointBatches(forward, backward, [p.label for p in pairs])
            return
        if self.input_kind == "features":
            cache = None if self.hparams.cache_dir in (None, "none") else Path(self.hparams.cache_dir)
            self.store = FeatureStore.build(self.encoder, sentences, cache)
            self.lengths = self.store.lengths
            make = partial(PairBatches, self.store)
        else:
            encoded = [self.encoder.encode_ids(sentence) for sentence in sentences]
            self.lengths = [len(ids) for ids in encoded]
            make = partial(TokenBatches, encoded)
        self.collators = {
            name: make([row[p.sentence1] for p in pairs], [row[p.sentence2] for p in pairs], [p.label for p in pairs])
            for name, pairs in self.pairs.items()
        }

    def train_rows(self) -> list[int]:
        """The feature store's rows of the training pairs' sentences (of the ``train_fraction``
        subset: what a run may take statistics from), each once."""
        collate = self.collators["train"]
        return sorted(set(collate.first) | set(collate.second))

    def loader(self, split: str, shuffle: bool = False) -> DataLoader:
        """Batches of pairs of similar length (the longer sentence of each pair), so that the
        mix and the head spend little on padding; shuffled pools for training."""
        collate = self.collators[split]
        if isinstance(collate, JointBatches):
            lengths = [len(ids) for ids in collate.forward]
        elif isinstance(collate, SegmentBatches):
            lengths = collate.lengths
        else:
            lengths = [max(self.lengths[a], self.lengths[b]) for a, b in zip(collate.first, collate.second)]
        indices = range(len(lengths))
        if split == "train" and shuffle and self.epoch_order is not None:  # equal_steps: the subset repeated
            indices, lengths = self.epoch_order, [lengths[i] for i in self.epoch_order]
        sampler = RandomSampler(range(len(indices))) if shuffle else SequentialSampler(range(len(indices)))
        size = self.hparams.batch_size if shuffle else self.hparams.eval_batch_size
        batches = BucketBatchSampler(
            sampler, size, drop_last=False, lengths=lengths, pool_batches=50 if shuffle else len(lengths)
        )
        return DataLoader(indices, batch_sampler=batches, collate_fn=collate, num_workers=self.hparams.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self.loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader("dev")

    def summary(self) -> dict:
        """Params of the run: pairs per split, label counts, the data set's name, labels, F1 kind, hash."""
        data = self.pair_data
        counts = {f"{name}_pairs": len(pairs) for name, pairs in self.pairs.items()}
        by_label = {}
        for name, pairs in self.pairs.items() if not data.task.graded else ():
            counted = Counter(pair.label for pair in pairs)
            by_label[f"{name}_label_counts"] = json.dumps({label: counted[k] for k, label in enumerate(data.labels)})
        positives = {}
        if data.positive_class is not None:
            positives = {
                f"{name}_positive": sum(p.label == data.positive_class for p in pairs)
                for name, pairs in self.pairs.items()
            }
        described = {**dataset_params(data), **task_params(data)}
        epoch = len(self.epoch_order) if self.epoch_order is not None else len(self.pairs["train"])
        return {
            **counts,
            "train_epoch_pairs": epoch,
            **positives,
            **by_label,
            **described,
            "feature_cache": self.store.key if self.store else None,
        }
