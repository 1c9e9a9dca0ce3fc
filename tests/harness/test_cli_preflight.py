"""The command-line check before the heavy imports: unknown flags and encoder references get a
did-you-mean, a missing config is named, and nothing the full parser accepts is refused."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from downstream.__main__ import MODEL_HINT
from downstream.run.cli_flags import CLASSES as FINETUNE_CLASSES
from downstream.run.cli_flags import FLAGS as FINETUNE_FLAGS
from downstream.run.cli_flags import LEAVES as FINETUNE_LEAVES
from harness.cli.data_check import data_hint
from harness.cli.preflight import problems
from pretrain.cli_flags import CLASSES as PRETRAIN_CLASSES
from pretrain.cli_flags import FLAGS as PRETRAIN_FLAGS
from pretrain.cli_flags import LEAVES as PRETRAIN_LEAVES
from pretrain.encoders.reference_hints import ACCEPTED, FORMS, encoder_hint

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "pytorch_lightning", "mlflow", "transformers")
# Bad encoder values decidable without the store; each must list every accepted form.
BAD_ENCODERS = [
    "bert-base",
    "/nonexistent/encoder.ckpt",
    "hf:configs",  # a folder, but no config.json
    "hf:./no-such-folder",
    "hf:README.md",
    "random:bert-base@3",
    "modles:/elmo-encoder@newest",
]
# Seconds for a plain `python -m downstream` to answer a bad encoder: ~0.4 s measured at load 6 on
# 2 cores; the full parse that answered before took 15-50 s.
ANSWER_BOUND_S = 3.0
CHECKS = {"model.encoder": encoder_hint, "model.random_like": encoder_hint}


def finetune_problems(argv):
    return problems(argv, FINETUNE_FLAGS, FINETUNE_LEAVES, CHECKS)


@pytest.mark.parametrize(
    "argv, line",
    [
        (["fit", "--model.encdoer=latest"], "--model.encdoer: unknown flag; did you mean --model.encoder?"),
        (["fit", "--data.batchsize", "3"], "--data.batchsize: unknown flag; did you mean --data.batch_size?"),
        (["fit", "--trainer.max_epoch=3"], "--trainer.max_epoch: unknown flag; did you mean --trainer.max_epochs?"),
        (
            ["fit", "--model.encoder=lates"],
            f"--model.encoder=lates: no such file, nor an encoder's name (did you mean latest?); {ACCEPTED}",
        ),
        (
            ["fit", "--model.encoder", "rnadom"],
            f"--model.encoder=rnadom: no such file, nor an encoder's name (did you mean random?); {ACCEPTED}",
        ),
        (
            ["fit", "--model.encoder=run:/abc"],
            f"--model.encoder=run:/abc: unknown scheme run: (did you mean runs:/abc?); {ACCEPTED}",
        ),
        (
            ["fit", "--config", "configs/downstream/mrpx.yaml"],
            "--config=configs/downstream/mrpx.yaml: no such file; did you mean configs/downstream/mrpc.yaml?",
        ),
    ],
)
def test_a_mistake_is_one_line_with_what_was_meant(argv, line, monkeypatch):
    monkeypatch.chdir(REPO)
    assert finetune_problems(argv) == [line]


@pytest.mark.parametrize(
    "argv",
    [
        ["fit", "--config", "configs/downstream/smoke.yaml", "--model.encoder=latest", "--trainer.max_epochs", "-1"],
        ["fit", "--model.encoder=runs:/0123abcd", "--model.random_like=latest:elmo", "--model.mix=layer:2"],
        ["fit", "--model.encoder=random:models:/elmo-encoder@newest@3", "--data.train_fraction=0.1"],
        ["fit", "--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.patience=3", "--trainer.logger=false"],
        ["fit", "--tags", '{"note": "try"}', "--print_config", "--seed_everything=1"],
        ["fit", "--model.encoder=hf:some/folder", "--model.help", "x", "-c", "configs/downstream/mrpc.yaml"],
        ["fit", "--model.random_like=random:latest:elmo@2", "--model.encoder=hf:owner/model-in-the-cache"],
    ],
)
def test_what_the_parser_accepts_passes(argv, monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'none.db'}")  # no store: runs:/ left to the parse
    assert finetune_problems(argv) == []


@pytest.mark.parametrize("value", BAD_ENCODERS)
def test_every_bad_encoder_form_lists_the_accepted_forms(value, monkeypatch):
    monkeypatch.chdir(REPO)
    (line,) = finetune_problems(["fit", f"--model.encoder={value}"])
    assert line.startswith(f"--model.encoder={value}: ") and line.endswith(ACCEPTED)
    assert all(form in line for form in FORMS)


def test_a_model_folder_and_a_hub_id_are_left_to_the_full_load(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert encoder_hint(f"hf:{tmp_path}") is None
    assert encoder_hint("hf:sentence-transformers/all-MiniLM-L6-v2") is None  # the HF cache: the full load's
    assert encoder_hint(str(REPO / "README.md")) is None  # an existing file: the full load reads it


@pytest.mark.parametrize("value", ["bert-base", "hf:configs", "/nonexistent/encoder.ckpt"])
def test_a_bad_encoder_is_answered_in_a_plain_process_before_the_heavy_imports(value, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-m", "downstream", "fit", "-c", "configs/downstream/mrpc.yaml", f"--model.encoder={value}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.perf_counter() - started
    assert process.returncode == 2
    (line,) = process.stderr.strip().splitlines()
    assert line.startswith(f"error: --model.encoder={value}: ") and line.endswith(ACCEPTED)
    assert elapsed < ANSWER_BOUND_S, f"answered after {elapsed:.1f} s"


def test_a_config_giving_a_key_twice_is_named_before_the_data_set_is_read(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text("data:\n  train_fraction: 0.1\n  train_fraction: 0.5\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("data: [unclosed\n")  # not valid YAML: the full parse names it
    assert finetune_problems(["fit", "--config", str(twice)]) == [
        f"{twice}:3: key 'train_fraction' given twice in one mapping (which value is meant?); keep one"
    ]
    assert finetune_problems(["fit", "--config", str(broken)]) == []


def test_a_run_the_local_store_lacks_is_named_with_the_closest_before_mlflow_loads(monkeypatch, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("pretrain")).info.run_id
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    typo = run_id[:-1] + ("0" if run_id[-1] != "0" else "1")
    assert finetune_problems(["fit", f"--model.encoder=runs:/{typo}"]) == [
        f"--model.encoder=runs:/{typo}: no run {typo} in {uri} (did you mean runs:/{run_id}?); {ACCEPTED}"
    ]
    assert finetune_problems(["fit", f"--model.random_like=random:runs:/{typo}@0"])[0].startswith(
        f"--model.random_like=random:runs:/{typo}@0: no run {typo} in {uri}"
    )
    assert finetune_problems(["fit", f"--model.encoder=runs:/{run_id}", f"--model.random_like=runs:/{run_id}/x"]) == []
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9/")  # a server: left to the full parse
    assert finetune_problems(["fit", f"--model.encoder=runs:/{typo}"]) == []


def test_the_pretrain_model_flags_of_every_family_pass():
    argv = [
        "fit",
        "--model=pretrain.lit_gpt.LitGPT",
        "--model.num_heads=2",
        "--model.init_args.hidden_size=8",
        "--model.weight_drop=0.1",
        "--model.init_from=latest:ulmfit",
        "--data.corpus=mrpc+reuters",
    ]
    assert problems(argv, PRETRAIN_FLAGS, PRETRAIN_LEAVES) == []
    assert problems(["fit", "--model.hiden_size=8"], PRETRAIN_FLAGS, PRETRAIN_LEAVES) == [
        "--model.hiden_size: unknown flag; did you mean --model.hidden_size?"
    ]


def test_a_class_a_group_flag_does_not_take_lists_the_choices_in_one_line(monkeypatch):
    monkeypatch.chdir(REPO)
    hints = {"model": MODEL_HINT, "data": data_hint()}

    def pretrain_problems(argv):
        return problems(argv, PRETRAIN_FLAGS, PRETRAIN_LEAVES, classes=PRETRAIN_CLASSES, hints={"data": data_hint()})

    assert pretrain_problems(["fit", "--model=LitBERT"]) == [
        "--model=LitBERT: choose one of LitAWDLSTM, LitBiLM, LitGPT (or its class path, or a config file)"
    ]
    assert pretrain_problems(["fit", "--model", "LitGPTT"])[0].endswith("; did you mean LitGPT?")
    assert pretrain_problems(["fit", "--data=SST2"]) == [
        "--data=SST2: not a config file, and --data's class is fixed here; the data set is "
        "--data.dataset: mrpc, sick-e, sick-r, stsb or tsv"
    ]
    finetune = problems(
        ["fit", "--model=LitBERT"], FINETUNE_FLAGS, FINETUNE_LEAVES, classes=FINETUNE_CLASSES, hints=hints
    )
    assert finetune == [
        "--model=LitBERT: not a config file, and --model's class is fixed here; --model.encoder "
        "picks the encoder: runs:/<id>, latest[:<family>], hf:<folder>, random, …"
    ]
    for accepted in (
        "--model=LitGPT",
        "--model=pretrain.lit_gpt.LitGPT",
        "--model=configs/pretrain/gpt.yaml",
        "--model={class_path: pretrain.lit_gpt.LitGPT}",
        "--data=configs/pretrain/smoke.yaml",
        "--model=null",
    ):
        assert pretrain_problems(["fit", accepted]) == [], accepted
    for accepted in ("--model.mix=scalar", "--model.mix=average", "--trainer.strategy=ddp"):  # a value's own words
        assert (
            problems(["fit", accepted], FINETUNE_FLAGS, FINETUNE_LEAVES, classes=FINETUNE_CLASSES, hints=hints) == []
        ), accepted


@pytest.mark.parametrize("stage", ["downstream", "pretrain"])
def test_a_bad_flag_is_answered_before_torch_lightning_or_mlflow_load(stage):
    probe = (
        "import atexit, runpy, sys\n"
        f"atexit.register(lambda: print('loaded', sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
        f"sys.argv = ['{stage}', 'fit', '--trainer.max_epoch=1']\n"
        f"runpy.run_module('{stage}', run_name='__main__')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert process.returncode == 2
    assert process.stderr.strip() == "error: --trainer.max_epoch: unknown flag; did you mean --trainer.max_epochs?"
    assert process.stdout.strip() == "loaded []"


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec, module",
    [
        ("pretrain.cli:PretrainCLI", "pretrain/cli_flags.py"),
        ("downstream.run.cli:FinetuneCLI", "downstream/run/cli_flags.py"),
    ],
)
def test_the_recorded_flags_are_the_parsers(spec, module):
    """The generated flag lists match the parsers; after a flag is added or renamed, regenerate."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.run(
        [sys.executable, "-m", "harness.cli.flag_names", spec],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout == (REPO / module).read_text(), (
        f"{module} is stale: python -m harness.cli.flag_names {spec} > {module}"
    )
