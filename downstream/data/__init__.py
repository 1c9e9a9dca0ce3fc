"""The pairs a transfer run reads: the data module, cached frozen features, input limits, joint inputs, epoch sizes."""
