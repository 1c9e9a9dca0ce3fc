"""Encoders: the protocol every family answers to, references that name one, loading, checkpoints, the registry."""
