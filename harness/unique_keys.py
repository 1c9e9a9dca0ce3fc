"""YAML as every config of this harness reads it: a key given twice in one mapping is an error
naming the key, its line and the file, never the last value taken silently (PyYAML's own
behaviour); an alias (``*name``) is refused before anything is built or walked, since a few
hundred bytes of nested aliases expand to billions of nodes, and no config needs one. Benchmark
matrices read through :func:`load_yaml`, other configs through :func:`load_yaml_text`,
LightningCLI configs through the loader :func:`install_jsonargparse_loader` puts in jsonargparse's
place."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.errors import UserError


class DuplicateKey(yaml.YAMLError):
    """A mapping that names one key twice; ``str()`` is one line."""


class AliasRefused(yaml.YAMLError):
    """A YAML alias in a config; ``str()`` is one line."""


def alias_line(text: str) -> int | None:
    """The line (1-based) of the first alias in ``text`` that names an anchor given before it; None
    when there is none. Reads parser events only, so it takes time linear in ``text`` whatever the
    aliases would expand to; an alias to no anchor is left to the loader, which names that error."""
    anchors = set()
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) and event.anchor in anchors:
                return event.start_mark.line + 1
            if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
                anchors.add(event.anchor)
    except yaml.YAMLError:
        return None  # not valid YAML: the loader names the error
    return None


def check_no_aliases(text: str, where: str) -> None:
    """Raise :class:`AliasRefused` naming ``where`` and the line when ``text`` uses an alias."""
    line = alias_line(text)
    if line is not None:
        raise AliasRefused(
            f"{where}:{line}: YAML aliases (*name) are not read in configs (nested ones expand "
            "without bound); write the value out"
        )


def duplicate_key(text: str) -> tuple[str, int] | None:
    """The first key given twice in one mapping of ``text`` and the line (1-based) of its second
    occurrence; None when every mapping's keys are unique. ``text`` must be valid YAML."""
    pending = [node for node in yaml.compose_all(text, Loader=yaml.SafeLoader) if node is not None]
    visited = set()  # an alias shares its anchor's node: walk each node once
    while pending:
        node = pending.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
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
    """Raise :class:`AliasRefused` naming ``where`` when ``text`` uses an alias, or
    :class:`DuplicateKey` when it gives a key twice in one mapping."""
    check_no_aliases(text, where)
    found = duplicate_key(text)
    if found:
        key, line = found
        raise DuplicateKey(f"{where}:{line}: key '{key}' given twice in one mapping (which value is meant?); keep one")


def load_yaml(path: Path) -> object:
    """``path``'s YAML (safe); a syntax error, an alias or a key given twice is one line naming
    the file."""
    return load_yaml_text(Path(path).read_text(encoding="utf-8"), str(path))


def load_yaml_text(text: str, where: str) -> object:
    """``text`` read as YAML (safe), checked as :func:`load_yaml` checks a file; ``where`` names it."""
    try:
        check_no_aliases(text, where)
        value = yaml.safe_load(text)
        check_unique_keys(text, where)
    except (DuplicateKey, AliasRefused) as error:
        raise UserError(str(error)) from None
    except yaml.YAMLError as error:
        raise UserError(f"{where}: not valid YAML ({str(error).splitlines()[0]})") from None
    return value


def install_jsonargparse_loader() -> None:
    """Make jsonargparse's YAML loader (every ``--config`` and YAML value of a LightningCLI) refuse
    an alias or a key given twice, naming the config file where jsonargparse names one; otherwise it
    loads as before. Idempotent."""
    from jsonargparse import get_loader, set_loader  # only the CLIs need it

    original = get_loader("yaml")
    if getattr(original, "checks_unique_keys", False):
        return

    def load(value: str, path: str = "") -> object:
        check_no_aliases(value, str(path) or "a YAML value")  # before anything walks the value
        loaded = original(value)
        if isinstance(loaded, (dict, list)):
            check_unique_keys(value, str(path) or "a YAML value")
        return loaded

    load.checks_unique_keys = True
    set_loader("yaml", load, exceptions=(yaml.YAMLError,))
