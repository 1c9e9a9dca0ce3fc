"""Speed benchmarks: pretraining and fine-tuning throughput, model FLOPs, pair-file reading."""
