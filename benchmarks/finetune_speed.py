"""Downstream epoch cost with cached frozen features vs recomputing the encoder every epoch,
both measured in this process on the same batches.

``python -m benchmarks.finetune_speed [--encoder latest] [--batches 60] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from downstream.lit_pair import LitPairClassifier
from downstream.pairs import PairDataModule
from harness.runtime import retain_freed_memory


def timed_steps(model: LitPairClassifier, batches, features) -> float:
    """Seconds for training steps (forward, backward, AdamW) over ``batches``."""
    optimizer = model.configure_optimizers()
    model.train()
    start = time.perf_counter()
    for pair_indices in batches:
        layers_a, mask_a, layers_b, mask_b, labels = features(pair_indices)
        loss = model.loss(model(layers_a, mask_a, layers_b, mask_b), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", default="latest", help="runs:/<id>, a checkpoint path or latest")
    parser.add_argument("--batches", type=int, default=60, help="training batches timed per variant")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    retain_freed_memory()
    torch.manual_seed(0)
    model = LitPairClassifier(encoder=args.encoder, mix="scalar", head="pool-mlp")
    with tempfile.TemporaryDirectory() as cache:
        data = PairDataModule(cache_dir=cache)
        data.attach(model.encoder)
        start = time.perf_counter()
        data.setup()
        build_seconds = time.perf_counter() - start
        train = data.pairs["train"]
        # The training loader's own (length-bucketed, shuffled) batches, the same for both variants.
        batches = [batch[5].tolist() for _, batch in zip(range(args.batches), data.train_dataloader())]
        collate = data.collators["train"]

        def cached(pair_indices):  # reading the cache is part of the epoch
            return collate(pair_indices)[:5]

        def recomputed(pair_indices):
            layers_a, mask_a = model.encoder.embed_layers([train[i].sentence1 for i in pair_indices])
            layers_b, mask_b = model.encoder.embed_layers([train[i].sentence2 for i in pair_indices])
            return layers_a, mask_a, layers_b, mask_b, torch.tensor([train[i].label for i in pair_indices])

        timed_steps(model, batches[:3], cached)  # warm-up
        cached_seconds = timed_steps(model, batches, cached)
        recomputed_seconds = timed_steps(model, batches, recomputed)
    pairs = sum(len(batch) for batch in batches)
    result = {
        "encoder": model.encoder.source, "batch_size": data.hparams.batch_size, "timed_pairs": pairs,
        "cached_pairs_per_s": pairs / cached_seconds, "recomputed_pairs_per_s": pairs / recomputed_seconds,
        "speedup": recomputed_seconds / cached_seconds, "cache_build_seconds": build_seconds,
        "cache_sentences": len(data.sentences()),
        "epoch_seconds_cached": len(train) / (pairs / cached_seconds),
        "epoch_seconds_recomputed": len(train) / (pairs / recomputed_seconds),
    }
    print(f"downstream training, scalar mix + pool-mlp, {pairs} pairs timed per variant ({model.encoder.source})")
    print(f"  cached features     {result['cached_pairs_per_s']:8.0f} pairs/s   epoch ≈ {result['epoch_seconds_cached']:.1f} s")
    print(f"  recomputed encoder  {result['recomputed_pairs_per_s']:8.0f} pairs/s   epoch ≈ {result['epoch_seconds_recomputed']:.1f} s")
    print(f"  speed-up {result['speedup']:.1f}×; building the cache once took {build_seconds:.0f} s "
          f"for {result['cache_sentences']} sentences")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
