"""The command-line base of every stage: the LightningCLI class, checks before heavy imports, flag errors, console."""
