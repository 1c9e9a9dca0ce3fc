"""The ``hf`` family: a published ``transformers`` model behind the encoder protocol."""
