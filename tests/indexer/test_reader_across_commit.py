"""A reader open while another writer commits must not change the index when it closes.

FAISS and hnswlib keep payloads in SQLite (WAL mode) and the manifest records the file's SHA-256
at each commit. The writer's rows stayed in the WAL while a reader's connection was open, and the
reader, closing last, copied them into ``payloads.sqlite``: the next open then refused the index
as corrupted (found by the service serving searches from a read-only index during a job)."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.index.folder import open_index
from slimvec.migrate import MigrateOptions, migrate


def _source(folder, lo: int, hi: int, rng):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / f"s{lo}.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(lo, hi)],
                             "vector": [rng.normal(size=32).tolist() for _ in range(lo, hi)]}), path)
    return str(path)


@pytest.mark.parametrize("store", ["hnsw", "faiss:Flat"])
def test_a_reader_open_across_a_commit_leaves_the_files_as_recorded(store, tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "idx"
    migrate(_source(tmp_path, 0, 300, rng), folder, MigrateOptions(progress=False, reducer="rp:8",
                                                                   store=store))
    reader = open_index(folder)
    assert reader.store.count() == 300
    migrate(_source(tmp_path, 300, 600, rng), folder, MigrateOptions(progress=False))  # commits
    reader.close()  # the last connection to payloads.sqlite
    with open_index(folder) as idx:  # raised PersistenceError: payloads.sqlite SHA-256 differs
        assert idx.store.count() == 600
        assert idx.payloads([idx.get(["d599"])[0]["store_id"]])[0] is not None
