"""MLflow settings every harness process starts with, unless the user set them first.

- Telemetry off: MLflow 3 otherwise writes an installation id to ``~/.config/mlflow/telemetry.json``
  when it is imported and reports usage events. ``MLFLOW_DISABLE_TELEMETRY=false`` turns it back on.
- Bounded HTTP retries: MLflow's defaults (7 retries, backoff factor 2, 120 s timeout) keep a run
  silent for minutes when its tracking server goes away. With these, a request to a dead server
  fails in about ten seconds, one to a hung server in well under a minute. A user's own
  ``MLFLOW_HTTP_REQUEST_*`` values win.

- No artifact download bars: a bar per downloaded checkpoint is noise in a console or a log file.
  ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=true`` brings them back.

Importing this module applies them: every command's entry point (``python -m pretrain``,
``downstream``, ``benchmarks.suite``, …) imports it before anything imports mlflow, since the
telemetry client is set up by ``import mlflow`` itself. Benchmark workers get them from the
driver (``benchmarks.engine.ray_cluster.worker_environment``).
"""

from __future__ import annotations

import os

DEFAULTS = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",  # waits of about 0, 2 and 4 s between the tries
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}


def apply_defaults() -> None:
    """Set every variable of :data:`DEFAULTS` that the environment does not set already."""
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)


apply_defaults()
