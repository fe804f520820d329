import json

import numpy as np
import pytest

from slimvec.encoder import Encoder
from slimvec.errors import PersistenceError
from slimvec.pruning.persist import model_bytes, save_pruned_model
from slimvec.pruning.prune import PruningPlan, prune_model


def _pruned(minilm):
    plan = PruningPlan(
        heads=[list(range(12)), [0, 2, 5], list(range(1, 12)), list(range(12)), [3], list(range(12))],
        neurons=[list(range(0, 1536, 2)), list(range(1536)), list(range(700)),
                 list(range(1536)), list(range(5, 1536)), list(range(1000))],
    )
    prune_model(minilm, plan)
    return minilm


def test_pruned_model_reloads_through_encoder_and_encodes_identically(minilm, texts, tmp_path):
    full_bytes = model_bytes(minilm)
    model = _pruned(minilm)
    expected = model.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    out = save_pruned_model(model, tmp_path / "pruned", info={"note": "test"})
    names = {p.name for p in out.iterdir()}
    assert {"slimvec_pruned.json", "model.safetensors", "config.json", "tokenizer.json"} <= names
    assert not any(n.endswith((".bin", ".pt", ".pkl")) for n in names)
    cfg = json.loads((out / "slimvec_pruned.json").read_text())
    assert cfg["heads_per_layer"] == [12, 3, 11, 12, 1, 12]
    assert cfg["intermediate_sizes"] == [768, 1536, 700, 1536, 1531, 1000]
    assert cfg["info"] == {"note": "test"} and cfg["normalize"] is True

    enc = Encoder(out, device="cpu")
    got = enc.encode(texts)
    assert got.shape == (len(texts), 384) and enc.dim == 384
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert model_bytes(enc.model) == model_bytes(model) < full_bytes
    assert enc.max_seq_length == model.max_seq_length


def test_tampered_weights_or_config_are_refused(minilm, tmp_path):
    out = save_pruned_model(_pruned(minilm), tmp_path / "pruned")
    cfg_path = out / "config.json"
    hf = json.loads(cfg_path.read_text())
    hf["auto_map"] = {"AutoModel": "evil.Model"}
    cfg_path.write_text(json.dumps(hf))
    with pytest.raises(PersistenceError, match="auto_map"):
        Encoder(out, device="cpu")

    out = save_pruned_model(minilm, tmp_path / "pruned2")
    with open(out / "model.safetensors", "r+b") as fh:
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    with pytest.raises(PersistenceError, match="SHA-256 mismatch"):
        Encoder(out, device="cpu")
