"""YAML as every config of this harness reads it: a key given twice in one mapping is an error
naming the key, its line and the file, never the last value taken silently (PyYAML's own
behaviour). Benchmark matrices read through :func:`load_yaml`; LightningCLI configs through the
loader :func:`install_jsonargparse_loader` puts in jsonargparse's place."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.errors import UserError


class DuplicateKey(yaml.YAMLError):
    """A mapping that names one key twice; ``str()`` is one line."""


def duplicate_key(text: str) -> tuple[str, int] | None:
    """The first key given twice in one mapping of ``text`` and the line (1-based) of its second
    occurrence; None when every mapping's keys are unique. ``text`` must be valid YAML."""
    pending = [node for node in yaml.compose_all(text, Loader=yaml.SafeLoader) if node is not None]
    while pending:
        node = pending.pop()
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if (key.tag, key.value) in seen:
                        return key.value, key.start_mark.line + 1
                    seen.add((key.tag, key.value))
                pending += [key, value]
        elif isinstance(node, yaml.SequenceNode):
            pending += node.value
    return None


def check_unique_keys(text: str, where: str) -> None:
    """Raise :class:`DuplicateKey` naming ``where`` when ``text`` gives a key twice in one mapping."""
    found = duplicate_key(text)
    if found:
        key, line = found
        raise DuplicateKey(f"{where}:{line}: key '{key}' given twice in one mapping (which value is meant?); keep one")


def load_yaml(path: Path) -> object:
    """``path``'s YAML (safe); a syntax error or a key given twice is one line naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        value = yaml.safe_load(text)
        check_unique_keys(text, str(path))
    except DuplicateKey as error:
        raise UserError(str(error)) from None
    except yaml.YAMLError as error:
        raise UserError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from None
    return value


def install_jsonargparse_loader() -> None:
    """Make jsonargparse's YAML loader (every ``--config`` and YAML value of a LightningCLI) refuse
    a key given twice, naming the config file where jsonargparse names one; otherwise it loads as
    before. Idempotent."""
    from jsonargparse import get_loader, set_loader  # only the CLIs need it

    original = get_loader("yaml")
    if getattr(original, "checks_unique_keys", False):
        return

    def load(value: str, path: str = "") -> object:
        loaded = original(value)
        if isinstance(loaded, (dict, list)):
            check_unique_keys(value, str(path) or "a YAML value")
        return loaded

    load.checks_unique_keys = True
    set_loader("yaml", load, exceptions=(yaml.YAMLError,))
