"""Issue 27, "Done when": the README's CLI quick-start (the ``## Usage`` bash block and the
``Python:`` snippet after it) run as written, in order, as a user would.

The service half (the ``## Serve`` block, curl) is ``tests/service/test_quickstart.py``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from slimvec.recipe import DEFAULT_RECIPE, parse_recipe
from tests.conftest import README, bundled_sentences, readme_commands, readme_section

log = logging.getLogger(__name__)


#: rows of docs.jsonl: more than the README's pca:96 recipe needs to be fitted, few enough to be fast
N_JSONL = 200
#: rows of docs.parquet: other sentences, so the second file adds documents
N_PARQUET = 50
N_QUERIES = 10


def _python_snippet() -> str:
    """The ``python`` block that follows ``Python:`` in the usage section."""
    section = readme_section("Usage")
    return re.search(r"Python:\s*```python\n(.*?)```", section, re.S).group(1)


def _expand_optional(command: str) -> list[str]:
    """``cmd [--json]`` -> ``["cmd", "cmd --json"]``: an optional-syntax bracket is run both
    without and with its option (brackets inside quotes are left alone)."""
    code = command.split(" #")[0]
    m = re.search(r" \[(--[\w-]+)\]", code)
    if m is None:
        return [command]
    without = command.replace(m.group(0), "", 1)
    with_ = command.replace(m.group(0), " " + m.group(1), 1)
    return _expand_optional(without) + _expand_optional(with_)


def _write_inputs(folder: Path) -> list[str]:
    """docs.jsonl (id, text), docs.parquet (doc_id, body: the columns the README names) and
    queries.txt (one query a line), from bundled real sentences; returns the queries."""
    sentences = bundled_sentences(N_JSONL + N_PARQUET)
    (folder / "docs.jsonl").write_text("".join(
        json.dumps({"id": f"d{i}", "text": s}) + "\n" for i, s in enumerate(sentences[:N_JSONL])),
        "utf-8")
    rest = sentences[N_JSONL:]
    pq.write_table(pa.table({"doc_id": [f"p{i}" for i in range(len(rest))], "body": rest}),
                   folder / "docs.parquet")
    queries = sentences[1:N_JSONL:N_JSONL // N_QUERIES][:N_QUERIES]
    (folder / "queries.txt").write_text("".join(q + "\n" for q in queries), "utf-8")
    return queries


def _flat(text: str) -> str:
    """Rich wraps long lines at the console width; compare messages on one line."""
    return " ".join(text.split())


def test_readme_usage_block_runs_as_written(tmp_path):
    """Every command of the ``## Usage`` block runs as written, in order, in a temp folder, and
    exits 0. The only substitutions:

    - the inputs it names (docs.jsonl, docs.parquet with the ``body`` / ``doc_id`` columns it
      names, queries.txt) are written into the temp folder from bundled real sentences
      (200 + 50 rows: enough for the default recipe's pca:96);
    - ``. .venv/bin/activate`` sources the activate script of the environment running the tests
      (the temp folder has no ``.venv``); the line itself is otherwise unchanged;
    - an optional-syntax bracket (``[--json]``) is run without and then with its option.

    ``my-index`` stays ``my-index`` (relative to the temp folder). Comment lines are skipped.
    Then the ``Python:`` snippet runs as written against the index the block built.
    """
    commands = readme_commands("Usage")
    assert commands[0] == ". .venv/bin/activate", commands
    activate = Path(sys.executable).parent / "activate"
    assert activate.is_file(), f"the tests run outside a virtual environment ({sys.executable})"
    activate_line = commands[0].replace(".venv/bin/activate", str(activate))
    queries = _write_inputs(tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200",
           # the worktree's slimvec, whatever the venv has installed
           "PYTHONPATH": os.pathsep.join([str(README.parent), os.environ.get("PYTHONPATH", "")])}
    runs: list[tuple[str, str, float]] = []
    for command in (c for cmd in commands[1:] for c in _expand_optional(cmd)):
        t0 = time.perf_counter()
        proc = subprocess.run(["bash", "-c", f"set -euo pipefail\n{activate_line}\n{command}"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"README command failed: {command}\n{out}"
        # --json output is parsed: stdout alone; otherwise what the user sees (progress and
        # notices go to stderr)
        runs.append((command, proc.stdout if "--json" in command else out,
                     time.perf_counter() - t0))
    timings = ", ".join(f"{c.split(' --')[0][:30]} {s:.1f}s" for c, _, s in runs)
    log.info("README usage block: %d commands, %.1f s: %s", len(runs), sum(s for *_, s in runs),
             timings)

    def output(prefix: str, nth: int = 0) -> str:
        found = [o for c, o, _ in runs if c.startswith(prefix)]
        assert len(found) > nth, f"no README command starts with {prefix!r}: {commands}"
        return found[nth]

    manifest = json.loads((tmp_path / "my-index" / "manifest.json").read_text())
    default = str(parse_recipe(DEFAULT_RECIPE))  # none|faiss:HNSW16,SQ4,...|rescore=auto,target=0.99,...

    # 1. the default recipe, named in the summary
    first = _flat(output("slimvec ingest docs.jsonl --index my-index"))
    assert f"{N_JSONL} documents ingested" in first and f"recipe: {default}" in first, first
    # 2. --reducer/--store on the existing index: it keeps its recipe (rescoring included) and
    #    ingest says so; the same file again adds nothing
    second = _flat(output("slimvec ingest docs.jsonl --index my-index --reducer"))
    assert f"keeps its recipe {default}" in second, second
    assert "nothing to do" in second, second
    # 3. the parquet adds its documents under the columns named
    third = _flat(output("slimvec ingest docs.parquet"))
    assert f"{N_PARQUET} documents ingested" in third, third
    assert f"{N_JSONL + N_PARQUET} in the index" in third, third
    assert manifest["recipe"] == default and manifest["count"] == N_JSONL + N_PARQUET
    # 4. the whole path as one recipe, into its own folder
    recipe_cmd = next(c for c, _, _ in runs if "--recipe" in c)
    folder = re.search(r"--index (\S+)", recipe_cmd).group(1)
    sq8 = json.loads((tmp_path / folder / "manifest.json").read_text())
    assert sq8["recipe"].startswith("pca:96|faiss:HNSW32,SQ8|rescore=auto"), sq8
    assert sq8["count"] == N_JSONL and sq8["rescore"]["depth"] >= 1, sq8

    # search prints its hits (a table of ids and texts), re-ranked from the full vectors
    table = output("slimvec search", 0)
    shown = re.findall(r"│\s*\d+\s*│\s*([-\d.]+)\s*│\s*([dp]\d+)\s*│", table)
    assert len(shown) == 10, table
    assert "re-ranked" in _flat(table), table
    hits = json.loads(output("slimvec search", 1))
    assert len(hits) == 1 and len(hits[0]["hits"]) == 10, hits
    first_hit = hits[0]["hits"][0]
    # "id" is the user's id, the one the table shows; "store_id" the store's (issue 52)
    assert set(first_hit) >= {"id", "store_id", "score", "text", "payload"}, first_hit
    assert first_hit["id"] in (first_hit["payload"].get("id"), first_hit["payload"].get("doc_id"))
    assert isinstance(first_hit["store_id"], int) and first_hit["store_id"] != first_hit["id"]
    scores = [h["score"] for h in hits[0]["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert [h["id"] for h in hits[0]["hits"]] == [s for _, s in shown]
    assert "re-ranked" in hits[0]["score"] and hits[0]["rescore"] >= 1, hits[0]
    assert set(hits[0]["timings_ms"]) >= {"encode_ms", "search_ms", "total_ms"}, hits[0]

    # info prints the recipe; --json has count, recipe, rescore depth + recall, the side file
    info_text = _flat(output("slimvec info", 0))
    assert f"recipe: {default}" in info_text and f"count: {N_JSONL + N_PARQUET}" in info_text
    info = json.loads(output("slimvec info", 1))
    assert info["count"] == N_JSONL + N_PARQUET and info["recipe"] == default
    assert info["full_dtype"] == "float16" and info["full_file"]
    assert info["rescore"] == f"x{info['rescore_depth']}" and info["rescore_recall"] > 0

    # calibrate re-measures the depth on the given queries and records it
    cal = _flat(output("slimvec calibrate"))
    assert "calibrated my-index: rescoring depth" in cal and f"{len(queries)} queries" in cal, cal
    after = json.loads((tmp_path / "my-index" / "manifest.json").read_text())
    assert after["rescore"]["n_queries"] == len(queries), after["rescore"]

    # the Python snippet, as written, against the index built above
    snippet = _python_snippet()
    assert 'slimvec.open("my-index")' in snippet, snippet
    probe = snippet + (
        "\nimport json\n"
        "print(json.dumps({'shape': list(res.ids.shape), 'scores': res.scores[0].tolist(),"
        " 'payloads': idx.payloads(res.ids[0])}, default=str))\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["shape"] == [1, 10] and got["scores"] == sorted(got["scores"], reverse=True)
    assert len(got["payloads"]) == 10 and all(p and p.get("text") for p in got["payloads"]), got
    assert any("guitar" in p["text"] for p in got["payloads"][:3]), got["payloads"][:3]
