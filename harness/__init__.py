"""The shared base of every stage: user errors, MLflow tracking and the LightningCLI base, the
MRPC reader, length-bucketed batching and process tuning. ``pretrain``, ``downstream`` and
``benchmarks`` all build on it; it imports none of them."""
