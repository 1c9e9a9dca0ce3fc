"""ELMo's scalar mix of an encoder's layers: ``gamma * sum_k softmax(s)_k * h_k``.

Every mix goes through this one formula:

- learned (``trainable=True``): s (init 0) and gamma (init 1) are parameters (``scalar``);
- fixed equal weights: s = 0 and gamma = 1 are buffers, so the weights are 1/L each (``average``);
- one layer (``only_layer=K``): s is a fixed buffer with 0 at K and -inf elsewhere, so softmax(s)
  is exactly one-hot, and gamma = 1 is fixed (``layer:K``; ``top`` is layer L-1).

Shape legend: B batch, T tokens, D features per token (2H), L layers + 1 (layer 0 = token
embedding).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

# Added to the variance inside the square root, as in allennlp's masked layer norm.
LAYER_NORM_EPS = 1e-12


def masked_layer_norm(layer: Tensor, mask: Tensor) -> Tensor:
    """Normalise one layer per example over its real tokens and all their features.

    For each example b: mean and (biased) variance over the real positions of ``layer[b]``
    (all D features of every token with ``mask[b, t]``), then ``(x - mean) / sqrt(var + eps)``.
    allennlp's ScalarMix pools these statistics over the whole batch; we keep them per example
    so that a sentence's features never depend on the batch it is padded into. Padding
    positions never enter the statistics and are zero in the result; an all-pad example gives
    zeros.

    Args:
        layer: (B, T, D) features.
        mask: (B, T) bool, True at real tokens.

    Returns:
        (B, T, D) normalised features, zero at padding.
    """
    keep = mask.unsqueeze(-1)  # (B, T, 1)
    layer = layer.masked_fill(~keep, 0.0)  # garbage (even NaN) at padding is dropped here
    count = (mask.sum(dim=1) * layer.size(-1)).clamp(min=1).to(layer.dtype)  # (B,)
    count = count.view(-1, 1, 1)  # (B, 1, 1)
    mean = layer.sum(dim=(1, 2), keepdim=True) / count  # (B, 1, 1)
    centred = (layer - mean).masked_fill(~keep, 0.0)  # (B, T, D)
    variance = centred.pow(2).sum(dim=(1, 2), keepdim=True) / count  # (B, 1, 1)
    return centred / torch.sqrt(variance + LAYER_NORM_EPS)  # (B, T, D)


class ScalarMix(nn.Module):
    """``gamma * sum_k softmax(s)_k * h_k`` over the L layers of a frozen encoder.

    Args:
        num_layers: L, the number of layers the encoder returns (layers + 1).
        trainable: learn s and gamma; else the weights are fixed (equal, or one-hot with ``only_layer``).
        only_layer: take layer K alone (0 <= K < L); needs ``trainable=False``.
        layer_norm: normalise each layer first (``masked_layer_norm``), as ELMo optionally does.
    """

    def __init__(
        self, num_layers: int, trainable: bool = True, only_layer: int | None = None, layer_norm: bool = False
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if only_layer is not None and (trainable or not 0 <= only_layer < num_layers):
            raise ValueError(f"only_layer={only_layer}: needs trainable=False and 0 <= K < L = {num_layers}")
        self.num_layers = num_layers
        self.only_layer = only_layer
        self.layer_norm = layer_norm

        scalars = torch.zeros(num_layers)  # (L,)
        gamma = torch.ones(())
        if trainable:
            self.layer_scalars = nn.Parameter(scalars)
            self.gamma_scale = nn.Parameter(gamma)
        else:
            if only_layer is not None:
                scalars.fill_(float("-inf"))
                scalars[only_layer] = 0.0  # softmax -> exactly one-hot
            self.register_buffer("layer_scalars", scalars)
            self.register_buffer("gamma_scale", gamma)

    @property
    def trainable(self) -> bool:
        """Whether s and gamma are learned."""
        return isinstance(self.layer_scalars, nn.Parameter)

    @property
    def gamma(self) -> Tensor:
        """The scale gamma: a 0-dim tensor (a parameter for ``scalar``, else a fixed 1)."""
        return self.gamma_scale

    def weights(self) -> Tensor:
        """Returns: (L,) the layer weights softmax(s) as the forward pass uses them."""
        return torch.softmax(self.layer_scalars, dim=0)

    def forward(self, layers: Tensor, mask: Tensor, padding_is_zero: bool = False) -> Tensor:
        """Mix the encoder's layers into one feature per token.

        Args:
            layers: (L, B, T, D) per-layer features; values at padding are ignored.
            mask: (B, T) bool, True at real tokens.
            padding_is_zero: the caller guarantees zeros at padding (the feature store's batches
                do), so the NaN-safe fill of the whole (L, B, T, D) input — the largest cost of a
                cached-feature step after the head — is skipped. The output is the same.

        Returns:
            (B, T, D) mixed features, exactly zero at padding positions.
        """
        if layers.dim() != 4 or layers.size(0) != self.num_layers:
            raise ValueError(f"expected layers (L={self.num_layers}, B, T, D), got {tuple(layers.shape)}")
        if mask.shape != layers.shape[1:3]:
            raise ValueError(f"mask {tuple(mask.shape)} does not fit layers {tuple(layers.shape)}")
        mask = mask.bool()
        keep = mask.unsqueeze(0).unsqueeze(-1)  # (1, B, T, 1)
        if not padding_is_zero:
            layers = layers.masked_fill(~keep, 0.0)  # (L, B, T, D), padding zeroed (NaN-safe)
        if self.layer_norm:
            normalised = [masked_layer_norm(layer, mask) for layer in layers]  # L x (B, T, D)
            layers = torch.stack(normalised)  # (L, B, T, D)
        weights = self.weights().to(layers.dtype)  # (L,)
        with torch.autocast(layers.device.type, enabled=False):  # a weighted sum: autocast would copy the
            # whole (L, B, T, D) input to bf16 for a product of L terms per value
            mixed = self.gamma_scale * torch.tensordot(weights, layers, dims=1)  # (L,) · (L, B, T, D) → (B, T, D)
        return mixed * mask.unsqueeze(-1).to(mixed.dtype)  # (B, T, D), zero at padding

    def extra_repr(self) -> str:
        return (
            f"num_layers={self.num_layers}, trainable={self.trainable}, only_layer={self.only_layer}, "
            f"layer_norm={self.layer_norm}"
        )
