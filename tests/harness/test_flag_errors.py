"""jsonargparse's complaints about a flag become one line naming the flag, the value and the choices."""

from argparse import ArgumentError
from typing import Literal

import pytest
from jsonargparse import ArgumentParser

from harness.cli.flag_errors import flag_error


class Size:
    def __init__(self, text: str):
        if not text.endswith("px"):
            raise ValueError(f"size={text}: give pixels, e.g. 12px")


def complaint(argv: list[str]) -> str:
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--model.head", type=Literal["pool-mlp", "attn"], default="attn")
    parser.add_argument("--model.hidden_size", type=int, default=8)
    parser.add_argument("--model.size", type=Size, default=None)
    with pytest.raises(ArgumentError) as raised:
        parser.parse_args(argv)
    return flag_error(str(raised.value), argv)


@pytest.mark.parametrize(
    "argv, line",
    [
        (["--model.head=nope"], "--model.head=nope: choose one of pool-mlp, attn"),
        (["--model.head", "nope"], "--model.head=nope: choose one of pool-mlp, attn"),
        (["--model.hidden_size=abc"], "--model.hidden_size=abc: expected int"),
        (["--model.other=1"], "unrecognized arguments: --model.other=1"),
    ],
)
def test_one_line_naming_flag_value_and_choices(argv, line):
    assert complaint(argv) == line


def test_a_value_types_own_message_is_kept_and_names_the_flag():
    line = complaint(["--model.size=12"])
    assert line.startswith("--model.size=12: ") and "\n" not in line


def test_a_subclass_argument_names_the_flag_the_user_typed():
    message = (
        'Parser key "model":\n  Does not validate against any of the Union subtypes\nSubtypes: [...]\nErrors:\n'
        "  - Problem with given class_path 'pretrain.lit_bilm.LitBiLM':\n    Parser key \"schedule\":\n"
        "      Expected a typing.Literal['constant', 'cosine']. Got value: cosin\n"
        "  - Expected a <class 'NoneType'>\n"
    )
    assert flag_error(message, ["--model.schedule=cosin"]) == "--model.schedule=cosin: choose one of constant, cosine"
