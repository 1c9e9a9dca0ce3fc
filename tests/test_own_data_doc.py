"""docs/own-data.md as a new user tries it: the commands of its smoke-sized section, taken from the
page itself, run in a clone of the repository with nothing beside it (no ``../shared``, no
``MRPC_DIR``, no ``CORPORA_DIR``) on generated pair files and a text file, through the real
``make`` targets; then the ``use it`` line the pretraining printed. And what the page and
``configs/benchmarks/own-data.yaml`` promise without running: the user's files alone, the shared
corpora optional and said to be the user's to supply."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from benchmarks.plan.encoders import shared_corpus_names
from benchmarks.plan.matrix import load_config
from tests import preloaded
from tests.helpers import CLI_TIMEOUT, RUN_ID
from tests.pair_files import write_three_label_set

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "own-data.md"
SMOKE_SECTION = "## Smoke-sized first"
REAL_SECTION = "## Then at real size"
TEXT_LINES = 400  # the user's text file: as long as the smoke config's max_sentences


def block(heading: str) -> str:
    """The first ```bash block after ``heading`` in docs/own-data.md."""
    text = DOC.read_text(encoding="utf-8")
    after = text[text.index(heading) :]
    return re.search(r"```bash\n(.*?)```", after, re.DOTALL).group(1)


def doc_data_flags() -> list[str]:
    """The ``--data.*`` flags of the page's ``DATA=`` line."""
    (line,) = [line for line in block(SMOKE_SECTION).splitlines() if line.startswith("DATA=")]
    return shlex.split(shlex.split(line.removeprefix("DATA="))[0])


def test_the_page_starts_from_the_users_files_and_says_the_shared_corpora_are_theirs_to_supply():
    text = DOC.read_text(encoding="utf-8")
    assert text.index(SMOKE_SECTION) < text.index(REAL_SECTION)  # smoke-sized first, then real size
    for commands in (block(SMOKE_SECTION), block(REAL_SECTION)):
        assert "all-shared" not in commands and "brown" not in commands and "reuters" not in commands
        assert "--data.corpus='[pairs, data/own/text.txt]'" in commands  # the own-corpus form
    assert "--config configs/pretrain/smoke.yaml" in block(SMOKE_SECTION)
    corpora = text[text.index("## More text: the shared corpora (optional)") :]
    for fact in ("CORPORA_DIR", "--data.corpora_dir", "reuters21578/", "brown/", "sotu/", "supplies them"):
        assert fact in corpora, fact


def test_the_benchmark_config_reads_the_users_files_alone():
    """Its pretraining names no shared corpus (it needed Brown), and the files it reads are the page's."""
    config = load_config(REPO / "configs" / "benchmarks" / "own-data.yaml")
    (encoder,) = config.encoders
    (stage,) = encoder["pretrain"] if isinstance(encoder["pretrain"], list) else [encoder["pretrain"]]
    config_text = (REPO / stage["config"]).read_text()
    assert shared_corpus_names(stage["args"], config_text) == []
    (corpus,) = [arg for arg in stage["args"] if arg.startswith("--data.corpus=")]
    assert yaml.safe_load(corpus.partition("=")[2]) == ["pairs", "data/own/text.txt"]
    assert corpus in block(REAL_SECTION).replace("'", "")
    assert [f"--data.{key}={config.dataset[key]}" for key in ("dataset", "train", "dev", "test")] == doc_data_flags()


def bare_clone(root: Path) -> Path:
    """A clone of this repository's committed state under ``root``, with the page's files in
    ``data/own/``: pairs of 3 labels and a text file of its own sentences."""
    clone = root / "lm-transfer-bench"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    folder = clone / "data" / "own"
    write_three_label_set(folder)
    lines = [f"Reporters counted {number} new sentences in the archive today." for number in range(TEXT_LINES)]
    (folder / "text.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return clone


def walk(clone: Path, commands: str, env: dict) -> subprocess.CompletedProcess:
    """``commands`` in bash in ``clone``, ``make`` running its real targets with the Python of the
    tests (``PY``: a preloaded one; ``STAMP`` empty: no install, the environment is this one)."""
    python = clone.parent / "python"
    socket = preloaded.socket_path(env)
    python.write_text(
        f'#!/bin/sh\n[ "$1" = -m ] && shift\nexec {shlex.quote(sys.executable)} '
        f'{shlex.quote(str(REPO / "tests" / "preloaded.py"))} {shlex.quote(socket)} "$@"\n'
    )
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    script = f'set -eu\nmake() {{ command make STAMP= PY={shlex.quote(str(python))} "$@"; }}\n{commands}'
    return subprocess.run(
        ["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=3 * CLI_TIMEOUT
    )


def summaries(stdout: str, header: str) -> list[str]:
    """Each summary block of ``stdout`` that starts with ``header``."""
    return [part.split("\n\n")[0] for part in stdout.split(header)[1:]]


@pytest.mark.slow
def test_the_smoke_sized_commands_run_on_the_users_files_in_a_bare_clone(tmp_path):
    clone = bare_clone(tmp_path)
    assert not (clone.parent / "shared").exists()
    env = {key: value for key, value in os.environ.items() if key not in ("MRPC_DIR", "CORPORA_DIR")}
    env.pop("MLFLOW_TRACKING_URI", None)  # the default store: the clone's mlflow.db
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")  # make exports the last
    env["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    process = walk(clone, block(SMOKE_SECTION), env)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert "Traceback" not in process.stderr

    (pretrain,) = summaries(process.stdout, "── pretrain finished")
    assert pretrain.startswith(": a smoke run, a toy that tests the pipeline")  # the header says so
    registered = re.search(r"^  registered (\S+)  \(= (\S+)\)", pretrain, re.MULTILINE)
    assert registered.groups() == ("models:/elmo-encoder-smoke/1", "models:/elmo-encoder-smoke@newest")
    client = MlflowClient(f"sqlite:///{clone / 'mlflow.db'}")
    assert [model.name for model in client.search_registered_models()] == ["elmo-encoder-smoke"]
    # the text file comes after the train sentences: the cut to 400 falls in it, and says so
    cut = re.search(r"^  cut        (.*)$", pretrain, re.MULTILINE).group(1)
    found = re.fullmatch(
        r"--data\.max_sentences=400 kept the first 400 of (\d+) pretraining sentences: own (\d+) of (\d+), "
        r"text (\d+) of 400",
        cut,
    )
    assert found, cut
    total, own_kept, own, text_kept = map(int, found.groups())
    assert own_kept == own and own + 400 == total and own + text_kept == 400
    pretrain_run = RUN_ID.search(pretrain).group(1)
    use_it = re.search(r"^  use it     (.*)$", pretrain, re.MULTILINE).group(1)
    assert use_it == (
        'make finetune ARGS="--config configs/downstream/smoke.yaml '
        f'--model.encoder=runs:/{pretrain_run} {" ".join(doc_data_flags())}"'
    )

    (finetune,) = summaries(process.stdout, "── finetune finished")
    assert finetune.startswith(" on a smoke encoder: a toy")
    assert "  method     elmo-scalar-pool-mlp  (smoke encoder " in finetune
    assert "(experiment 'own')" in finetune

    copied = walk(clone, use_it, env)  # the printed command, as a user copies it: the same data set
    assert copied.returncode == 0, copied.stdout[-3000:] + copied.stderr[-3000:]
    run = client.get_run(RUN_ID.search(copied.stdout).group(1))
    assert run.data.tags["dataset"] == "own" and run.data.tags["smoke"] == "true"
    assert run.data.tags["pretrain_run_id"] == pretrain_run
    print(f"\n── pretrain finished{pretrain}\n── finetune finished{finetune}")
