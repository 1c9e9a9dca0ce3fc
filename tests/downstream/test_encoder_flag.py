"""``--model.encoder`` is parsed once, where it enters (``downstream.run.cli.resolve_encoder``): a
value that names nothing is one line naming the flag at fault, before anything loads."""

import pytest

from downstream.run import encoder_reuse
from downstream.run.cli import resolve_encoder
from harness.errors import UserError
from pretrain.encoders.reference_hints import ACCEPTED


@pytest.mark.parametrize(
    "encoder, random_like, message",
    [
        ("runs:/", None, "--model.encoder=runs:/: name the run: runs:/<run_id> (`make ui` lists them)"),
        (
            "random:random",
            None,
            "--model.encoder=random:random: a random-init twin copies a trained encoder, not "
            "another twin; name that encoder, e.g. random:runs:/<run_id>",
        ),
        (
            "random",
            "hf:",
            "--model.random_like=hf:: name the published model, e.g. hf:<folder>, hf:<owner>/<name> or "
            "reference:<name>",
        ),
        (
            "random:runs:/abc",
            "runs:/def",
            "--model.encoder=random:runs:/abc: names the encoder whose twin it is already; drop --model.random_like",
        ),
    ],
)
def test_a_bad_value_names_its_flag_in_one_line_and_loads_nothing(encoder, random_like, message, monkeypatch):
    monkeypatch.setattr(encoder_reuse, "loaded", lambda reference: pytest.fail(f"loaded {reference}"))
    with pytest.raises(UserError) as raised:
        resolve_encoder(encoder, random_like, 0)
    assert str(raised.value) == message


@pytest.mark.parametrize("kind", ["missing-file", "folder-without-config"])
def test_a_reference_the_full_load_finds_naming_nothing_lists_the_accepted_forms(kind, tmp_path):
    """What the check before the imports leaves (a value in a config file, a server's store) is
    refused by the load itself with the same list of forms."""
    value = str(tmp_path / "gone.ckpt") if kind == "missing-file" else f"hf:{tmp_path}"
    with pytest.raises(UserError) as raised:
        resolve_encoder(value, None, 0)
    message = str(raised.value)
    assert message.startswith(f"--model.encoder={value}: ") and message.endswith(ACCEPTED)
    assert len(message.splitlines()) == 1
