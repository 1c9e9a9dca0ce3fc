"""Tokenizers: the word tokenizer and vocabulary, byte-level BPE, and the checks of their flags."""
