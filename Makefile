# lm-transfer-bench. Every target creates .venv and installs the project on a fresh clone.
# Extra CLI flags: make pretrain ARGS="--trainer.max_epochs=1"
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
ARGS ?=
# OpenMP threads sleep at a join instead of spinning: on a shared, loaded machine a spinning thread
# waiting for a descheduled partner stalled steps 5-7x (README, Speed). Override: OMP_WAIT_POLICY=ACTIVE.
export OMP_WAIT_POLICY ?= PASSIVE

.DEFAULT_GOAL := help
.PHONY: help install pretrain finetune benchmark benchmark-quick benchmark-corpus test ui bench-throughput bench-finetune

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the project (torch CPU/CUDA per platform, pinned)

pretrain: $(STAMP)  ## pretrain the default biLM (configs/pretrain/elmo.yaml), tracked in MLflow
	$(PY) -m pretrain fit --config configs/pretrain/elmo.yaml $(ARGS)

test: $(STAMP)  ## run the test suite (set MRPC_DIR to run the real-data tests)
	$(PY) -m pytest -q $(ARGS)

ui:  $(STAMP)  ## open the MLflow UI on the run store (http://127.0.0.1:5000)
	$(VENV)/bin/mlflow ui --backend-store-uri "$${MLFLOW_TRACKING_URI:-sqlite:///$(CURDIR)/mlflow.db}" --host 127.0.0.1 --port 5000

bench-throughput: $(STAMP)  ## pretraining tokens/s and FLOP/s of every family, fp32 and bf16 (ARGS="--json PATH")
	$(PY) -m benchmarks.throughput $(or $(ARGS),--json benchmarks/results/throughput.json)

finetune: $(STAMP)  ## MRPC on frozen features of the newest pretrain run (configs/downstream/mrpc.yaml)
	$(PY) -m downstream fit --config configs/downstream/mrpc.yaml $(ARGS)

benchmark: $(STAMP)  ## the default matrix: mixes × 5 seeds, random control, baselines, learning curve
	$(PY) -m benchmarks.suite --config configs/benchmarks/default.yaml $(ARGS)

benchmark-quick: $(STAMP)  ## every path of the suite in a few minutes (1 seed, small pretrain)
	$(PY) -m benchmarks.suite --config configs/benchmarks/quick.yaml $(ARGS)

benchmark-corpus: $(STAMP)  ## does more pretraining text transfer? MRPC vs MRPC + Reuters-21578
	$(PY) -m benchmarks.suite --config configs/benchmarks/corpus.yaml $(ARGS)

bench-finetune: $(STAMP)  ## fine-tuning pairs/s of every family and mode against a naive baseline (ARGS="--json PATH")
	$(PY) -m benchmarks.finetune_speed $(or $(ARGS),--json benchmarks/results/finetune_speed.json)
