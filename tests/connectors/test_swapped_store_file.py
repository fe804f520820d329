"""Issue 12 B8: a store file of another dimension swapped into an index must be refused on open,
whatever the manifest's progress state says (a 'running' state skips the recorded checksums, and
hnswlib loads a file of any dimension and returns garbage)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.errors import StoreError


@pytest.mark.parametrize("spec,name", [("hnsw", "index.hnsw"), ("faiss:Flat", "index.faiss")])
def test_a_store_file_of_another_dimension_is_refused(tmp_path, spec, name):
    rng = np.random.default_rng(0)
    for dim, folder in ((8, tmp_path / "a"), (16, tmp_path / "b")):
        store = make_store(spec, folder).create(dim)
        store.upsert(np.arange(50), rng.standard_normal((50, dim)).astype(np.float32))
        store.finalize()
        store.close()
    shutil.copy(tmp_path / "b" / name, tmp_path / "a" / name)
    with pytest.raises(StoreError, match="holds vectors of 16 dimensions, but its store records 8"):
        make_store(spec, tmp_path / "a").open()
    make_store(spec, tmp_path / "b").open().close()  # an intact store still opens
