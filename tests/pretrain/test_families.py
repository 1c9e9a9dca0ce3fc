"""The encoder protocol holds for every family: per-layer features and masks, causality on every
layer, frozen means no gradient, the random twin, checkpoint round trips, and `init_from` (ULMFiT's
stage 2) continuing a run of the same family exactly."""

import dataclasses
import inspect

import pytest
import torch

from harness.errors import UserError
from pretrain.encoders.loading import load_encoder, random_encoder
from pretrain.families import FAMILIES, family_of, pretrained_families
from pretrain.lit_awd_lstm import LitAWDLSTM


@pytest.fixture(scope="module", params=sorted(pretrained_families()))
def saved(request, tmp_path_factory, save_encoder):
    return (request.param, *save_encoder(request.param, tmp_path_factory.mktemp(request.param)))


def test_every_family_is_registered_with_a_module(save_encoder, tmp_path):
    for family in pretrained_families():
        path, lit = save_encoder(family, tmp_path)
        assert lit.family == family and load_encoder(path).family == family


def test_the_checkpoint_names_its_family_and_rebuilds_the_model(saved):
    family, path, lit = saved
    encoder = load_encoder(path)
    assert encoder.family == family and encoder.directions == lit.model.objective.directions
    assert encoder.num_layers == lit.model.num_layers + 1 and encoder.dim == lit.model.feature_dim
    for key, value in lit.model.state_dict().items():
        assert torch.equal(encoder.model.state_dict()[key], value), key


def test_features_shapes_mask_and_padding(saved, tiny_sentences):
    family, path, _ = saved
    encoder = load_encoder(path)
    layers, mask = encoder.embed_layers(tiny_sentences)
    lengths = [len(encoder.tokenize(sentence)) for sentence in tiny_sentences]
    assert layers.shape == (encoder.num_layers, len(tiny_sentences), max(lengths), encoder.dim)
    assert mask.sum(dim=1).tolist() == lengths
    assert torch.all(layers[:, ~mask] == 0)
    for index, sentence in enumerate(tiny_sentences):  # a sentence's features do not depend on its batch
        alone, _ = encoder.embed_layers([sentence])
        torch.testing.assert_close(alone[:, 0], layers[:, index, : lengths[index]], rtol=0, atol=1e-5)


def test_no_position_sees_past_its_direction_on_any_layer(saved):
    """The forward half at token t never depends on later tokens; the biLM's backward half never
    on earlier ones."""
    family, path, _ = saved
    encoder = load_encoder(path)
    token_ids, lengths = encoder.encode(["the market rose sharply after the report ."])
    changed = token_ids.clone()
    position = 4
    changed[0, position] = (changed[0, position] + 1) % len(encoder.tokenizer)
    before = encoder.features(token_ids, lengths)[0]
    after = encoder.features(changed, lengths)[0]
    width = before.shape[-1] // len(encoder.directions)
    word = position - 1  # features drop the <s> column
    forward_before, forward_after = before[1:, 0, :, :width], after[1:, 0, :, :width]
    torch.testing.assert_close(forward_before[:, :word], forward_after[:, :word], rtol=0, atol=0)
    assert not torch.equal(forward_before[:, word:], forward_after[:, word:])
    if "backward" in encoder.directions:
        backward_before, backward_after = before[1:, 0, :, width:], after[1:, 0, :, width:]
        torch.testing.assert_close(backward_before[:, word + 1 :], backward_after[:, word + 1 :], rtol=0, atol=0)
        assert not torch.equal(backward_before[:, : word + 1], backward_after[:, : word + 1])


def test_frozen_features_get_no_gradient(saved, tiny_sentences):
    family, path, _ = saved
    encoder = load_encoder(path)
    assert all(not p.requires_grad for p in encoder.model.parameters()) and not encoder.model.training
    layers, _ = encoder.embed_layers(tiny_sentences)
    assert not layers.requires_grad


def test_parameter_groups_cover_every_parameter_once(saved):
    _, path, _ = saved
    encoder = load_encoder(path)
    grouped = [id(p) for group in encoder.parameter_groups() for p in group]
    assert len(grouped) == len(set(grouped)) == len(list(encoder.model.parameters()))


def test_the_random_twin_copies_family_architecture_and_tokenizer_not_weights(saved):
    family, path, _ = saved
    encoder = load_encoder(path)
    twin = random_encoder(encoder, seed=1)
    assert twin.family == family and twin.tokenizer is encoder.tokenizer and twin.is_random
    assert twin.model.state_dict().keys() == encoder.model.state_dict().keys()
    assert any(not torch.equal(a, b) for a, b in zip(twin.model.parameters(), encoder.model.parameters()))
    again = random_encoder(encoder, seed=1)
    assert all(torch.equal(a, b) for a, b in zip(twin.model.parameters(), again.model.parameters()))


def test_init_from_starts_from_the_run_exactly_and_keeps_its_vocabulary(tmp_path, save_encoder):
    path, stage1 = save_encoder("ulmfit", tmp_path)
    stage2 = LitAWDLSTM(vocab_size=1, embedding_size=99, init_from=str(path))  # architecture comes from stage 1
    assert stage2.built_config == stage1.built_config
    for key, value in stage1.model.state_dict().items():
        assert torch.equal(stage2.model.state_dict()[key], value), key
    assert stage2.tokenizer.vocab == stage1.tokenizer.vocab
    assert stage2.init_source == {"source": str(path), "run_id": None}


def test_init_from_must_be_the_same_family_and_exist(tmp_path, save_encoder):
    path, _ = save_encoder("elmo", tmp_path)
    with pytest.raises(UserError, match=r"^--model.init_from=.*elmo encoder; this model is ulmfit"):
        LitAWDLSTM(vocab_size=10, init_from=str(path))
    with pytest.raises(UserError, match=r"^--model.init_from=/nowhere.ckpt: checkpoint file not found"):
        LitAWDLSTM(vocab_size=10, init_from="/nowhere.ckpt")


def test_a_checkpoint_of_an_unknown_family_is_one_line(tmp_path, save_encoder):
    path, _ = save_encoder("elmo", tmp_path)
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["family"] = "bert"
    torch.save(checkpoint, tmp_path / "bert.ckpt")
    with pytest.raises(UserError, match=rf"unknown family 'bert'; this version knows {', '.join(FAMILIES)}"):
        load_encoder(tmp_path / "bert.ckpt")


def test_the_registry_states_each_family_once_and_its_module_agrees():
    """Each entry's LightningModule names the entry's family; each family has its default config."""
    from pathlib import Path

    configs = Path(__file__).resolve().parents[2] / "configs" / "pretrain"
    for name in pretrained_families():
        spec = FAMILIES[name]
        assert spec.name == name and spec.lightning_class().family == name
        assert (configs / f"{name}.yaml").is_file(), f"configs/pretrain/{name}.yaml"
    assert family_of("gpt").joint_pair_input and not family_of("elmo").joint_pair_input
    assert family_of("elmo").objective.directions == ("forward", "backward")
    with pytest.raises(UserError, match=rf"^unknown family 'bert'; this version knows {', '.join(FAMILIES)}$"):
        family_of("bert")


def test_a_checkpoint_of_the_first_format_loads_as_elmo(tmp_path, save_encoder):
    """``bilm_config`` instead of family and ``model_config``, a word tokenizer without its ``type``."""
    path, lit = save_encoder("elmo", tmp_path)
    checkpoint = torch.load(path, weights_only=True)
    tokenizer = {key: value for key, value in checkpoint["tokenizer"].items() if key != "type"}
    config = {key: checkpoint["model_config"][key] for key in ("vocab_size", "hidden_size", "num_layers", "dropout")}
    old = {"bilm_config": config, "tokenizer": tokenizer, "state_dict": checkpoint["state_dict"]}
    torch.save(old, tmp_path / "bilm.ckpt")
    encoder = load_encoder(tmp_path / "bilm.ckpt")
    assert encoder.family == "elmo" and encoder.model.config == lit.config
    sentences = ["the cat sat ."]
    torch.testing.assert_close(encoder.embed_layers(sentences)[0], load_encoder(path).embed_layers(sentences)[0])


def test_a_model_config_this_version_does_not_know_is_one_line(tmp_path, save_encoder):
    path, _ = save_encoder("gpt", tmp_path)
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["model_config"]["rotary"] = True
    torch.save(checkpoint, tmp_path / "future.ckpt")
    with pytest.raises(
        UserError,
        match=r"future.ckpt: its gpt model config does not fit this version "
        r"\(TransformerConfig has no rotary",
    ):
        load_encoder(tmp_path / "future.ckpt")


def test_one_config_object_serves_model_module_and_checkpoint(saved):
    """The LightningModule's arguments are its config's fields; the model holds that config and the
    checkpoint stores it; the arguments' defaults are the config's."""
    family, path, lit = saved
    spec = family_of(family)
    assert lit.model.config is lit.config and isinstance(lit.config, spec.config)
    assert torch.load(path, weights_only=True)["model_config"] == lit.config.to_dict()
    assert load_encoder(path).model.config == lit.config
    parameters = inspect.signature(spec.lightning_class()).parameters
    for field in dataclasses.fields(spec.config):
        assert parameters[field.name].default == field.default


def test_the_cli_finds_every_family_module_by_its_short_name(capsys):
    from pretrain.cli import PretrainCLI

    for name in pretrained_families():
        module = family_of(name).lightning_module
        with pytest.raises(SystemExit) as done:
            PretrainCLI(args=["fit", f"--model={module.rpartition('.')[2]}", "--print_config"])
        assert done.value.code == 0 and f"class_path: {module}" in capsys.readouterr().out
