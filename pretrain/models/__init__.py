"""The language-model families, one torch-only ``nn.Module`` file each.

Every family's model keeps the same small surface, which the encoder protocol
(``pretrain.encoders.protocol``), the pretraining LightningModule and fine-tuning rely on:

- a class attribute ``objective`` (``pretrain.models.objectives``: what it predicts, and so which
  context each feature half may see);
- one constructor argument, its config dataclass (a ``pretrain.models.config.ModelConfig`` of
  plain JSON values: the checkpoint stores it and rebuilds the model from it alone), with
  ``vocab_size`` and ``num_layers`` (benchmarks read the pretrain run's ``model.num_layers``);
  padding id 0;
- ``num_layers`` (layers; features have L = num_layers + 1, layer 0 the token embedding) and
  ``feature_dim`` (D, the width of every feature layer);
- ``layer_outputs(token_ids, lengths) -> (L, B, T, D)``: per-layer features, zero at padding,
  differentiable (no ``no_grad`` inside: fine-tuning backpropagates through it);
- ``forward(token_ids, lengths) -> dict``: the language-model loss over real tokens only, as sums:
  ``nll_<term>`` per term of its objective and ``count`` (predictions per term), plus an
  optional ``regularization`` scalar the training loss adds (e.g. AWD-LSTM's AR/TAR);
- ``parameter_groups() -> list[list[nn.Parameter]]``: every parameter in exactly one group, from
  the input (embedding) to the top, for discriminative learning rates and gradual unfreezing;
- beside the class, ``forward_flops(model, token_ids, lengths)``: its useful forward matmul FLOPs.

Which family a model belongs to is the registry's to say (``pretrain.families``).

Batches are (B, T) token ids with *trailing* padding and (B,) lengths; a sentence is encoded
with its boundary tokens (``<S> … </S>`` or the subword tokenizer's ``<s> … </s>``).

Shape legend: B batch, T tokens, H hidden per direction, D feature width, L layers + 1.
"""
