"""MLflow system metrics (``system/cpu_utilization_percentage``, memory, disk, network; GPU where
``pynvml`` is installed) for runs that Lightning's ``MLFlowLogger`` creates.

``mlflow.enable_system_metrics_logging()`` only reaches runs started with ``mlflow.start_run``;
the logger creates its run through the client, so this callback runs MLflow's own
``SystemMetricsMonitor`` on the logger's run from fit start to fit end (rank 0).

On by default: a sample every 10 s costs a fraction of a millisecond of CPU in psutil plus one
``get_run`` request to the store, far below 0.1% of a run (docs/mlflow.md).
``MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=false`` turns it off; ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL``
changes the interval. A run shorter than one interval logs no sample.
"""

from __future__ import annotations

import logging
import os

import pytorch_lightning as pl

SWITCH = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"


def enabled() -> bool:
    return os.environ.get(SWITCH, "true").strip().lower() not in ("false", "0", "no", "off")


class SystemMetrics(pl.Callback):
    """Run MLflow's system-metrics monitor on the logger's run while fit runs."""

    def __init__(self):
        self.monitor = None

    def on_fit_start(self, trainer, pl_module):
        logger = trainer.logger
        if not enabled() or not trainer.is_global_zero or not hasattr(logger, "run_id"):
            return
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor  # needs psutil

        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # no start/stop lines
        self.monitor = SystemMetricsMonitor(logger.run_id, tracking_uri=logger._tracking_uri)
        self.monitor.start()

    def stop(self) -> None:
        if self.monitor is not None:
            self.monitor.finish()
            self.monitor = None

    def on_fit_end(self, trainer, pl_module):
        self.stop()

    def on_exception(self, trainer, pl_module, exception):
        self.stop()
