"""``python -m pretrain export --encoder runs:/<id> --out <folder>``: a gpt-family encoder as a
folder ``transformers`` loads as ``OpenAIGPTLMHeadModel`` (GPT-1's architecture, which the family
follows), with its byte-level BPE tokenizer.

The mapping is exact: post-LN blocks with learned positions, the tanh GELU (``afn="gelu"``),
LayerNorm ε 1e-5, 1/√(head size) attention scaling, the softmax tied to the token embedding;
GPT-1's ``Conv1D`` weights are the transpose of ``nn.Linear``'s. GPT-1 fixes the MLP width at
4 × hidden, so a model built with another ``ffn_size`` is refused. Before the folder is moved into
place, ``transformers`` loads it back and its hidden states and LM logits must equal ours (max
difference ≤ 1e-5), so an export that does not reproduce the run is never written.

The tokenizer's post-processor adds ``<s> … </s>`` around a sentence and makes a pair GPT's
``<s> s1 <delim> s2 <cls>``, so ``hf:<folder>`` gives the features of ``runs:/<id>``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from harness.atomic import atomic_folder
from harness.errors import UserError
from pretrain.tokenization.bpe import BOS, CLS, DELIM, EOS, PAD

EXPORTED_FAMILY = "gpt"
TOLERANCE = 1e-5
PROBE = ["the market rose sharply after the report .", "he said so ."]


def openai_gpt_config(config: dict, tokenizer):
    """Our TransformerLM config → ``OpenAIGPTConfig``."""
    from transformers import OpenAIGPTConfig

    hidden = config["hidden_size"]
    if (config.get("ffn_size") or 4 * hidden) != 4 * hidden:
        raise UserError(
            f"ffn_size {config['ffn_size']} ≠ 4 × hidden_size {hidden}: GPT-1's architecture fixes the "
            f"MLP width at 4 × hidden, so this model has no OpenAIGPTLMHeadModel equivalent"
        )
    vocab = tokenizer._tokenizer.get_vocab(with_added_tokens=True)  # the library object itself
    return OpenAIGPTConfig(
        vocab_size=config["vocab_size"],
        n_positions=config["max_positions"],
        n_embd=hidden,
        n_layer=config["num_layers"],
        n_head=config["num_heads"],
        afn="gelu",
        resid_pdrop=config.get("dropout", 0.1),
        embd_pdrop=config.get("dropout", 0.1),
        attn_pdrop=config.get("attention_dropout", 0.1),
        layer_norm_epsilon=1e-5,
        bos_token_id=vocab[BOS],
        eos_token_id=vocab[EOS],
        pad_token_id=vocab[PAD],
        architectures=["OpenAIGPTLMHeadModel"],
    )


def openai_gpt_state(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """Our weights under ``OpenAIGPTLMHeadModel``'s names; Conv1D weights transposed."""
    mapped = {
        "transformer.tokens_embed.weight": state["token_embedding.weight"],
        "transformer.positions_embed.weight": state["position_embedding.weight"],
        "lm_head.weight": state["token_embedding.weight"],
    }  # tied, as ours
    linear = {
        "attn.c_attn": "attention.query_key_value",
        "attn.c_proj": "attention.output",
        "mlp.c_fc": "mlp.0",
        "mlp.c_proj": "mlp.2",
    }
    norms = {"ln_1": "attention_norm", "ln_2": "mlp_norm"}
    for layer in range(num_layers):
        ours, theirs = f"blocks.{layer}.", f"transformer.h.{layer}."
        for their_name, our_name in linear.items():
            mapped[f"{theirs}{their_name}.weight"] = state[f"{ours}{our_name}.weight"].t().contiguous()  # (in, out)
            mapped[f"{theirs}{their_name}.bias"] = state[f"{ours}{our_name}.bias"]
        for their_name, our_name in norms.items():
            mapped[f"{theirs}{their_name}.weight"] = state[f"{ours}{our_name}.weight"]
            mapped[f"{theirs}{their_name}.bias"] = state[f"{ours}{our_name}.bias"]
    return mapped


def transformers_tokenizer(tokenizer, max_positions: int):
    """Our BPE tokenizer as a ``transformers`` fast tokenizer whose post-processor adds our boundaries."""
    from tokenizers import Tokenizer, processors
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_str(tokenizer._tokenizer.to_str())  # a copy of the library object
    ids = {token: backend.token_to_id(token) for token in (BOS, EOS, DELIM, CLS)}
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}", pair=f"{BOS} $A {DELIM} $B:1 {CLS}:1", special_tokens=list(ids.items())
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        extra_special_tokens={"delim_token": DELIM, "cls_token": CLS},
        model_max_length=max_positions,
        model_input_names=["input_ids", "attention_mask"],
        split_special_tokens=True,
    )  # "<cls>" in a sentence is text, as ours


def ours_and_theirs(encoder, model) -> float:
    """Max |difference| of every layer's states and of the LM logits on :data:`PROBE`."""
    token_ids, lengths = encoder.encode(PROBE)
    mask = torch.arange(token_ids.shape[1])[None, :] < lengths[:, None]  # (B, T)
    with torch.no_grad():
        ours = encoder.model.layer_outputs(token_ids, lengths)  # (L, B, T, D), zero at padding
        our_logits = encoder.model.logits(ours[-1][mask])  # (N, V)
        output = model(input_ids=token_ids, attention_mask=mask.long(), output_hidden_states=True)
    theirs = torch.stack(output.hidden_states) * mask[None, :, :, None]  # (L, B, T, D)
    return max(float((ours - theirs).abs().max()), float((our_logits - output.logits[mask]).abs().max()))


def export(source: str, out: Path) -> float:
    """Write ``source`` (a gpt-family encoder) as an ``OpenAIGPTLMHeadModel`` folder at ``out``.

    Returns:
        the max difference of hidden states and logits, ours against the reloaded folder's.
    """
    from transformers import OpenAIGPTLMHeadModel
    from transformers.utils import logging

    from pretrain.encoders.loading import load_encoder

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out={out}: exists and is not an empty folder; choose a new one")
    encoder = load_encoder(source)
    if encoder.family != EXPORTED_FAMILY:
        raise UserError(
            f"--encoder={source}: a {encoder.family} encoder; only gpt-family encoders export (as "
            f"OpenAIGPTLMHeadModel): there is no standard transformers class for {encoder.family}"
        )
    try:
        config = openai_gpt_config(encoder.config, encoder.tokenizer)
    except UserError as error:
        raise UserError(f"--encoder={source}: {error}") from None
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    model = OpenAIGPTLMHeadModel(config)
    model.load_state_dict(openai_gpt_state(encoder.model.state_dict(), encoder.config["num_layers"]), strict=True)
    model.tie_weights()
    difference = None

    def write(temporary: Path) -> None:
        nonlocal difference
        model.save_pretrained(temporary)
        transformers_tokenizer(encoder.tokenizer, encoder.config["max_positions"]).save_pretrained(temporary)
        (temporary / "lm_transfer_bench.json").write_text(
            json.dumps(
                {
                    "exported_from": encoder.source,
                    "run_id": encoder.run_id,
                    "fingerprint": encoder.fingerprint,
                    "family": encoder.family,
                    "model_config": encoder.config,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        reloaded = OpenAIGPTLMHeadModel.from_pretrained(
            temporary, use_safetensors=True, trust_remote_code=False, local_files_only=True
        ).eval()
        difference = ours_and_theirs(encoder, reloaded)
        if not difference <= TOLERANCE:
            raise RuntimeError(f"the exported model differs from {source} by {difference:.2e} (> {TOLERANCE:g})")

    atomic_folder(out, write)
    return difference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretrain export", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--encoder",
        required=True,
        help="a gpt-family encoder: runs:/<id>, models:/<name>@<alias>, latest:gpt or a .ckpt path",
    )
    parser.add_argument("--out", required=True, type=Path, help="the folder to write (new or empty)")
    args = parser.parse_args(argv)
    try:
        difference = export(args.encoder, args.out)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        "\n".join(
            [
                "",
                "── export finished " + "─" * 52,
                f"  encoder    {args.encoder}",
                f"  folder     {args.out.resolve()}  (OpenAIGPTLMHeadModel + tokenizer, safetensors)",
                f"  checked    hidden states and LM logits reloaded by transformers: max |Δ| {difference:.1e}",
                "  load it    transformers.AutoModelForCausalLM.from_pretrained(folder),"
                " AutoTokenizer.from_pretrained(folder)",
                f'  use it     make finetune ARGS="--model.encoder=hf:{args.out}"',
            ]
        )
    )
    return 0
