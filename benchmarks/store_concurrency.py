"""``python -m benchmarks.store_concurrency``: start several tiny pretrain runs at once on a fresh
SQLite store, again and again, and count how many FINISHED (issue 8: before the store lock, 3 of
4 runs started together on a new store crashed). Needs ``MRPC_DIR``.

Prints one line per repetition and a summary; ``--json PATH`` also writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from harness.store import REPO_ROOT

SMOKE = REPO_ROOT / "configs" / "pretrain" / "smoke.yaml"
TINY = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1",
        "--data.max_sentences=100", "--samples_every_n_steps=0", "--trainer.enable_progress_bar=false"]


def repetition(folder: Path, runs: int) -> dict:
    """``runs`` pretrain commands started together on a new store in ``folder``.

    Returns:
        exit codes, statuses of the runs in the store, and the wall time.
    """
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    processes = [subprocess.Popen([sys.executable, "-m", "pretrain", "fit", "--config", str(SMOKE), *TINY,
                                   f"--trainer.default_root_dir={folder / str(number)}"],
                                  cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for number in range(runs)]
    errors = [process.communicate()[1] for process in processes]
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    found = client.search_runs(experiments, run_view_type=ViewType.ALL) if experiments else []
    return {"exit_codes": [process.returncode for process in processes],
            "statuses": sorted(run.info.status for run in found), "seconds": time.perf_counter() - started,
            "last_error": next((error.strip().splitlines()[-1] for error, process in zip(errors, processes)
                                if process.returncode and error.strip()), "")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--runs", type=int, default=4, help="runs started together per repetition")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    results = []
    for number in range(1, args.repetitions + 1):
        with tempfile.TemporaryDirectory(prefix="store-concurrency-") as scratch:
            result = repetition(Path(scratch), args.runs)
        results.append(result)
        finished = result["statuses"].count("FINISHED")
        print(f"  [{number:>2}/{args.repetitions}] {finished}/{args.runs} FINISHED in {result['seconds']:.0f} s"
              + (f"  ({result['last_error'][:120]})" if result["last_error"] else ""), flush=True)
    failed = sum(args.runs - result["statuses"].count("FINISHED") for result in results)
    print(f"{args.repetitions} repetitions × {args.runs} runs on a fresh store: {failed} not FINISHED")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"repetitions": args.repetitions, "runs": args.runs, "not_finished": failed,
                                         "results": results}, indent=2))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
