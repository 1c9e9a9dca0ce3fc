"""Transfer stage: frozen per-layer features, layer mix and pair heads on MRPC."""

import harness  # noqa: F401 - first: its MLflow defaults must precede the import of mlflow
