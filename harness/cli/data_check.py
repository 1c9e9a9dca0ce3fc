"""The pair data set a command line names, read and checked before the heavy imports: a wrong
``MRPC_DIR``, a missing or malformed ``--data.train`` file or an unknown ``--data.dataset`` then
answers in about a second, not after torch, Lightning and MLflow have loaded.

The data flags come from the ``--config`` files (their ``data:`` section) and the command line,
later ones winning, as the full parser reads them. What this reading cannot follow (a ``--data``
mapping, a value of the wrong type) is left to the full parse: nothing here refuses what the
stage itself would accept, since the check is the stage's own reader (``load_pair_data``).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from harness.cli.preflight import options
from harness.datasets.registry import dataset_choices, load_pair_data
from harness.datasets.spec import PATH_KEYS, SPEC_KEYS, PairDataSpec
from harness.errors import UserError

SUBCOMMANDS = ("fit", "validate", "test", "predict")
NO_RUN = ("h", "help", "print_config")  # the command prints and exits: no data is read


def data_hint() -> str:
    """What ``--data=<word>`` is told: the data module is fixed, the data set is a flag."""
    return f"the data set is --data.dataset: {dataset_choices()}"


def config_data(path: str) -> dict:
    """The ``data:`` section of a YAML config (under a subcommand's key when it has one)."""
    import yaml

    from harness.unique_keys import check_no_aliases

    try:
        text = Path(path).expanduser().read_text()
        check_no_aliases(text, path)
        config = yaml.safe_load(text) or {}
    except (OSError, yaml.YAMLError):
        return {}  # the full parse names what is wrong with it
    if not isinstance(config, dict):
        return {}
    for subcommand in SUBCOMMANDS:
        if isinstance(config.get(subcommand), dict):
            config = config[subcommand]
    data = config.get("data")
    return data if isinstance(data, dict) else {}


def flag_value(key: str, value: str):
    """A ``--data.<key>`` value as the parser types it: paths stay text, the rest is read as YAML."""
    if key in PATH_KEYS:
        return None if value in ("null", "None", "~", "") else value
    import yaml

    from harness.unique_keys import check_no_aliases

    try:
        check_no_aliases(value, f"--data.{key}")  # the full parser names it
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value


def data_flags(argv: list[str]) -> dict | None:
    """The pair data flags ``argv`` gives, config files first; None when the command reads no data
    or gives them in a form only the full parser reads."""
    flags = {}
    for key, value in options(argv):
        if key in NO_RUN:
            return None
        if key in ("c", "config") and value is not None:
            flags.update({name: setting for name, setting in config_data(value).items() if name in SPEC_KEYS})
        elif key == "data":
            return None
        elif key.startswith("data.") and key[len("data.") :] in SPEC_KEYS and value is not None:
            flags[key[len("data.") :]] = flag_value(key[len("data.") :], value)
    return flags


def data_problem(argv: list[str]) -> str | None:
    """The one-line error the stage would end with when reading the data set ``argv`` names; None
    when it reads, or when it cannot be told before the full parse."""
    flags = data_flags(argv)
    if flags is None:
        return None
    try:
        spec = PairDataSpec(**{key: value for key, value in flags.items() if value is not None})
    except TypeError:
        return None
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # its notes come once, from the stage's own read
            load_pair_data(spec)
    except UserError as error:
        return str(error)
    except (TypeError, ValueError, AttributeError):
        return None  # a value of the wrong type: the full parse names the flag
    return None
