"""The shared base of every stage: user errors, MLflow tracking and the LightningCLI base, the
MRPC reader, length-bucketed batching and process tuning. ``pretrain``, ``downstream`` and
``benchmarks`` all build on it; it imports none of them. Importing the package does nothing
else: a command's MLflow defaults come from :mod:`harness.tracking.mlflow_defaults`, imported by its entry point."""
