"""What names an encoder, parsed in one place: ``--model.encoder``, ``--model.random_like``,
``--model.init_from``, a benchmark's ``run:`` and a finetune checkpoint's record.

Forms (each prints back as itself, so a recorded reference is a valid flag value):

- ``runs:/<run_id>``: a pretrain run;
- ``models:/<name>@<alias>``, ``models:/<name>/<version>``, ``models:/<name>/latest``: a version
  in the MLflow model registry;
- ``latest``, ``latest:<family>``, ``latest:<family>:<general|task>``: the newest finished
  pretrain run (of that family and LM stage);
- ``hf:<folder>``, ``hf:<owner>/<name>``, ``reference:<name>``: a published model
  (``pretrain.encoders.hf.encoder``);
- anything else: a checkpoint file;
- ``random:<one of the above>[@<seed>]``: the random-init twin of that encoder (its family,
  architecture and tokenizer; untrained weights drawn from the seed). ``random`` alone is the twin
  of ``--model.random_like`` (default ``latest``); without ``@<seed>`` the run's seed is used.

``pretrain.encoders.loading.resolve`` turns ``latest`` and ``models:/`` into ``runs:/<id>``: what a run records.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from harness.errors import UserError
from pretrain.encoders.hf.encoder import SCHEMES as PUBLISHED_SCHEMES
from pretrain.families import FAMILIES, pretrained_families

RANDOM = "random"
LM_STAGES = ("general", "task")


class BadReference(UserError):
    """Text that names no encoder: ``str(error)`` is ``<text>: <reason>``, one line; a caller that
    took the text from a flag names the flag with ``reason`` alone."""

    def __init__(self, text: str, reason: str):
        super().__init__(f"{text}: {reason}")
        self.text, self.reason = text, reason


@dataclass(frozen=True)
class Source:
    """Where an encoder's architecture, tokenizer and trained weights come from.

    ``target``: the run id (``run``), ``<name>@<alias>`` or ``<name>/<version>`` (``model``),
    ``""`` or ``<family>[:<lm_stage>]`` (``latest``), the file (``path``), or the whole text of
    a published model (``published``: ``hf:…``, ``reference:…``).
    """

    kind: Literal["run", "model", "latest", "path", "published"]
    target: str

    @classmethod
    def parse(cls, text: str) -> Source:
        """Raises :class:`BadReference` for a form that names nothing (``runs:/``, ``models:/``,
        ``hf:``), a twin where a trained encoder belongs, or an unknown family or LM stage after ``latest:``."""
        text = str(text)
        if text.startswith("runs:/"):
            run_id = text[len("runs:/") :].strip("/").split("/")[0]
            if not run_id:
                raise BadReference(text, "name the run: runs:/<run_id> (`make ui` lists them)")
            return cls("run", run_id)
        if text.startswith("models:/"):
            name = text[len("models:/") :].strip("/")
            if not name:
                raise BadReference(
                    text, "name the model, e.g. models:/elmo-encoder@<alias> or models:/elmo-encoder/<version>"
                )
            return cls("model", name)
        if text.startswith(PUBLISHED_SCHEMES):
            if text in PUBLISHED_SCHEMES:
                raise BadReference(
                    text, "name the published model, e.g. hf:<folder>, hf:<owner>/<name> or reference:<name>"
                )
            return cls("published", text)
        if text == RANDOM or text.startswith(f"{RANDOM}:"):
            raise BadReference(
                text,
                "a random-init twin copies a trained encoder, not another twin; name that "
                "encoder, e.g. random:runs:/<run_id>",
            )
        if text == "latest" or text.startswith("latest:"):
            family, _, lm_stage = text.partition(":")[2].partition(":")
            if family and family not in pretrained_families():
                elsewhere = (
                    f" ({family} encoders are not pretrained here: name one as hf:<folder>)"
                    if family in FAMILIES
                    else ""
                )
                raise BadReference(
                    text, f"unknown family {family!r}; choose {', '.join(pretrained_families())}{elsewhere}"
                )
            if lm_stage and lm_stage not in LM_STAGES:
                raise BadReference(text, f"unknown LM stage {lm_stage!r}; choose {' or '.join(LM_STAGES)}")
            return cls("latest", text.partition(":")[2])
        return cls("path", text)

    @property
    def family(self) -> str | None:
        """``latest:<family>``'s family."""
        return self.target.partition(":")[0] or None if self.kind == "latest" else None

    @property
    def lm_stage(self) -> str | None:
        """``latest:<family>:<lm_stage>``'s LM stage."""
        return self.target.partition(":")[2] or None if self.kind == "latest" else None

    def __str__(self) -> str:
        if self.kind == "run":
            return f"runs:/{self.target}"
        if self.kind == "model":
            return f"models:/{self.target}"
        if self.kind == "latest":
            return f"latest:{self.target}" if self.target else "latest"
        return self.target  # a path, or a published model's hf:…/reference:…


@dataclass(frozen=True)
class EncoderReference:
    """An encoder: ``source``'s trained one, or (``random``) its random-init twin from ``seed``
    (None: not chosen yet; the CLI takes the run's seed)."""

    source: Source
    random: bool = False
    seed: int | None = None

    @classmethod
    def parse(cls, text: str, random_like: str | None = None) -> EncoderReference:
        """``--model.encoder`` (and, for ``random``, ``--model.random_like``) → the reference.

        Raises:
            BadReference: naming ``text``, or ``random_like`` when that is what names nothing.
        """
        text = str(text)
        if text == RANDOM:
            return cls(Source.parse(random_like or "latest"), random=True)
        if text.startswith(f"{RANDOM}:"):
            if random_like:
                raise BadReference(text, "names the encoder whose twin it is already; drop --model.random_like")
            body, seed = text[len(RANDOM) + 1 :], None
            head, _, tail = body.rpartition("@")
            if "@" in body and tail.isdigit():  # the last @<digits> is the seed (models:/<name>@<alias> may precede it)
                body, seed = head, int(tail)
            if not body:
                raise BadReference(text, "name the encoder to copy, e.g. random:runs:/<run_id>@0")
            try:
                return cls(Source.parse(body), random=True, seed=seed)
            except BadReference as error:  # named as written: random:<what it copies>
                raise BadReference(text, error.reason) from None
        return cls(Source.parse(text))

    def seeded(self, seed: int) -> EncoderReference:
        """The twin with ``seed`` unless it names one; a trained encoder as it is."""
        return replace(self, seed=seed) if self.random and self.seed is None else self

    def __str__(self) -> str:
        if not self.random:
            return str(self.source)
        return f"{RANDOM}:{self.source}" + ("" if self.seed is None else f"@{self.seed}")


def reference_of(encoder) -> EncoderReference:
    """The reference that rebuilds ``encoder`` (a ``pretrain.encoders.protocol.Encoder``): its run or file,
    or for the twin ``random:<what it copies>@<seed>``."""
    if encoder.is_random:
        return EncoderReference(Source.parse(encoder.copies), random=True, seed=encoder.random_seed)
    return EncoderReference(Source.parse(encoder.source))


def reference_of_record(record: dict) -> EncoderReference:
    """The reference of the encoder a finetune checkpoint recorded (``Encoder.record()``)."""
    if record.get("random_seed") is not None:
        return EncoderReference(Source.parse(record["copies"]), random=True, seed=int(record["random_seed"]))
    return EncoderReference(Source.parse(record["source"]))
