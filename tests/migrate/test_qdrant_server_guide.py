"""docs/qdrant-server.md (issue 27 item 7): its ``slimvec`` commands run as written (in process:
five subprocesses loading the model cost a minute), with the
server URL replaced by qdrant-client local folders (the source collection and the reduced one in
two folders: local mode locks its folder). Real MiniLM vectors of 300 bundled sentences."""
from __future__ import annotations

import json
import re
import shlex
from contextlib import chdir
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from slimvec.cli import app

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "qdrant-server.md"
URL = "http://localhost:6333"


def _commands(text: str) -> list[list[str]]:
    """``slimvec`` commands of the guide's bash blocks (continuation lines joined)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for cmd in block.replace("\\\n", " ").splitlines():
            cmd = cmd.split("  #")[0].strip()
            if cmd.startswith("slimvec "):
                out.append(shlex.split(cmd)[1:])
    return out


def test_the_qdrant_server_guide_commands_run_as_written(tmp_path, minilm_vectors, sentences):
    from qdrant_client import QdrantClient
    from qdrant_client import models as m

    n = 300
    client = QdrantClient(path=str(tmp_path / "src"))
    client.create_collection("docs", vectors_config=m.VectorParams(size=384, distance=m.Distance.COSINE))
    client.upsert("docs", [m.PointStruct(id=i, vector=minilm_vectors[i].tolist(),
                                         payload={"text": sentences[i]}) for i in range(n)])
    client.close()
    np.save(tmp_path / "queries.npy", minilm_vectors[[11, 222]])
    cmds = _commands(GUIDE.read_text(encoding="utf-8"))
    assert [c[0] for c in cmds] == ["migrate", "search", "search", "export", "export"]
    outputs = []
    for cmd in cmds:
        args = [a.replace(f"{URL}/docs", str(tmp_path / "src") + "/docs")
                .replace(URL, str(tmp_path / "dst")) for a in cmd]
        if args[0] == "search":
            if args[1] != "--vectors":  # the guide's query text -> a sentence of the corpus
                args[1] = sentences[11]
            args.append("--json")
        with chdir(tmp_path):  # the guide's relative paths (docs.slim, queries.npy ...)
            result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (args, result.output[-2000:], result.exception)
        outputs.append(result.stdout)
    text_hits = json.loads(outputs[1])
    assert text_hits[0]["hits"][0]["id"] == 11
    vector_hits = json.loads(outputs[2])
    assert [q["hits"][0]["id"] for q in vector_hits] == [11, 222]
    assert (tmp_path / "minilm-pca96").is_dir() and (tmp_path / "pca-export" / "components.npy").exists()
    dst = QdrantClient(path=str(tmp_path / "dst"))
    try:
        assert [c.name for c in dst.get_collections().collections] == ["docs_small"]
    finally:
        dst.close()
