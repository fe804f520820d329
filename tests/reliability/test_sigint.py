"""Ctrl-C (SIGINT) during a real ``slimvec ingest`` subprocess: graceful stop, then resume.

The signal is sent once the progress record in the index manifest shows a first committed batch;
small batches committed one by one make the run last several seconds without long texts.
"""
from __future__ import annotations

import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from slimvec.index.folder import open_index
from tests.reliability.killtrial import ingest_cmd, make_corpus


def _committed_rows(index: Path) -> int:
    """``next_row`` of the durable progress record (0 while nothing is committed)."""
    try:
        manifest = json.loads((index / "manifest.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return 0
    return int((manifest.get("progress") or {}).get("next_row", 0))


def _flat(text: str) -> str:
    """Rich wraps long lines at the console width; compare messages on one line."""
    return " ".join(text.split())


def test_sigint_stops_at_a_batch_boundary_and_the_printed_command_resumes(tmp_path):
    corpus = tmp_path / "my corpus.jsonl"  # a space: the printed command must quote it
    rows = make_corpus(corpus, n=500)
    # columns other than the defaults: a resume command that drops --text-column / --id-column /
    # --payload-index fails ("column(s) 'text' not found"), issue 52
    corpus.write_text("".join(json.dumps({"body": r["text"], "key": r["id"], "src": r["source"]})
                              + "\n" for r in rows), encoding="utf-8")
    index = tmp_path / "idx"
    cmd = ingest_cmd(corpus, index, "hnsw") + ["--text-column", "body", "--id-column", "key",
                                                "--payload-index", "src:keyword"]
    cmd[cmd.index("--batch-size") + 1] = "5"  # 100 batches: the run outlives the signal
    cmd[cmd.index("--fit-sample") + 1] = "100"
    cmd[cmd.index("--reducer") + 1] = "rp:16"  # fits in no time (a PCA eigh is seconds here)
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", COLUMNS="200")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + 120
        while _committed_rows(index) == 0 and proc.poll() is None:
            assert time.monotonic() < deadline, "no batch committed within 120 s"
            time.sleep(0.02)
        assert proc.poll() is None, "ingest ended before the first commit was seen"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-2000:]
    summary = json.loads(out)
    assert summary["interrupted"] is True
    stopped_at = summary["next_row"]
    assert 0 < stopped_at < len(rows)  # stopped mid-run, not at the end
    message = _flat(err)
    assert f"committed up to row {stopped_at:,}" in message
    printed = re.search(r"Resume with the same command: (slimvec ingest .*)$", err, re.M)
    assert printed, err[-2000:]
    again = shlex.split(printed.group(1))
    assert again[:3] == ["slimvec", "ingest", str(corpus)]
    for option in ("--text-column body", "--id-column key", "--payload-index src:keyword",
                   "--reducer rp:16", "--batch-size 5", "--json"):
        assert option in " ".join(again), f"{option} missing from {printed.group(1)}"
    assert "Traceback" not in err

    # the committed state: the index loads, holds exactly the committed rows, record agrees
    assert _committed_rows(index) == stopped_at
    with open_index(index) as idx:
        assert idx.store.count() == stopped_at
        first = idx.search([rows[0]["text"]], k=1)
        assert idx.payloads([int(first.ids[0, 0])])[0]["text"] == rows[0]["text"]

    # the printed command, as a user would paste it, finishes the index
    resumed = subprocess.run([sys.executable, "-m", *again], capture_output=True, text=True,
                             env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming at row {stopped_at:,} of" in _flat(resumed.stderr)
    again = json.loads(resumed.stdout)
    assert again["resumed_from"] == stopped_at and not again["interrupted"]
    unique = {r["id"]: r["text"] for r in rows}
    with open_index(index) as idx:
        assert idx.info()["payload_indexes"] == {"src": "keyword"}
        assert idx.store.count() == len(unique)  # nothing lost, nothing duplicated
        picks = random.Random(0).sample(list(unique.values()), 20) + [rows[-1]["text"]]
        res = idx.search(picks, k=5)
        for qi, text in enumerate(picks):
            texts = [(p or {}).get("text") for p in idx.payloads([int(i) for i in res.ids[qi]])]
            assert text in texts, f"{text!r} not found after the resume"


def test_sigint_while_the_encoder_works_on_long_texts_exits_within_seconds(tmp_path):
    """Issue 52: Ctrl-C on a Parquet ingest took 52 s to exit: the writer waited for the encoder
    to finish its whole window (2,048 texts; long ones encode at tens a second on a CPU). Here the
    first window is short texts, committed batch by batch; the signal comes while the writer waits
    for the second window, of long texts, which the old code encoded to its end before stopping.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from slimvec.indexer.ingest_stream import ENCODE_WINDOW

    words = " ".join(r["text"] for r in make_corpus(tmp_path / "words.jsonl", n=400)).split()
    short = [f"note {i}" for i in range(ENCODE_WINDOW)]
    long = [" ".join(words[(i * 7) % 2000:(i * 7) % 2000 + 220]) + f" {i}" for i in range(1500)]
    corpus = tmp_path / "tickets.parquet"
    pq.write_table(pa.table({"id": [f"t{i}" for i in range(len(short) + len(long))],
                             "text": short + long}), corpus, row_group_size=1000)
    index = tmp_path / "idx"
    cmd = [sys.executable, "-m", "slimvec", "ingest", str(corpus), "--index", str(index),
           "--reducer", "rp:16", "--store", "hnsw", "--fit-sample", "32", "--batch-size", "32",
           "--checkpoint-batches", "1", "--threads", "1", "--json"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", COLUMNS="200")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + 180
        while _committed_rows(index) < ENCODE_WINDOW and proc.poll() is None:
            assert time.monotonic() < deadline, "the short window was not committed in 180 s"
            time.sleep(0.05)
        assert proc.poll() is None, "ingest ended before the long texts"
        time.sleep(0.5)  # the writer now waits for the long window
        signalled = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=180)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-2000:]
    # the old code encoded the 1,500 long texts first: 45 s and more on a quiet 2-core machine;
    # now one forward pass (32 texts), the commit and the interpreter's exit: 8.6 s measured at a
    # load average of 12 on 2 cores, 4 s of it the exit's garbage collection
    assert took < 30, f"exited {took:.1f} s after Ctrl-C"
    summary = json.loads(out)
    assert summary["interrupted"] and ENCODE_WINDOW <= summary["next_row"] < len(short) + len(long)
    assert _committed_rows(index) == summary["next_row"]  # what was written is committed
    with open_index(index) as idx:
        assert idx.store.count() == summary["next_row"]
    assert "Resume with the same command: slimvec ingest" in _flat(err) and "Traceback" not in err
