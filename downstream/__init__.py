"""Transfer stage: frozen per-layer features, layer mix and pair heads on MRPC."""
