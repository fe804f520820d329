"""Issue 13 layering: model loading has one home (slimvec.models) that the encoder and pruning
both use; pruning does not import the indexer, and neither imports the other's private names;
transformers' "Loading weights" bars do not reach stderr."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

SLIMVEC = Path(__file__).resolve().parents[2] / "slimvec"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import in a file, lazy ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return out


def test_pruning_does_not_import_the_indexer_and_models_imports_neither():
    for path in sorted((SLIMVEC / "pruning").glob("*.py")):
        bad = [m for m, _ in _imports(path) if m.startswith("slimvec.indexer")]
        assert not bad, f"{path.name} imports {bad}: model loading belongs in slimvec.models"
    bad = [m for m, _ in _imports(SLIMVEC / "models.py")
           if m.startswith(("slimvec.indexer", "slimvec.pruning"))]
    assert not bad


def test_encoder_and_pruning_import_no_private_name_of_each_other():
    files = [SLIMVEC / "encoder.py", SLIMVEC / "models.py",
             *sorted((SLIMVEC / "pruning").glob("*.py"))]
    for path in files:
        for module, names in _imports(path):
            if module.startswith(("slimvec.encoder", "slimvec.indexer", "slimvec.pruning", "slimvec.models")):
                own_package = module.startswith("slimvec.pruning") and path.parent.name == "pruning"
                private = [n for n in names if n.startswith("_")]
                assert own_package or not private, f"{path.name} imports {private} from {module}"


def test_loading_the_encoder_draws_no_loading_bars(tmp_path):
    err = tmp_path / "stderr.txt"
    code = ("from slimvec.encoder import Encoder; from slimvec.pruning.sparsecse import "
            "load_source_model; Encoder(); load_source_model('minilm')")
    with open(err, "w") as fh:
        subprocess.run([sys.executable, "-c", code], stderr=fh, check=True, timeout=240,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    text = err.read_text()
    assert "Loading weights" not in text and "it/s" not in text, text
