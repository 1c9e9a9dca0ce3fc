"""One transfer run: the CLI, the LightningModule and its callbacks, evaluation, what the run records and shows."""
