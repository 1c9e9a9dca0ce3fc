"""``make evaluate ENCODER=<ref> TASKS="mrpc sick-e sick-r stsb"``: one encoder scored on a suite
of pair tasks from one call, one table across them (``python -m benchmarks.evaluate``)."""
