"""Pretraining corpora and the data module that feeds them to a language model."""
