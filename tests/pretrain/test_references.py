"""Encoder references: every form of --model.encoder parses in one place and prints back as a
value the flag accepts; a recorded reference rebuilds the very encoder, the random twin included."""

import pytest
import torch

from harness.errors import UserError
from pretrain.encoders.loading import load_encoder, random_encoder
from pretrain.encoders.references import BadReference, EncoderReference, Source, reference_of


@pytest.mark.parametrize(
    "text, kind, target",
    [
        ("runs:/0123abcd", "run", "0123abcd"),
        ("models:/elmo-encoder@newest", "model", "elmo-encoder@newest"),
        ("models:/elmo-encoder/3", "model", "elmo-encoder/3"),
        ("latest", "latest", ""),
        ("latest:gpt", "latest", "gpt"),
        ("latest:ulmfit:task", "latest", "ulmfit:task"),
        ("/tmp/some/elmo.ckpt", "path", "/tmp/some/elmo.ckpt"),
        ("hf:/models/bert-tiny", "published", "hf:/models/bert-tiny"),
        ("hf:prajjwal1/bert-tiny", "published", "hf:prajjwal1/bert-tiny"),
        ("reference:all-minilm-l6-v2", "published", "reference:all-minilm-l6-v2"),
    ],
)
def test_sources_parse_and_print_back(text, kind, target):
    source = Source.parse(text)
    assert (source.kind, source.target, str(source)) == (kind, target, text)


def test_latest_names_its_family_and_lm_stage():
    assert (Source.parse("latest:ulmfit:task").family, Source.parse("latest:ulmfit:task").lm_stage) == (
        "ulmfit",
        "task",
    )
    assert (Source.parse("latest").family, Source.parse("latest").lm_stage) == (None, None)
    with pytest.raises(UserError, match=r"^latest:bert: unknown family 'bert'; choose elmo"):
        Source.parse("latest:bert")
    with pytest.raises(UserError, match=r"^latest:gpt:final: unknown LM stage 'final'; choose general or task$"):
        Source.parse("latest:gpt:final")


@pytest.mark.parametrize(
    "text, random_like, printed",
    [
        ("runs:/abc", None, "runs:/abc"),
        ("random", None, "random:latest"),
        ("random", "runs:/abc", "random:runs:/abc"),
        ("random:runs:/abc@3", None, "random:runs:/abc@3"),
        ("random:models:/elmo-encoder@newest", None, "random:models:/elmo-encoder@newest"),
        ("random:models:/elmo-encoder@newest@0", None, "random:models:/elmo-encoder@newest@0"),
        ("random:/data/elmo.ckpt@12", None, "random:/data/elmo.ckpt@12"),
    ],
)
def test_encoder_references_print_back_as_flag_values(text, random_like, printed):
    reference = EncoderReference.parse(text, random_like)
    assert str(reference) == printed
    assert EncoderReference.parse(printed) == reference  # the printed form is itself a valid value


@pytest.mark.parametrize(
    "text, random_like, reason",
    [
        ("runs:/", None, "name the run: runs:/<run_id>"),
        ("models:/", None, "name the model, e.g. models:/elmo-encoder@<alias>"),
        ("hf:", None, "name the published model, e.g. hf:<folder>"),
        ("reference:", None, "name the published model"),
        ("latest:bert", None, "unknown family 'bert'; choose elmo"),
        ("latest:gpt:final", None, "unknown LM stage 'final'; choose general or task"),
        ("random:", None, "name the encoder to copy"),
        ("random:@3", None, "name the encoder to copy"),
        ("random:random", None, "a random-init twin copies a trained encoder, not another twin"),
        ("random:random:runs:/abc@1", None, "a random-init twin copies a trained encoder"),
        ("random:runs:/@2", None, "name the run: runs:/<run_id>"),
        ("random:runs:/abc", "runs:/def", "names the encoder whose twin it is already; drop --model.random_like"),
        ("random", "random:runs:/abc", "a random-init twin copies a trained encoder"),
        ("random", "models:/", "name the model"),
    ],
)
def test_a_reference_that_names_nothing_is_one_line_naming_the_text(text, random_like, reason):
    with pytest.raises(BadReference) as raised:
        EncoderReference.parse(text, random_like)
    error = raised.value
    assert error.reason.startswith(reason) and "\n" not in str(error)
    assert error.text == (random_like if text == "random" else text) and str(error) == f"{error.text}: {error.reason}"


def test_the_twin_takes_the_runs_seed_unless_it_names_one():
    assert EncoderReference.parse("random:runs:/abc").seeded(7) == EncoderReference(Source("run", "abc"), True, 7)
    assert EncoderReference.parse("random:runs:/abc@3").seeded(7).seed == 3
    assert EncoderReference.parse("runs:/abc").seeded(7).seed is None
    with pytest.raises(UserError, match="drop --model.random_like"):
        EncoderReference.parse("random:runs:/abc", random_like="runs:/def")
    with pytest.raises(UserError, match="name the encoder to copy"):
        EncoderReference.parse("random:@3")


def test_a_recorded_reference_rebuilds_the_same_encoder_and_twin(tmp_path, save_encoder):
    path, _ = save_encoder("elmo", tmp_path)
    trained = load_encoder(path)
    assert str(reference_of(trained)) == str(path)
    twin = random_encoder(trained, seed=4)
    recorded = str(reference_of(twin))
    assert recorded == f"random:{path}@4"
    again = load_encoder(recorded)
    assert again.is_random and again.random_seed == 4 and again.fingerprint == twin.fingerprint
    for name, value in twin.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[name], value), name


def test_a_published_model_and_its_twin_print_back_as_flag_values(tiny_bert):
    published = load_encoder(f"hf:{tiny_bert}")
    assert Source.parse(f"hf:{tiny_bert}").kind == "published" and str(reference_of(published)) == f"hf:{tiny_bert}"
    twin = random_encoder(published, seed=2)
    recorded = str(reference_of(twin))
    assert recorded == f"random:hf:{tiny_bert}@2"
    assert load_encoder(recorded).fingerprint == twin.fingerprint
