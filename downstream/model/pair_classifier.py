"""The sentence-pair classifier as a plain ``nn.Module``: an encoder's layers → mix → pair head →
the task's outputs (one logit per class, or one number for a graded score), its loss
(``downstream.model.targets``: cross-entropy, or squared error on [0, 1]) and its optimiser's
parameter groups. ``LitPairClassifier`` wraps
it for training (metrics, schedule, logging, checkpoints); ``benchmarks.speed.finetune_throughput`` times
the very same module.

Three inputs, one per way of feeding the encoder (``input_kind``):

- ``FeaturePair``: a frozen encoder's cached per-layer features (``finetune=frozen``);
- ``TokenPair``: each sentence's token ids, run through the encoder here (``full``, ``gradual``);
- ``JointPair``: the pair as one sequence in both orders (``head=cls`` over an encoder whose
  ``pair_input`` is ``both-orders``: GPT's classifier, with its auxiliary LM loss weighted by
  ``lm_weight``); ``SegmentPair``: ``[CLS] s1 [SEP] s2 [SEP]`` with segment ids (``segments``:
  BERT's).

Settings are checked here and refused with a ``ValueError`` whose message starts with the
argument (``mix=layer:9: …``), so the CLI can name its flag.

Shape legend: B batch, T tokens, D features per token, L layers + 1, C outputs (``Task.output_size``).
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn

from downstream.model.heads import HEADS, build_head
from downstream.model.joint_classifiers import FirstTokenClassifier, JointClassifier
from downstream.model.scalar_mix import ScalarMix
from downstream.model.settings import JOINT_HEAD, Mix, parse_finetune, parse_head
from downstream.model.standardization import FeatureStandardizer
from downstream.model.targets import target_of
from harness.datasets.task import CLASSES, Task
from harness.training.schedules import discriminative_groups


class FeaturePair(NamedTuple):
    """Both sentences' per-layer features, zero at padding (the feature store's batches are)."""

    layers_a: Tensor  # (L, B, Ta, D)
    mask_a: Tensor  # (B, Ta) bool, True at real tokens
    layers_b: Tensor  # (L, B, Tb, D)
    mask_b: Tensor  # (B, Tb) bool


class TokenPair(NamedTuple):
    """Both sentences' token ids with their boundary tokens, right-padded."""

    ids_a: Tensor  # (B, Ta + 2)
    lengths_a: Tensor  # (B,)
    ids_b: Tensor  # (B, Tb + 2)
    lengths_b: Tensor  # (B,)


class JointPair(NamedTuple):
    """The joint sequences ``s1 → s2`` and ``s2 → s1`` (``downstream.data.pair_datamodule.joint_ids``)."""

    ids_ab: Tensor  # (B, T)
    lengths_ab: Tensor  # (B,)
    ids_ba: Tensor  # (B, T)
    lengths_ba: Tensor  # (B,)


class SegmentPair(NamedTuple):
    """The pair as one sequence with segment ids (``downstream.data.joint_segments``)."""

    ids: Tensor  # (B, T)
    lengths: Tensor  # (B,)
    segments: Tensor  # (B, T): 0 for the first sentence, 1 for the second
    lengths_again: Tensor  # (B,): the fourth slot of every pair batch


INPUTS = {"features": FeaturePair, "tokens": TokenPair, "joint": JointPair}
JOINT_INPUTS = {"both-orders": (JointPair, JointClassifier), "segments": (SegmentPair, FirstTokenClassifier)}


class PairOutput(NamedTuple):
    logits: Tensor  # (B, C): class logits, or (B, 1) a graded score on [0, 1]
    lm_loss: Tensor | None  # 0-dim mean NLL per token of the joint sequences (head=cls), else None


def scalar_mix(mix: Mix | str, num_layers: int, layer_norm: bool = False) -> ScalarMix:
    """The ``ScalarMix`` a :class:`Mix` stands for over L = ``num_layers`` layers.

    Raises:
        ValueError: ``mix=layer:K: …`` when the encoder has no layer K.
    """
    mix = Mix.parse(mix)
    return ScalarMix(num_layers, trainable=mix.trainable, only_layer=mix.layer_index(num_layers), layer_norm=layer_norm)


class PairClassifier(nn.Module):
    """Mix + head over ``encoder`` (frozen, or trained as a submodule when fine-tuned).

    Args:
        encoder: a ``pretrain.encoders.protocol.Encoder``.
        mix: ``average``, ``scalar``, ``top`` or ``layer:K`` (a :class:`Mix` or its text).
        head: a name of ``downstream.model.heads.HEADS``, or ``cls`` (the joint classifier).
        finetune: ``frozen`` (the encoder stays outside, inputs are its features), ``full`` or
            ``gradual`` (its model is a submodule, trained under the head).
        layer_norm: of the mix; hidden_size, dropout: of the head.
        standardize: z-score each frozen layer per dimension before the mix
            (``downstream.model.standardization``; its statistics are fitted at the start of the fit).
        num_classes: classes of a task of classes (unused for a graded task).
        lm_weight: λ of the auxiliary LM loss with ``head=cls``.
        task: what is predicted (``harness.datasets.task``): C = ``task.output_size(num_classes)``
            outputs and the target's loss (``downstream.model.targets``).
    """

    def __init__(
        self,
        encoder,
        mix: Mix | str = "scalar",
        head: str = "pool-mlp",
        finetune: str = "frozen",
        layer_norm: bool = False,
        hidden_size: int = 256,
        dropout: float = 0.2,
        num_classes: int = 2,
        lm_weight: float = 0.0,
        standardize: bool = False,
        task: Task = CLASSES,
    ):
        super().__init__()
        mix, head, finetune = Mix.parse(mix), parse_head(head), parse_finetune(finetune)
        if not task.graded and num_classes < 2:
            raise ValueError(f"num_classes={num_classes}: need at least 2 classes")
        self.pair_input = encoder.pair_input if head == JOINT_HEAD else None  # a capability, not a family name
        if head == JOINT_HEAD and (self.pair_input is None or finetune == "frozen"):
            raise ValueError(
                f"head={head}: the joint pair classifier needs an encoder that takes a joint pair "
                f"input and finetune=full or gradual (this is {encoder.family}, {finetune}); "
                f"other heads: {', '.join(HEADS)}"
            )
        if head == JOINT_HEAD and lm_weight and not hasattr(encoder.model, "next_token_nll"):
            raise ValueError(
                f"lm_weight={lm_weight}: this {encoder.family} encoder has no language-model head "
                f"for the auxiliary loss; use lm_weight=0"
            )
        if standardize and (finetune != "frozen" or head == JOINT_HEAD):
            raise ValueError(
                f"standardize=true: needs finetune=frozen and a head over a layer mix (this is "
                f"finetune={finetune}, head={head}): a fine-tuned encoder's features move as it "
                f"trains, away from statistics taken once"
            )
        self.encoder = encoder  # a plain attribute: frozen, it is neither trained nor checkpointed
        self.finetune, self.lm_weight, self.task = finetune, lm_weight, task
        outputs = task.output_size(num_classes)
        if finetune != "frozen":
            self.encoder_model = encoder.model.requires_grad_(True).train()  # a submodule: trained, checkpointed
        if head == JOINT_HEAD:
            self.mix = None
            self.head = JOINT_INPUTS[self.pair_input][1](encoder.dim, dropout=dropout, outputs=outputs)
        else:
            self.mix = scalar_mix(mix, encoder.num_layers, layer_norm=layer_norm)
            self.head = build_head(head, encoder.dim, hidden_size=hidden_size, dropout=dropout, outputs=outputs)
        self.standardizer = FeatureStandardizer(encoder.num_layers, encoder.dim) if standardize else None
        self.loss_function = target_of(task)  # no parameters: the state dict is the same for every task

    @property
    def input_kind(self) -> str:
        """What the data module feeds: ``features``, ``tokens`` or ``joint`` (a key of ``INPUTS``)."""
        if self.mix is None:
            return "joint"
        return "features" if self.finetune == "frozen" else "tokens"

    def inputs(self, *tensors: Tensor) -> FeaturePair | TokenPair | JointPair | SegmentPair:
        """A batch's four input tensors (the data module's order), named for this classifier."""
        if self.pair_input is not None:
            return JOINT_INPUTS[self.pair_input][0](*tensors)
        return INPUTS[self.input_kind](*tensors)

    def forward(
        self, inputs: FeaturePair | TokenPair | JointPair | SegmentPair, language_modelling: bool = True
    ) -> PairOutput:
        """Returns (B, C) outputs and, with ``head=cls``, the auxiliary LM loss (None for a model
        without a language-model head, or with ``language_modelling=False``: logits alone)."""
        joint = isinstance(inputs, (JointPair, SegmentPair))
        if joint != (self.mix is None):
            raise ValueError(f"a {type(inputs).__name__} does not fit this classifier (inputs: {self.input_kind})")
        if joint:
            logits, lm = self.head(self.encoder.model, *inputs, language_modelling=language_modelling)
            return PairOutput(logits, None if lm is None else lm["nll_forward"] / lm["count"].clamp(min=1))
        if isinstance(inputs, FeaturePair):
            layers_a, mask_a, layers_b, mask_b = inputs
        else:
            layers_a, mask_a = self.encoder.features(inputs.ids_a, inputs.lengths_a)  # (L, B, Ta, D), (B, Ta)
            layers_b, mask_b = self.encoder.features(inputs.ids_b, inputs.lengths_b)  # (L, B, Tb, D), (B, Tb)
        cached = isinstance(inputs, FeaturePair)  # the store's zeros at padding need no cleaning
        if self.standardizer is not None:
            layers_a, layers_b = (
                self.standardizer(layers_a, mask_a),
                self.standardizer(layers_b, mask_b),
            )  # zero at padding
        mixed_a = self.mix(layers_a, mask_a, padding_is_zero=cached)  # (B, Ta, D)
        mixed_b = self.mix(layers_b, mask_b, padding_is_zero=cached)  # (B, Tb, D)
        return PairOutput(self.head(mixed_a, mask_a, mixed_b, mask_b), None)

    def loss(self, output: PairOutput, labels: Tensor) -> Tensor:
        """The target's loss over the (B,) labels (class ids, or gold scores), plus λ · the LM loss
        when there is one."""
        loss = self.loss_function(output.logits, labels)
        if output.lm_loss is not None:
            loss = loss + self.lm_weight * output.lm_loss
        return loss

    def mix_parameters(self) -> list[nn.Parameter]:
        """The learned scalar mix's s and gamma ([] for a fixed mix or none)."""
        return [] if self.mix is None else [p for p in self.mix.parameters() if p.requires_grad]

    def head_parameters(self) -> list[nn.Parameter]:
        """The mix's and the head's trainable parameters (never the encoder's)."""
        return [p for name, p in self.named_parameters() if not name.startswith("encoder_model.") and p.requires_grad]

    def optimizer_groups(
        self, learning_rate: float, lr_decay: float, mix_learning_rate: float | None = None
    ) -> list[dict]:
        """AdamW groups, input → top: fine-tuned, each encoder group (``encoder-<k>``) at the rate of
        the one above it / ``lr_decay`` (ULMFiT's discriminative rates), the head (``head``) at
        ``learning_rate``; frozen, the head alone. A learned scalar mix's s and gamma form a group
        of their own (``mix``) at ``mix_learning_rate`` (None: the head's) without weight decay
        (decay would pull gamma to 0)."""
        encoder_groups = [] if self.finetune == "frozen" else self.encoder.parameter_groups()
        mix = self.mix_parameters()
        mixed = {id(p) for p in mix}
        head = [p for p in self.head_parameters() if id(p) not in mixed]
        groups = discriminative_groups([*encoder_groups, head], learning_rate, lr_decay)
        for index, group in enumerate(groups):
            group["name"] = "head" if index == len(groups) - 1 else f"encoder-{index}"
        if mix:
            rate = learning_rate if mix_learning_rate is None else mix_learning_rate
            groups.append({"params": mix, "lr": rate, "weight_decay": 0.0, "name": "mix"})
        return groups
