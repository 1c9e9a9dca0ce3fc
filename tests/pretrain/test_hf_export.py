"""``python -m pretrain export``: a trained tiny gpt-family encoder written as an
``OpenAIGPTLMHeadModel`` folder; transformers' hidden states and LM logits equal ours, and
``hf:<folder>`` gives the features (and GPT's joint pair input) of the checkpoint it came from."""

import subprocess
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from harness.errors import UserError
from harness.training.batching import pad_batch
from pretrain import load_encoder
from pretrain.corpus.datamodule import encode_sentences
from pretrain.encoders.checkpoints import slim_checkpoint
from pretrain.encoders.export import export
from pretrain.lit_gpt import LitGPT
from pretrain.tokenization.bpe import SubwordTokenizer
from tests import preloaded

REPO = Path(__file__).resolve().parents[2]
TRAIN = [
    "the cat sat on the mat .",
    "a dog barked at the cat , loudly .",
    "shares fell 3 percent on monday .",
    "the market rose sharply after the report .",
    "he said so .",
    "she agreed to the plan at once .",
]
SENTENCES = ["The market rose, he said.", "A dog sat on <cls> the mat!", "So."]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A tiny GPT trained a few steps (so no weight is at its initial value), as a slim checkpoint."""
    directory = tmp_path_factory.mktemp("gpt-export")
    pl.seed_everything(0, verbose=False)
    tokenizer = SubwordTokenizer.build(TRAIN * 3, vocab_size=300, min_frequency=1)
    lit = LitGPT(
        vocab_size=len(tokenizer),
        num_layers=2,
        hidden_size=16,
        num_heads=2,
        max_positions=40,
        learning_rate=0.01,
        dropout=0.1,
    )
    lit.tokenizer = tokenizer
    loader = DataLoader(encode_sentences(tokenizer, TRAIN), batch_size=3, collate_fn=pad_batch)
    trainer = pl.Trainer(
        max_steps=6,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        default_root_dir=directory,
    )
    trainer.fit(lit, loader)
    state = {"state_dict": lit.state_dict(), "epoch": 0, "global_step": 6}
    lit.on_save_checkpoint(state)
    path = directory / "gpt.ckpt"
    torch.save(slim_checkpoint(state), path)
    return path


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("exported") / "gpt-hf"
    assert export(str(trained), folder) <= 1e-5
    return folder


def test_transformers_loads_it_as_gpt1_with_our_states_and_logits(trained, exported):
    from transformers import AutoModelForCausalLM, AutoTokenizer, OpenAIGPTLMHeadModel

    ours = load_encoder(trained)
    model = AutoModelForCausalLM.from_pretrained(exported).eval()
    tokenizer = AutoTokenizer.from_pretrained(exported)
    assert isinstance(model, OpenAIGPTLMHeadModel) and model.config.afn == "gelu"
    assert model.lm_head.weight.data_ptr() == model.transformer.tokens_embed.weight.data_ptr()  # tied, as ours
    for sentence in SENTENCES:
        ids = torch.tensor([ours.tokenizer.encode(sentence)])
        assert tokenizer(sentence)["input_ids"] == ids[0].tolist()  # <s> … </s>; "<cls>" in text stays text
        with torch.no_grad():
            output = model(input_ids=ids, output_hidden_states=True)
            our_states = ours.model.layer_outputs(ids, torch.tensor([ids.shape[1]]))  # (L, 1, T, D)
            our_logits = ours.model.logits(our_states[-1, 0])  # (T, V)
        torch.testing.assert_close(torch.stack(output.hidden_states), our_states, rtol=0, atol=1e-5)
        torch.testing.assert_close(output.logits[0], our_logits, rtol=0, atol=1e-5)
        assert float((our_states[1:] - our_states[:1]).abs().max()) > 0  # trained, not trivial
    first, second = SENTENCES[:2]
    assert tokenizer(first, second)["input_ids"] == ours.tokenizer.encode_pair(first, second)  # GPT's joint input


def test_hf_folder_gives_the_features_of_the_checkpoint(trained, exported):
    ours, theirs = load_encoder(trained), load_encoder(f"hf:{exported}")
    assert theirs.family == "hf" and theirs.directions == ("forward",) and theirs.pair_input == "both-orders"
    assert [theirs.tokenize(s) for s in SENTENCES] == [ours.tokenize(s) for s in SENTENCES]
    assert theirs.max_tokens() == ours.max_tokens()
    layers, mask = ours.embed_layers(SENTENCES)
    hf_layers, hf_mask = theirs.embed_layers(SENTENCES)
    assert torch.equal(mask, hf_mask)
    torch.testing.assert_close(hf_layers, layers, rtol=0, atol=1e-5)
    ids = torch.tensor([ours.tokenizer.encode_pair(*SENTENCES[:2])])
    lengths = torch.tensor([ids.shape[1]])
    with torch.no_grad():  # the states GPT's joint classifier reads
        torch.testing.assert_close(
            theirs.model.hidden_states(ids, lengths), ours.model.hidden_states(ids, lengths), rtol=0, atol=1e-5
        )


def test_other_families_and_used_folders_are_refused(tmp_path, save_encoder, trained, exported):
    elmo, _ = save_encoder("elmo", tmp_path)
    with pytest.raises(UserError, match=r"^--encoder=.*: a elmo encoder; only gpt-family encoders export"):
        export(str(elmo), tmp_path / "elmo-hf")
    with pytest.raises(UserError, match=r"^--out=.*exists and is not an empty folder"):
        export(str(trained), exported)
    assert not (tmp_path / "elmo-hf").exists()


def test_a_wider_mlp_than_gpt1s_is_refused(tmp_path):
    tokenizer = SubwordTokenizer.build(TRAIN * 3, vocab_size=300, min_frequency=1)
    lit = LitGPT(vocab_size=len(tokenizer), num_layers=1, hidden_size=8, num_heads=2, ffn_size=24, max_positions=40)
    lit.tokenizer = tokenizer
    state = {"state_dict": lit.state_dict(), "epoch": 0, "global_step": 0}
    lit.on_save_checkpoint(state)
    torch.save(slim_checkpoint(state), tmp_path / "wide.ckpt")
    with pytest.raises(UserError, match=r"ffn_size 24 ≠ 4 × hidden_size 8: GPT-1's architecture fixes"):
        export(str(tmp_path / "wide.ckpt"), tmp_path / "wide-hf")


@pytest.mark.slow
def test_the_command_line(trained, tmp_path):
    out = tmp_path / "cli-hf"
    done = subprocess.run(
        preloaded.command("pretrain", "export", "--encoder", str(trained), "--out", str(out)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "── export finished" in done.stdout and "max |Δ|" in done.stdout and (out / "model.safetensors").is_file()
    again = subprocess.run(
        preloaded.command("pretrain", "export", "--encoder", str(trained), "--out", str(out)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 2 and again.stderr.strip().count("\n") == 0 and "exists" in again.stderr
