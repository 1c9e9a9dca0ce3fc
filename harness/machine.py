"""What a result's times were measured on: the CPU's model name and how many CPUs the process may
use, so a cost read from a results folder says which machine it holds for."""

from __future__ import annotations

import os
import platform
from pathlib import Path

CPU_INFO = Path("/proc/cpuinfo")


def cpu_model() -> str:
    """The CPU's model name (Linux: ``model name`` of /proc/cpuinfo; else what ``platform`` says)."""
    try:
        for line in CPU_INFO.read_text().splitlines():
            if line.startswith(("model name", "Model")) and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells, else the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
