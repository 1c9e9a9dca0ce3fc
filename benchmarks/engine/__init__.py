"""Where and in what order a study's tasks run: the Ray cluster, the task graph, the suite's lease and parent run."""
