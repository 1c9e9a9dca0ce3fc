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
backward runs once (a ``retain_graph`` double backward raises). Under bf16 autocast (bf16-mixed)
the matmuls take bfloat16 inputs and each block's scores are rounded to bfloat16, as autocast's
``linear`` rounds them, while the exponentials, sums, loss and gradients stay float32, as
autocast's ``cross_entropy`` keeps them (:func:`matmul_dtype`); other autocast dtypes take
autograd's path.

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
    """Per-token NLL of ``targets`` under ``softmax(hidden @ weight.T + bias)``; see the module docstring.
    ``dtype``: the matmuls' input dtype (None: ``hidden``'s); the rest runs in float32 at least."""

    @staticmethod
    def forward(
        ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor, dtype: torch.dtype | None = None
    ) -> Tensor:
        dtype = dtype or hidden.dtype
        exact = torch.promote_types(dtype, torch.float32)  # exponentials, sums, loss and gradients
        hidden_in, weight_in = hidden.to(dtype), weight.to(dtype)  # the matmuls' inputs (no copy if same)
        bias_in = None if bias is None else bias.to(dtype)
        vocabulary, predictions = weight.shape[0], hidden.shape[0]
        rows = block_rows(vocabulary, predictions)
        exps = hidden.new_empty(vocabulary, predictions, dtype=exact)  # (V, N): exp(score - its block's max)
        hidden_t = hidden_in.t()  # (H, N)
        maxima, sums = [], []
        with torch.autocast(hidden.device.type, enabled=False):
            for start in range(0, vocabulary, rows):
                stop = min(vocabulary, start + rows)
                block = exps[start:stop]  # (rows, N), a contiguous view
                if dtype != exact:  # scores rounded to ``dtype``, as autocast's linear returns them
                    block.copy_(
                        torch.mm(weight_in[start:stop], hidden_t)
                        if bias is None
                        else torch.addmm(bias_in[start:stop].unsqueeze(1), weight_in[start:stop], hidden_t)
                    )
                elif bias is None:
                    torch.mm(weight_in[start:stop], hidden_t, out=block)
                else:
                    torch.addmm(bias[start:stop].unsqueeze(1), weight_in[start:stop], hidden_t, out=block)
                block_max = block.amax(dim=0)  # (N,)
                block.sub_(block_max).exp_()
                maxima.append(block_max)
                sums.append(block.sum(dim=0))
            maxima, sums = torch.stack(maxima), torch.stack(sums)  # (K, N) each
            top = maxima.amax(dim=0)  # (N,)
            log_normaliser = top + torch.log((sums * torch.exp(maxima - top)).sum(dim=0))  # (N,)
            target_scores = (hidden_in.to(exact) * weight_in[targets].to(exact)).sum(dim=1)  # (N,)
            if bias is not None:
                target_scores = target_scores + bias_in[targets].to(exact)
            target_scores = target_scores.to(dtype).to(exact)  # rounded as the blocks' scores are
        # exps is saved like the rest, so saved-tensor hooks (the memory estimate's probe) see it
        ctx.save_for_backward(hidden_in, weight_in, targets, maxima, log_normaliser, exps)
        ctx.rows, ctx.has_bias, ctx.consumed = rows, bias is not None, False
        ctx.dtypes = hidden.dtype, weight.dtype
        return log_normaliser - target_scores

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_nll: Tensor):
        if ctx.consumed:
            raise RuntimeError("linear_cross_entropy's backward consumes its buffer: it cannot run twice")
        hidden, weight, targets, maxima, log_normaliser, exps = ctx.saved_tensors  # hidden, weight: matmul dtype
        rows, exact = ctx.rows, exps.dtype
        ctx.consumed = True
        grad_nll = grad_nll.to(exact)
        scale = torch.exp(maxima - log_normaliser) * grad_nll  # (K, N): block exps → softmax × upstream
        needs_hidden, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        grad_hidden = hidden.new_zeros(hidden.shape, dtype=exact) if needs_hidden else None  # (N, H)
        grad_weight = weight.new_empty(weight.shape, dtype=exact) if needs_weight else None  # (V, H)
        grad_bias = exps.new_empty(weight.shape[0]) if ctx.has_bias and needs_bias else None  # (V,)
        if hidden.dtype == exact:
            for index, start in enumerate(range(0, weight.shape[0], rows)):
                stop = min(weight.shape[0], start + rows)
                block = exps[start:stop].mul_(scale[index])  # (rows, N): d loss / d scores, but the targets' −1
                if grad_weight is not None:
                    torch.mm(block, hidden, out=grad_weight[start:stop])
                if grad_hidden is not None:
                    grad_hidden.addmm_(block.t(), weight[start:stop])
                if grad_bias is not None:
                    torch.sum(block, dim=1, out=grad_bias[start:stop])
        else:  # each block rounded into the front of the exp buffer, then two whole-vocabulary matmuls
            scores = packed_scores(exps, scale, rows, hidden.dtype, grad_bias)  # (V, N) in the matmul dtype
            if grad_weight is not None:
                grad_weight.copy_(torch.mm(scores, hidden))  # (V, H)
            if grad_hidden is not None:
                grad_hidden.copy_(torch.mm(scores.t(), weight))  # (N, H)
        upstream = grad_nll.unsqueeze(1)  # (N, 1)
        if grad_hidden is not None:  # the targets' −1, on (N, H) rows
            grad_hidden.sub_(weight[targets].to(exact) * upstream)
        if grad_weight is not None:
            grad_weight.index_add_(0, targets, hidden.to(exact) * upstream, alpha=-1)
        if grad_bias is not None:
            grad_bias.index_add_(0, targets, grad_nll, alpha=-1)
        hidden_dtype, weight_dtype = ctx.dtypes
        grad_hidden = None if grad_hidden is None else grad_hidden.to(hidden_dtype)
        grad_weight = None if grad_weight is None else grad_weight.to(weight_dtype)
        return grad_hidden, grad_weight, grad_bias, None, None


def packed_scores(exps: Tensor, scale: Tensor, rows: int, dtype: torch.dtype, grad_bias: Tensor | None) -> Tensor:
    """The (V, N) float32 ``exps`` scaled block by block (``scale`` (K, N)) into d loss / d scores
    (but the targets' −1), their row sums written to ``grad_bias`` if given, each block rounded to
    the narrower ``dtype`` and stored at the front of ``exps``'s own memory: block k lands on bytes
    of blocks before it, already read, so no second (V, N) buffer is needed.

    Returns:
        (V, N) in ``dtype``, a view of ``exps``'s memory.
    """
    vocabulary, predictions = exps.shape
    packed = exps.view(-1).view(dtype)[: vocabulary * predictions].view(vocabulary, predictions)  # (V, N)
    for index, start in enumerate(range(0, vocabulary, rows)):
        stop = min(vocabulary, start + rows)
        block = exps[start:stop].mul_(scale[index])  # (rows, N)
        if grad_bias is not None:
            torch.sum(block, dim=1, out=grad_bias[start:stop])
        rounded = block.to(dtype)  # a copy: block 0's target overlaps its own source
        packed[start:stop].copy_(rounded)
    return packed


def matmul_dtype(hidden: Tensor) -> torch.dtype | None:
    """The dtype of the fused node's matmuls for ``hidden``, or None where autograd's path applies:
    float32 or float64 outside autocast, bfloat16 under bf16 autocast (other autocast dtypes, and
    other input dtypes, take autograd's path)."""
    device = hidden.device.type
    if torch.is_autocast_enabled(device):
        autocast = torch.get_autocast_dtype(device)
        return autocast if autocast == torch.bfloat16 and hidden.dtype in (torch.float32, torch.bfloat16) else None
    return hidden.dtype if hidden.dtype in (torch.float32, torch.float64) else None


def linear_cross_entropy(hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor) -> Tensor:
    """(N, H) states, (V, H) weight, (V,) bias or None, (N,) targets → (N,) NLL per target.

    Returns:
        the values and gradients of ``cross_entropy(linear(hidden, weight, bias), targets,
        reduction="none")`` (under autocast, as autocast computes them), through the fused node
        when :func:`matmul_dtype` has a dtype for it.
    """
    dtype = matmul_dtype(hidden)
    if hidden.shape[0] == 0 or dtype is None:
        return torch.nn.functional.cross_entropy(
            torch.nn.functional.linear(hidden, weight, bias), targets, reduction="none"
        )
    return LinearCrossEntropy.apply(hidden, weight, bias, targets, dtype)
