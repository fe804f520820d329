"""Tampered index files: planted pickles, checksum mismatches, dimension mismatches."""
import os
import pickle
import shutil

import numpy as np
import pytest

from slimvec.errors import DimensionMismatchError, PersistenceError, SlimvecError
from slimvec.index.folder import open_index
from slimvec.indexer.pipeline import IngestOptions, ingest


@pytest.fixture(scope="module")
def built(tmp_path_factory, sentences):
    root = tmp_path_factory.mktemp("traps")
    corpus = root / "docs.txt"
    corpus.write_text("\n".join(s.replace("\n", " ") for s in sentences[:300]) + "\n", encoding="utf-8")
    index = root / "idx"
    ingest(corpus, index, IngestOptions(reducer="pca:16", store="hnsw", fit_sample=200,
                                        progress=False))
    return index


@pytest.fixture
def index(built, tmp_path):
    dst = tmp_path / "idx"
    shutil.copytree(built, dst)
    return dst


class _Trap:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_is_never_unpickled(index, tmp_path):
    marker = tmp_path / "PWNED"
    payload = pickle.dumps(_Trap(str(marker)))
    (index / "reducer" / "state.safetensors").write_bytes(payload)
    (index / "reducer" / "state.pt").write_bytes(payload)  # a torch-style file next to it
    with pytest.raises(PersistenceError, match="state.safetensors"):
        open_index(index)
    assert not marker.exists()


def test_a_changed_store_file_fails_its_checksum_naming_the_file(index):
    files = sorted(f for f in (index / "store").rglob("*") if f.is_file()
                   and not f.name.startswith("."))
    assert files
    target = max(files, key=lambda f: f.stat().st_size)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(PersistenceError, match=target.name):
        open_index(index)


def test_query_vectors_of_the_wrong_dimension_name_both_numbers(index):
    with open_index(index) as idx:
        with pytest.raises(DimensionMismatchError) as err:
            idx.search(np.zeros((2, 100), dtype=np.float32), k=3)
    assert "384" in str(err.value) and "100" in str(err.value)


def test_a_read_only_target_dir_is_a_clear_error(tmp_path, sentences):
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    ro = tmp_path / "ro"
    ro.mkdir()
    corpus = tmp_path / "d.txt"
    corpus.write_text("\n".join(sentences[:50]) + "\n", encoding="utf-8")
    ro.chmod(0o500)
    try:
        with pytest.raises(SlimvecError, match=str(ro)):
            ingest(corpus, ro / "idx", IngestOptions(reducer="pca:8", store="hnsw",
                                                     fit_sample=40, progress=False))
    finally:
        ro.chmod(0o700)
