"""The shared base of every stage: user errors, MLflow tracking and the LightningCLI base, the
MRPC reader, length-bucketed batching and process tuning. ``pretrain``, ``downstream`` and
``benchmarks`` all build on it; it imports none of them.

Importing it applies the harness's MLflow defaults (:mod:`harness.mlflow_defaults`: telemetry
off, bounded HTTP retries) before anything imports mlflow."""

from harness.mlflow_defaults import apply_defaults

apply_defaults()
