"""A target that fills up mid-ingest fails with a clear message, not a traceback, and resumes.

A full disk is simulated with a file-size limit on the ingest subprocess (``RLIMIT_FSIZE``, with
``SIGXFSZ`` ignored so a write past the limit fails with EFBIG "File too large" instead of killing
the process): a real write error from the kernel, on the real store files. (The read-only case is
in test_traps.py; it is skipped when the tests run as root, which ignores permissions.)
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess

from slimvec.index.folder import open_index
from tests.reliability.killtrial import ingest_cmd, make_corpus

LIMIT = 64 * 1024  # bytes any one file may grow to: the reducer fits, the store payloads do not


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def test_a_full_target_fails_with_a_clear_message_and_the_same_command_resumes(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    rows = make_corpus(corpus, n=200)
    # bad rows too: rejects.jsonl must be cut back to the last commit, each reported once
    with open(corpus, "a", encoding="utf-8") as fh:
        for i in range(600):
            fh.write(json.dumps({"id": f"bad{i}", "text": " " * 400}) + "\n")
    index = tmp_path / "idx"
    cmd = ingest_cmd(corpus, index, "hnsw")
    cmd[cmd.index("--fit-sample") + 1] = "100"
    cmd[cmd.index("--reducer") + 1] = "rp:16"  # fits in no time (a PCA eigh is seconds here)
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", COLUMNS="200")
    full = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300,
                          preexec_fn=_limit_file_size)
    assert full.returncode == 2, full.stderr[-2000:]
    message = " ".join(full.stderr.split())
    assert "Traceback" not in full.stderr
    assert f"error: The store of {index} could not write" in message or \
        f"error: Cannot write the index {index}" in message, message[-600:]
    assert "disk is not full" in message and "rerun the same command to resume" in message

    resumed = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming at row" in " ".join(resumed.stderr.split())
    assert json.loads(resumed.stdout)["resumed_from"] > 0  # the first run committed, then filled up
    with open_index(index) as idx:
        assert idx.store.count() == len(rows)
    rejects = (index / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rejects) == 600  # each bad row reported once across the two runs
    assert len({json.loads(r)["row"] for r in rejects}) == 600
