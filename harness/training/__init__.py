"""Training plumbing shared by the stages: batching, schedules, checkpoints and exact resume."""
