"""The service's creation spec goes through :class:`slimvec.buildspec.BuildSpec` (issue 24 item
1, for the service): one parser for a create request and for ``service.json``, round-tripping
like scikit-learn's ``get_params``; a ``service.json`` written by an older server (the untyped
dict) still loads, and a broken one is refused naming the file and the field. In process."""

from __future__ import annotations

import json

import numpy as np
import pytest

from slimvec.buildspec import DEFAULTS, BuildSpec
from slimvec.errors import ConfigError
from slimvec.service.indexes.spec import ServiceSpec

#: a pending index's service.json as servers before this change wrote it (the untyped dict)
OLD_SHAPE = {"reducer": "rp:4", "store": "faiss:Flat", "encoder": None, "keep_full": None,
             "fit_after": 20, "recipe": None, "dim_in": 8,
             "payload_index": {"lang": "keyword"}}


def _request(**kw):
    args = dict(recipe=None, reducer=None, store=None, keep_full=None, encoder="minilm",
                fit_after=1000, default_recipe=None)
    args.update(kw)
    return ServiceSpec.from_request(**args)


@pytest.mark.parametrize("kw", [
    {},
    {"reducer": "rp:4", "encoder": None, "fit_after": 7},
    {"recipe": "pca:8|faiss:Flat|rescore=auto,keep_full=float16"},
    {"default_recipe": "pca:16|hnsw|rescore=20,keep_full=float32", "encoder": None},
])
def test_spec_round_trips_through_service_json(kw):
    spec = _request(**kw)
    assert isinstance(spec.build, BuildSpec)
    again = ServiceSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec
    assert again.to_json() == spec.to_json()


def test_request_defaults_come_from_the_one_table():
    spec = _request(reducer="rp:4")
    assert (spec.reducer, spec.store) == ("rp:4", DEFAULTS["store"])
    assert spec.build.text_column == "text" and spec.build.id_column == "id"
    vec = _request(reducer="rp:4", encoder=None)
    assert vec.build.text_column is None and vec.build.id_column is None
    named = _request(recipe="pca:8|faiss:Flat|rescore=auto,keep_full=float16")
    assert (named.reducer, named.store, named.keep_full) == ("pca:8", "faiss:Flat", "float16")


def test_old_shape_service_json_loads(tmp_path):
    path = tmp_path / "service.json"
    path.write_text(json.dumps(OLD_SHAPE))
    spec = ServiceSpec.load(path)
    assert (spec.reducer, spec.store, spec.encoder, spec.fit_after, spec.dim_in) == (
        "rp:4", "faiss:Flat", None, 20, 8)
    assert spec.payload_index == {"lang": "keyword"}
    assert spec.build.text_column is None  # a vector-only index names no text column
    assert {k: v for k, v in spec.to_json().items() if k in OLD_SHAPE} == OLD_SHAPE


@pytest.mark.parametrize("data, field", [
    ({**OLD_SHAPE, "fit_after": "20"}, "fit_after"),
    ({**OLD_SHAPE, "dim_in": -1}, "dim_in"),
    ({**OLD_SHAPE, "reducer": 4}, "reducer"),
    ({**OLD_SHAPE, "colour": "red"}, "colour"),
    ([1, 2], "JSON object"),
])
def test_broken_service_json_names_the_file_and_the_field(tmp_path, data, field):
    path = tmp_path / "service.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        ServiceSpec.load(path)
    assert str(path) in str(err.value) and field in str(err.value), err.value


def test_pending_index_in_an_old_service_json_opens_and_fits(tmp_path):
    """A server restarted over a pending index written by the old code serves it, and the
    index is fitted from that spec once enough vectors arrive (a real FAISS store)."""
    from slimvec.service.indexes.registry import Encoders, Registry

    pending = tmp_path / ".pending" / "old"
    pending.mkdir(parents=True)
    (pending / "service.json").write_text(json.dumps(OLD_SHAPE))
    X = np.random.default_rng(3).standard_normal((30, 8)).astype(np.float32)
    reg = Registry(tmp_path, Encoders(1.0, 8))
    try:
        reg.open_all()
        served = reg.get("old")
        assert served.info()["state"] == "pending" and served.info()["fit_after"] == 20
        result, _ = served.add_vectors([{"id": i, "vector": X[i].tolist()} for i in range(30)],
                                       "t")
        assert result.accepted == 30 and not result.pending_fit
        info = served.info()
        assert info["state"] == "ready" and info["count"] == 30 and info["store"] == "faiss:Flat"
    finally:
        reg.close_all()


def test_serve_device_and_encode_batch_reach_the_encoders(tmp_path):
    """Issue 36 item 2: ``slimvec serve --device / --encode-batch`` set the document encoders'
    device and pass size (on a CPU the default pass is the ingest's 32)."""
    from slimvec.buildspec import BuildSpec
    from slimvec.service.config import ServiceConfig
    from slimvec.service.state import ServiceState

    for encode_batch, expected in ((7, 7), (None, 32)):
        st = ServiceState(ServiceConfig(root=tmp_path, device="cpu", encode_batch=encode_batch))
        try:
            enc = st.encoders.get(BuildSpec(encoder="minilm"))
            assert enc.batch_size == expected and str(enc.device) == "cpu"
        finally:
            st.encoders.close()
