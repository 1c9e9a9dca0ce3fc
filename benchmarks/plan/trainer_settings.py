"""A trainer setting of a stage or cell as its CLI will see it, read before anything runs: the
planner's precision and time estimates and the engine's resource requests read the same value."""

from __future__ import annotations

from pathlib import Path

from harness.unique_keys import load_yaml, load_yaml_text


def trainer_setting(config: str, args: list[str], key: str, default=None):
    """``trainer.<key>`` as the CLI would see it: the last ``--trainer.<key>=`` flag, else the config's."""
    value = default
    path = Path(config)
    if path.is_file():
        config = load_yaml(path)
        trainer = (config if isinstance(config, dict) else {}).get("trainer") or {}
        value = trainer.get(key, default)
    prefix = f"--trainer.{key}="
    for argument in args:
        if argument.startswith(prefix):
            value = load_yaml_text(argument[len(prefix) :], prefix.rstrip("="))
    return value
