"""The statistics of a report: gaps with their intervals and tests, pairing, aggregates, Holm over
the registered family."""
