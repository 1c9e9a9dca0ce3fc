"""The precision a run computes in: bf16-mixed by default where the hardware has native bf16,
float32 elsewhere, and whether an explicit bf16 request can be honoured, checked before any run
starts.

bf16 reaches the models only through Lightning's precision flag (``--trainer.precision=bf16-mixed``:
autocast runs the matmuls, LSTMs and attention in bfloat16 and keeps weights, optimiser state,
softmax and losses in float32). This module only decides whether the request makes sense on the
hardware the run will use, so that a config never silently falls back or crawls:

- CPU: bf16 counts as supported when the CPU has *native* bf16 arithmetic — x86 AVX512-BF16 or
  AMX-BF16 tiles, Arm's BF16 extension. Without it, oneDNN emulates bf16 matmuls with float32
  instructions plus conversions, which runs slower than plain float32: a request there is a
  mistake the user should hear about, not a setting to obey.
- CUDA: ``torch.cuda.is_bf16_supported(including_emulation=False)`` (Ampere and later).
- Other accelerators (MPS, XLA, …) are left to Lightning.

Float32 and float16 requests are not checked here. Without ``--trainer.precision``
(:func:`default_precision`) a run takes bf16-mixed on a CPU or GPU with native bf16 and 32-true
elsewhere, so one config runs at each machine's fast precision, and the run records which.

:func:`clip_gradients` lets gradient clipping run with the fused AdamW under bf16-mixed, which
Lightning's mixed-precision plugin refuses (see there).
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch
from pytorch_lightning.plugins.precision import MixedPrecision, Precision
from pytorch_lightning.utilities import GradClipAlgorithmType

from harness.errors import UserError

BF16_PRECISIONS = ("bf16", "bf16-mixed", "bf16-true")
BF16_DEFAULT = "bf16-mixed"
FLOAT32 = "32-true"
CPU_INFO = Path("/proc/cpuinfo")


def cpu_bf16_supported() -> bool:
    """Native bf16 arithmetic on this CPU: AVX512-BF16 or AMX tiles (x86), the BF16 extension (Arm)."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i386", "i686"):
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    if machine in ("aarch64", "arm64"):
        try:
            features = CPU_INFO.read_text()
        except OSError:  # macOS: Apple silicon from M2 on has BF16, but nothing here can tell which
            return False
        return any(line.startswith("Features") and "bf16" in line.split() for line in features.splitlines())
    return False


def cuda_bf16_supported() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


def device_type(accelerator) -> str:
    """The device a Trainer with ``accelerator`` (a name or an Accelerator) will train on:
    ``cpu``, ``cuda`` or another name; ``auto`` picks CUDA when it is there, as Lightning does."""
    name = str(
        accelerator
        if isinstance(accelerator, str) or accelerator is None
        else type(accelerator).__name__.removesuffix("Accelerator")
    ).lower()
    if name in ("auto", "none", ""):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if name == "gpu" else name


def bf16_supported(device: str) -> bool:
    """Whether ``device`` (``cpu`` or ``cuda``; others: True, Lightning decides) computes in bf16 natively."""
    if device == "cpu":
        return cpu_bf16_supported()
    if device == "cuda":
        return cuda_bf16_supported()
    return True


def default_precision(accelerator) -> str:
    """The precision of a run that names none: ``bf16-mixed`` on a CPU or CUDA device with native
    bf16 (:func:`bf16_supported`), ``32-true`` on any other hardware."""
    device = device_type(accelerator)
    return BF16_DEFAULT if device in ("cpu", "cuda") and bf16_supported(device) else FLOAT32


def check_precision(precision, accelerator) -> None:
    """Raise a one-line :class:`UserError` naming ``--trainer.precision`` when a bf16 precision is
    asked for on hardware without native bf16; anything else passes."""
    if str(precision) not in BF16_PRECISIONS:
        return
    device = device_type(accelerator)
    if bf16_supported(device):
        return
    hardware = (
        "this CPU has no native bf16 (AVX512-BF16, AMX or Arm BF16), so autocast would emulate it, slower than float32"
        if device == "cpu"
        else "this GPU has no native bf16 (needs Ampere or later)"
    )
    raise UserError(f"--trainer.precision={precision}: {hardware}; use --trainer.precision=32-true")


def clip_gradients(module, optimizer, gradient_clip_val, gradient_clip_algorithm) -> None:
    """``LightningModule.configure_gradient_clipping`` that also clips a fused optimizer under bf16-mixed.

    Lightning's mixed-precision plugin refuses to clip for a fused optimizer, because with fp16 a
    fused optimizer unscales the gradients itself, after clipping would have seen scaled ones.
    bf16 has no gradient scaler: its gradients are the true ones, so clipping them here is exact.
    Every other case takes Lightning's own path.
    """
    plugin = module.trainer.precision_plugin
    if isinstance(plugin, MixedPrecision) and plugin.scaler is None and gradient_clip_val:
        algorithm = GradClipAlgorithmType((gradient_clip_algorithm or "norm").lower())
        Precision.clip_gradients(plugin, optimizer, gradient_clip_val, algorithm)
    else:
        module.clip_gradients(
            optimizer, gradient_clip_val=gradient_clip_val, gradient_clip_algorithm=gradient_clip_algorithm
        )
