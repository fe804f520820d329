"""Issue 23 item 10: numeric options are range-checked while the options are parsed.

Each bad value ends in exit code 2 and one line naming the option, the allowed range and the
value given; no traceback, and no work before it (``tune --min-recall 1.5`` used to run its whole
search first). The commands run in this process through ``slimvec.cli.main`` (the console
script's entry point); one case per command also runs as a real ``python -m slimvec`` process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slimvec.cli import main

PLAN = ["plan", "--docs", "1000", "--dim", "384"]
TUNE = ["tune", "--docs", "1000"]  # + --vectors FILE (the fixture)
# "{tmp}": the fixture's folder; no data (bench), a missing input (ingest) and a missing root
# (serve): had the bad number passed, each would fail fast on that instead (no server started)
BENCH = ["bench", "--out", "{tmp}/bench"]
INGEST = ["ingest", "{tmp}/missing.txt", "--index", "{tmp}/index"]
SERVE = ["serve", "--root", "{tmp}/no-root"]

#: (command, bad option and value, what the one-line message must say)
CASES = [
    (PLAN, ["--workers", "0"], ["--workers", ">= 1", "got 0"]),
    (PLAN, ["--workers", "-4"], ["--workers", ">= 1", "got -4"]),
    (PLAN, ["--cpu-rate", "-3"], ["--cpu-rate", "> 0", "got -3"]),
    (PLAN, ["--cpu-rate", "0"], ["--cpu-rate", "> 0", "got 0"]),
    (PLAN, ["--cpu-rate", "nan"], ["--cpu-rate", "> 0", "got nan"]),
    (PLAN, ["--gpus-per-worker", "-1"], ["--gpus-per-worker", ">= 0", "got -1"]),
    (PLAN, ["--node-hour-price", "inf"], ["--node-hour-price", ">= 0", "got inf"]),
    (PLAN, ["--replication", "0"], ["--replication", ">= 1", "got 0"]),
    (PLAN, ["--node-ram", "0GiB"], ["--node-ram", "'0GiB'", "positive size"]),
    (PLAN, ["--min-task-recall", "1.5"], ["--min-task-recall", "in [0, 1]", "got 1.5"]),
    (PLAN, ["--min-task-recall", "nan"], ["--min-task-recall", "in [0, 1]", "got nan"]),
    (PLAN, ["--min-task-recall", "-1"], ["--min-task-recall", "in [0, 1]", "got -1"]),
    (PLAN, ["--min-neighbor-recall", "1.5"], ["--min-neighbor-recall", "in [0, 1]", "got 1.5"]),
    (PLAN, ["--payload-bytes", "-1"], ["--payload-bytes", ">= 0", "got -1"]),
    (PLAN, ["--memory-budget", "0.1B"], ["--memory-budget", "'0.1B'", "at least 1 byte"]),
    (PLAN, ["--top", "-1"], ["--top", ">= 1", "got -1"]),
    (PLAN, ["--sample", "0"], ["--sample", ">= 1", "got 0"]),
    (["plan", "--dim", "384", "--docs"], ["0"], ["--docs", ">= 1", "got 0"]),
    (["plan", "--docs", "1000", "--dim"], ["-384"], ["--dim", ">= 1", "got -384"]),
    (TUNE, ["--min-recall", "1.5"], ["--min-recall", "in [0, 1]", "got 1.5"]),
    (TUNE, ["--min-recall", "nan"], ["--min-recall", "in [0, 1]", "got nan"]),
    (TUNE, ["--min-recall", "-1"], ["--min-recall", "in [0, 1]", "got -1"]),
    (TUNE, ["--max-p50-ms", "0"], ["--max-p50-ms", "> 0", "got 0"]),
    (TUNE, ["--ram-budget", "0B"], ["--ram-budget", "'0B'", "positive size"]),
    (TUNE, ["--queries", "0"], ["--queries", ">= 1", "got 0"]),
    (TUNE, ["--sample", "-5"], ["--sample", ">= 1", "got -5"]),
    (TUNE, ["--seed", "-1"], ["--seed", ">= 0", "got -1"]),
    (TUNE, ["--top", "0"], ["--top", ">= 1", "got 0"]),
    (TUNE, ["--search", "greedy"], ["--search", "halving, exhaustive, auto", "'greedy'"]),
    (["tune", "--min-recall", "0.9", "--docs"], ["0"], ["--docs", ">= 1", "got 0"]),
    # while there: bench, ingest, serve (search's -k and --rescore were already checked first thing)
    (BENCH, ["--k", "0"], ["--k", ">= 1", "got 0"]),
    (BENCH, ["--rescore", "4", "--rescore", "-2"], ["--rescore", ">= 1", "got -2"]),
    (BENCH, ["--kmeans", "0"], ["--kmeans", ">= 1", "got 0"]),
    (BENCH, ["--route-probes", "0"], ["--route-probes", ">= 1", "got 0"]),
    (BENCH, ["--threads", "0"], ["--threads", ">= 1", "got 0"]),
    (BENCH, ["--max-queries", "-1"], ["--max-queries", ">= 1", "got -1"]),
    (BENCH, ["--latency-queries", "0"], ["--latency-queries", ">= 1", "got 0"]),
    (BENCH, ["--fit-max", "1"], ["--fit-max", ">= 2", "got 1"]),
    (BENCH, ["--dup-threshold", "nan"], ["--dup-threshold", "finite number", "got nan"]),
    (BENCH, ["--seed", "-1"], ["--seed", ">= 0", "got -1"]),
    (INGEST, ["--batch-size", "0"], ["--batch-size", ">= 1", "got 0"]),
    (INGEST, ["--fit-sample", "-1"], ["--fit-sample", ">= 1", "got -1"]),
    (INGEST, ["--checkpoint-seconds", "nan"], ["--checkpoint-seconds", ">= 0", "got nan"]),
    (INGEST, ["--checkpoint-seconds", "-1"], ["--checkpoint-seconds", ">= 0", "got -1"]),
    (INGEST, ["--checkpoint-batches", "-1"], ["--checkpoint-batches", ">= 0", "got -1"]),
    (INGEST, ["--engine", "ray", "--workers", "0"], ["--workers", ">= 1", "got 0"]),
    (SERVE, ["--port", "70000"], ["--port", "in [1, 65535]", "got 70000"]),
    (SERVE, ["--port", "-1"], ["--port", "in [1, 65535]", "got -1"]),
    (SERVE, ["--max-batch", "0"], ["--max-batch", ">= 1", "got 0"]),
    (SERVE, ["--max-body-bytes", "0"], ["--max-body-bytes", ">= 1", "got 0"]),
    (SERVE, ["--queue-size", "0"], ["--queue-size", ">= 1", "got 0"]),
    (SERVE, ["--batch-wait-ms", "nan"], ["--batch-wait-ms", ">= 0", "got nan"]),
    (SERVE, ["--batch-wait-ms", "-1"], ["--batch-wait-ms", ">= 0", "got -1"]),
    (SERVE, ["--query-timeout", "0"], ["--query-timeout", "> 0", "got 0"]),
]


@pytest.fixture(scope="module")
def vectors(tmp_path_factory) -> Path:
    """400 vectors with structure (12 latent dimensions): enough for `tune` to search on."""
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((400, 12)) @ rng.standard_normal((12, 32))
         + 0.05 * rng.standard_normal((400, 32))).astype(np.float32)
    path = tmp_path_factory.mktemp("tune") / "v.npy"
    np.save(path, X)
    return path


def _args(command: list[str], bad: list[str], vectors: Path) -> list[str]:
    args = [a.replace("{tmp}", str(vectors.parent)) for a in command + bad]
    if command[0] == "tune":  # --out: were the value accepted, nothing lands in the working folder
        args += ["--vectors", str(vectors), "--out", str(vectors.parent / "tuned.json")]
    return args


def _run_main(args: list[str], capsys) -> tuple[int, str]:
    """Exit code and stderr of the CLI. The one-line ``error:`` comes from the option's parse
    callback, which typer runs before the command's body: no size build, measurement or search
    has started when it is printed (no wall-clock bound: timings belong in benchmarks)."""
    with pytest.raises(SystemExit) as exit_info:  # anything else (a traceback) fails the test
        main(args)
    return exit_info.value.code, capsys.readouterr().err


@pytest.mark.parametrize("command,bad,says", CASES, ids=[" ".join(c[0][:1] + c[1]) for c in CASES])
def test_bad_number_is_a_one_line_error(command, bad, says, vectors, capsys):
    code, err = _run_main(_args(command, bad, vectors), capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for text in says:
        assert text in lines[0], (text, lines[0])
    assert "Traceback" not in err


def test_tune_min_recall_above_one_fails_before_any_search(vectors, capsys):
    """The issue's case with a grid that would otherwise be built and searched: refused at once."""
    args = ["tune", "--docs", "1000", "--vectors", str(vectors), "--min-recall", "1.5", "--reducer", "pca:8",
            "--store", "hnsw", "--sample", "300", "--queries", "50", "--out", str(vectors.parent / "t.json")]
    code, err = _run_main(args, capsys)
    assert code == 2 and "--min-recall must be a finite number in [0, 1], got 1.5" in err
    assert not (vectors.parent / "t.json").exists()


@pytest.mark.parametrize("args,says", [
    (PLAN + ["--engine", "ray", "--workers", "0"], "--workers must be an integer >= 1, got 0."),
    (["tune", "--docs", "1000", "--vectors", "missing.npy", "--min-recall", "1.5"],
     "--min-recall must be a finite number in [0, 1], got 1.5."),
])
def test_bad_number_in_a_real_process(args, says, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "slimvec", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {says}"
    assert proc.stdout == ""
