"""What a task asks of the engine, read from its own trainer settings (its config file, then its
``--trainer.*`` flags): a finetune cell one CPU (it runs single-threaded) and one GPU per device
when its trainer asks for GPUs; a pretraining stage ``devices × threads`` CPUs, or a GPU per
device and a CPU to feed each. ``accelerator: auto`` counts as CPU: ask for GPUs explicitly."""

from __future__ import annotations

from benchmarks.plan.trainer_settings import trainer_setting
from benchmarks.tasks.cells import FINETUNE_THREADS

GPU_ACCELERATORS = ("gpu", "cuda")


def device_count(config: str, args: list[str]) -> int:
    devices = trainer_setting(config, args, "devices", 1)
    if isinstance(devices, list):
        return len(devices)
    return devices if isinstance(devices, int) and devices > 0 else 1  # auto, -1: one here


def uses_gpu(config: str, args: list[str]) -> bool:
    return str(trainer_setting(config, args, "accelerator", "auto")).lower() in GPU_ACCELERATORS


def cell_resources(config: str, args: list[str]) -> dict:
    """``{"num_cpus": …, "num_gpus": …}`` of a finetune cell."""
    gpus = device_count(config, args) if uses_gpu(config, args) else 0
    return {"num_cpus": FINETUNE_THREADS, "num_gpus": gpus}


def stage_resources(config: str, args: list[str], threads: int) -> dict:
    """``{"num_cpus": …, "num_gpus": …}`` of a pretraining stage with ``threads`` CPU threads per device."""
    devices = device_count(config, args)
    if uses_gpu(config, args):
        return {"num_cpus": devices, "num_gpus": devices}
    return {"num_cpus": devices * threads, "num_gpus": 0}
