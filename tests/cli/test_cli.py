import json
import os
import subprocess
import sys


def _run(*args, check=True):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "slimvec", *args], capture_output=True, text=True,
                          env=env, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:{proc.stdout}\nstderr:{proc.stderr}")
    return proc


def test_cli_end_to_end(tmp_path, sentences):
    docs = tmp_path / "docs.csv"
    with open(docs, "w", encoding="utf-8") as fh:
        fh.write("id,text\n")
        for i, s in enumerate(sentences[:400]):
            fh.write(f'{i},"{s.replace(chr(34), chr(39))}"\n')
        fh.write("bad,row,extra\n")
    index = tmp_path / "idx"
    out = _run("ingest", str(docs), "--index", str(index), "--reducer", "pca:32", "--store", "hnsw",
               "--fit-sample", "300", "--json")
    summary = json.loads(out.stdout)
    assert summary["ingested"] == 400 and summary["rejected"] == 1
    reject = json.loads((index / "rejects.jsonl").read_text().splitlines()[0])
    assert reject["line"] == 402 and "ragged" in reject["reason"]
    query = sentences[10].replace('"', "'")
    hits = json.loads(_run("search", "--index", str(index), "-k", "3", "--json", query).stdout)
    assert hits[0]["hits"][0]["text"] == query
    info = json.loads(_run("info", "--index", str(index), "--json").stdout)
    assert {k: info[k] for k in ("count", "dim_in", "dim_out", "reducer")} == {
        "count": 400, "dim_in": 384, "dim_out": 32, "reducer": "pca:32"}
    assert info["store"].startswith("hnsw") and info["bytes"] > 0


def test_cli_errors_are_one_line(tmp_path):
    proc = _run("info", "--index", str(tmp_path), check=False)
    assert proc.returncode == 2 and "is not a slimvec index" in proc.stderr
    assert "Traceback" not in proc.stderr
    docs = tmp_path / "d.txt"
    docs.write_text("hello\n")
    proc = _run("ingest", str(docs), "--index", str(tmp_path / "i"), "--reducer", "pcaa:8", check=False)
    assert proc.returncode == 2 and "Unknown reducer 'pcaa'. Known:" in proc.stderr
