"""Issue 24 item 6: stores are tested like reducers, from the registry.

Every registered store has contract specs (``tests/connectors/stores.py``), the store tests take
their lists from there, and the shared argument checks of ``upsert`` / ``search`` live once in
the base class (template methods around ``_upsert`` / ``_search``), so they hold for every store.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from slimvec.connectors import make_store, parse_store_spec, store_class, store_names
from slimvec.connectors.base import VectorStore
from slimvec.errors import DimensionMismatchError, StoreError
from tests.connectors.stores import CONTRACT_SPECS, fast_specs, store_specs

TESTS = Path(__file__).resolve().parents[1]
#: files that may spell stores out: the fixture table itself, and tables of per-store option
#: specs (each spec's options are the point, not the list of stores)
SPELLED_OUT = {"connectors/stores.py", "connectors/test_spec_ranges.py"}


def test_every_registered_store_has_a_contract_fixture():
    missing = sorted(set(store_names()) - set(CONTRACT_SPECS))
    assert not missing, (f"registered stores without contract specs: {missing}; add them to "
                         "CONTRACT_SPECS in tests/connectors/stores.py")
    assert not set(CONTRACT_SPECS) - set(store_names()), "contract specs of an unregistered store"
    for name, specs in CONTRACT_SPECS.items():
        assert specs and all(parse_store_spec(s).name == name for s in specs), (name, specs)
    assert [s.partition(":")[0] for s in store_specs()] == store_names()


def _store_lists(path: Path) -> list[tuple[int, list[str]]]:
    names = set(store_names())
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len({s.partition(":")[0].lower() for s in strings} & names) >= 2:
                found.append((node.lineno, strings))
    return found


def test_store_tests_take_their_store_lists_from_the_registry():
    bad = {}
    for folder in ("connectors", "migrate"):
        for path in sorted((TESTS / folder).glob("*.py")):
            rel = path.relative_to(TESTS).as_posix()
            if rel not in SPELLED_OUT and (lists := _store_lists(path)):
                bad[rel] = lists
    assert not bad, (f"hard-coded store lists {bad}: take them from tests/connectors/stores.py "
                     "(store_specs, variant_specs, fast_specs...) so a new store is tested")


def test_stores_implement_the_hooks_not_the_checked_entry_points():
    for name in store_names():
        klass = store_class(name)
        for method in ("upsert", "search"):
            assert getattr(klass, method) is getattr(VectorStore, method), \
                f"{klass.__name__}.{method} re-implements the shared checks: implement _{method}"


@pytest.fixture(params=fast_specs())
def opened(request, tmp_path):
    with make_store(request.param, tmp_path / "s").create(8) as store:
        yield store


def test_a_payload_per_id_or_the_batch_is_refused(opened):
    vecs = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    with pytest.raises(StoreError, match="3 ids for 2 payloads"):
        opened.upsert(np.arange(3), vecs, [{"a": 1}, {"a": 2}])
    with pytest.raises(StoreError, match=r"payload of id 1 is a list, expected a JSON object"):
        opened.upsert(np.arange(3), vecs, [{"a": 1}, [1, 2], None])
    assert opened.count() == 0  # nothing of either batch was written


def test_the_shared_checks_hold_on_every_store(opened):
    vecs = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    with pytest.raises(StoreError, match="3 ids for 2 vectors"):
        opened.upsert(np.arange(3), vecs[:2])
    with pytest.raises(DimensionMismatchError):
        opened.upsert(np.arange(3), vecs[:, :7])
    opened.upsert(np.arange(3), vecs, [{"a": 1}, None, {"a": 3}])
    assert opened.get_payloads([0, 2]) == [{"a": 1}, {"a": 3}]
    with pytest.raises(DimensionMismatchError):
        opened.search(vecs[:, :7], 2)
    assert opened.search(vecs, 0).ids.shape == (3, 0)


# ------------------------------------------------------------- store readers (migrate --from)
def test_every_store_declares_a_reader_migrate_dispatches_to():
    from slimvec.connectors import store_reader
    from slimvec.connectors.reading import VectorSource
    from slimvec.migrate.sources import SOURCE_KINDS

    for name in store_names():
        assert issubclass(store_reader(name), VectorSource), name
        assert name in SOURCE_KINDS, f"migrate --from {name}:... is not dispatched"


@pytest.fixture(params=store_specs())
def written(request, tmp_path):
    """A closed store folder of 40 points with payloads, as an index leaves it."""
    rng = np.random.default_rng(4)
    ids = np.arange(40, dtype=np.int64) * 1000 + 7
    vecs = rng.standard_normal((40, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store = make_store(request.param, tmp_path / "s").create(8, "ip")
    store.upsert(ids, vecs, [{"row": i, "lang": "en" if i % 2 else "fr"} for i in range(40)])
    store.finalize()
    store.close()
    return request.param, store, ids, vecs


def test_every_store_folder_reads_back_through_its_reader(written):
    from slimvec.connectors import store_reader
    from slimvec.migrate.sources import open_source

    spec, store, ids, vecs = written
    name = store_class(spec).name
    extra = "".join(f",{k}={store.options[k]}" for k in store_reader(name).source_options
                    if k in store.options)
    with open_source(f"{name}:{store.location}{extra}") as src:
        assert (src.count(), src.dim, src.metric) == (40, 8, "ip")
        got_ids, got_vecs, got_payloads = [], [], []
        for batch in src.batches(0, 16):
            got_ids += batch.ids.tolist()
            got_vecs.append(np.asarray(batch.vectors))
            got_payloads += batch.payloads
    order = np.argsort(got_ids)
    assert np.asarray(got_ids)[order].tolist() == ids.tolist()
    np.testing.assert_allclose(np.concatenate(got_vecs)[order], vecs, atol=1e-5)
    assert [got_payloads[i]["row"] for i in order] == list(range(40))
