"""The exact softmax's output layer and loss in one autograd node (torch only).

``linear_cross_entropy(hidden, weight, bias, targets)`` equals
``cross_entropy(hidden @ weight.T + bias, targets, reduction="none")`` — the same loss and the same
gradients up to float rounding — at a higher share of the machine's matmul peak. With a large
vocabulary the (N, V) scores dominate a step: their matmuls are most of its FLOPs and their
log-softmax, gradient fill and scaling most of its memory traffic:

- The scores are made transposed, (V, N), in blocks of vocabulary rows small enough to stay in
  cache (~1.5 MB).
  Each block is turned into exp(score − block max) while still in cache; the per-block maxima and
  sums give the log-sum-exp over the whole vocabulary. The target's score is one row-wise dot.
- The backward scales each block to softmax × upstream gradient in place and feeds it, still in
  cache, to the weight-gradient product, the hidden-gradient product and the bias sum; the −1 at
  each target is added after, on (N, H) rows. Autograd instead makes a zero-filled (N, V)
  gradient, a third (N, V) array for the log-softmax backward, and reads both from memory.

Nothing (N, V)-sized is allocated beyond the one exp buffer the backward consumes, so the
backward runs once (a ``retain_graph`` double backward raises). Under autocast (bf16-mixed) the
node is not used: autograd's path casts as autocast dictates (:func:`fused_applies`).

Shapes: N predictions, H hidden, V vocabulary, K vocabulary blocks.
"""

from __future__ import annotations

import torch
from torch import Tensor

BLOCK_ELEMENTS = 384 * 1024  # scores per vocabulary block: 1.5 MB of float32, about one L2 cache


def block_rows(vocabulary: int, predictions: int) -> int:
    """Vocabulary rows per block: ``BLOCK_ELEMENTS`` scores, a multiple of 64 rows, at least 64."""
    rows = BLOCK_ELEMENTS // max(1, predictions) // 64 * 64
    return max(64, min(vocabulary, rows))


class LinearCrossEntropy(torch.autograd.Function):
    """Per-token NLL of ``targets`` under ``softmax(hidden @ weight.T + bias)``; see the module docstring."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor) -> Tensor:
        vocabulary, predictions = weight.shape[0], hidden.shape[0]
        rows = block_rows(vocabulary, predictions)
        exps = hidden.new_empty(vocabulary, predictions)  # (V, N): exp(score - its block's max)
        hidden_t = hidden.t()  # (H, N)
        maxima, sums = [], []
        for start in range(0, vocabulary, rows):
            stop = min(vocabulary, start + rows)
            block = exps[start:stop]  # (rows, N), a contiguous view
            if bias is None:
                torch.mm(weight[start:stop], hidden_t, out=block)
            else:
                torch.addmm(bias[start:stop].unsqueeze(1), weight[start:stop], hidden_t, out=block)
            block_max = block.amax(dim=0)  # (N,)
            block.sub_(block_max).exp_()
            maxima.append(block_max)
            sums.append(block.sum(dim=0))
        maxima, sums = torch.stack(maxima), torch.stack(sums)  # (K, N) each
        top = maxima.amax(dim=0)  # (N,)
        log_normaliser = top + torch.log((sums * torch.exp(maxima - top)).sum(dim=0))  # (N,)
        target_scores = (hidden * weight[targets]).sum(dim=1)  # (N,)
        if bias is not None:
            target_scores = target_scores + bias[targets]
        # exps is saved like the rest, so saved-tensor hooks (the memory estimate's probe) see it
        ctx.save_for_backward(hidden, weight, targets, maxima, log_normaliser, exps)
        ctx.rows, ctx.has_bias, ctx.consumed = rows, bias is not None, False
        return log_normaliser - target_scores

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_nll: Tensor):
        if ctx.consumed:
            raise RuntimeError("linear_cross_entropy's backward consumes its buffer: it cannot run twice")
        hidden, weight, targets, maxima, log_normaliser, exps = ctx.saved_tensors
        rows = ctx.rows
        ctx.consumed = True
        grad_nll = grad_nll.to(exps.dtype)
        scale = torch.exp(maxima - log_normaliser) * grad_nll  # (K, N): block exps → softmax × upstream
        needs_hidden, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.zeros_like(hidden) if needs_hidden else None  # (N, H)
        grad_weight = torch.empty_like(weight) if needs_weight else None  # (V, H)
        grad_bias = exps.new_empty(weight.shape[0]) if ctx.has_bias and needs_bias else None  # (V,)
        for index, start in enumerate(range(0, weight.shape[0], rows)):
            stop = min(weight.shape[0], start + rows)
            block = exps[start:stop].mul_(scale[index])  # (rows, N): d loss / d scores, but the targets' −1
            if grad_weight is not None:
                torch.mm(block, hidden, out=grad_weight[start:stop])
            if grad_hidden is not None:
                grad_hidden.addmm_(block.t(), weight[start:stop])
            if grad_bias is not None:
                torch.sum(block, dim=1, out=grad_bias[start:stop])
        upstream = grad_nll.unsqueeze(1)  # (N, 1)
        if grad_hidden is not None:  # the targets' −1, on (N, H) rows
            grad_hidden.sub_(weight[targets] * upstream)
        if grad_weight is not None:
            grad_weight.index_add_(0, targets, hidden * upstream, alpha=-1)
        if grad_bias is not None:
            grad_bias.index_add_(0, targets, grad_nll, alpha=-1)
        return grad_hidden, grad_weight, grad_bias, None


def fused_applies(hidden: Tensor) -> bool:
    """The fused node is float32 (or float64) only; under autocast autograd's path applies."""
    return hidden.dtype in (torch.float32, torch.float64) and not torch.is_autocast_enabled(hidden.device.type)


def linear_cross_entropy(hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor) -> Tensor:
    """(N, H) states, (V, H) weight, (V,) bias or None, (N,) targets → (N,) NLL per target.

    Returns:
        the values and gradients of ``cross_entropy(linear(hidden, weight, bias), targets,
        reduction="none")``, through the fused node when :func:`fused_applies`.
    """
    if hidden.shape[0] == 0 or not fused_applies(hidden):
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(hidden, weight, bias), targets,
                                                 reduction="none")
    return LinearCrossEntropy.apply(hidden, weight, bias, targets)
