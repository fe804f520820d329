"""Every store parameter is range-checked when the spec is parsed (issue 23, A3).

``hnsw:M=0`` used to be accepted and then kill the process with a segmentation fault at the first
write; ``faiss:IVF100000000,PQ64`` ended in ``bad_alloc``; ``faiss:HNSW1`` aborted inside FAISS.
Here each parameter family is refused by :func:`canonical_store_spec` (what ``slimvec ingest``,
``migrate``, recipes and ``PUT /indexes/NAME`` call first) with a :class:`ConfigError` naming the
parameter, the allowed range and the value. Nothing is built: parsing must stay cheap.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from slimvec.connectors import canonical_store_spec, make_store, store_dim_problem, store_min_train_vectors
from slimvec.errors import ConfigError
from slimvec.reducers import make_reducer

#: spec -> fragments the error must contain (the parameter, the allowed range, the value)
BAD_STORE_SPECS = [
    # hnswlib
    ("hnsw:M=0", ["M=0", "2 to 512"]),
    ("hnsw:M=-5", ["M=-5", "2 to 512"]),
    ("hnsw:M=1", ["M=1", "2 to 512"]),
    ("hnsw:M=100000", ["M=100000", "2 to 512"]),
    ("hnsw:M=abc", ["M='abc'", "whole number"]),
    ("hnsw:M=1.5", ["M=1.5", "whole number"]),
    ("hnsw:M=true", ["M=True", "whole number"]),
    ("hnsw:ef=0", ["ef=0", "1 to"]),
    ("hnsw:ef_construction=0", ["ef_construction=0", "1 to"]),
    ("hnsw:threads=-3", ["threads=-3", "0 to"]),
    ("hnsw:max_elements=10", ["max_elements", "Accepted"]),
    # FAISS factory strings
    ("faiss:IVF100000000,PQ64", ["IVF100000000", "nlist", "1 to 1048576"]),
    ("faiss:IVF0,Flat", ["IVF0", "nlist", "1 to 1048576"]),
    ("faiss:IMI2x16,Flat", ["IMI2x16", "2^32"]),
    ("faiss:HNSW0", ["HNSW0", "M", "2 to 512"]),
    ("faiss:HNSW1,Flat", ["HNSW1", "M", "2 to 512"]),
    ("faiss:IVF64_HNSW0,Flat", ["HNSW0", "2 to 512"]),
    ("faiss:PQ0", ["PQ0", "m", "1 to"]),
    ("faiss:PQ16x0", ["PQ16x0", "nbits", "1 to 16"]),
    ("faiss:IVF16,PQ16x20", ["PQ16x20", "nbits", "1 to 16"]),
    ("faiss:OPQ0,PQ16", ["OPQ0", "1 to"]),
    ("faiss:SQ3", ["SQ3", "index_factory"]),
    ("faiss:Flt", ["Flt", "index_factory"]),
    ("faiss:HNSW32,ef=0", ["ef=0", "1 to"]),
    ("faiss:IVF16,Flat,nprobe=0", ["nprobe=0", "1 to"]),
    ("faiss:IVF16,Flat,nprobe=-4", ["nprobe=-4", "1 to"]),
    ("faiss:train_size=0", ["train_size=0", "1 to"]),
    ("faiss:IVF1024,Flat,train_size=100", ["train_size=100", "1024"]),
    ("faiss:gpu=maybe", ["gpu='maybe'", "true or false"]),
    # Qdrant Edge
    ("qdrant-edge:m=-1", ["m=-1", "0 to 512"]),
    ("qdrant-edge:m=100000", ["m=100000", "0 to 512"]),
    ("qdrant-edge:ef_construct=0", ["ef_construct=0", "4 to"]),
    ("qdrant-edge:ef=0", ["ef=0", "1 to"]),
    ("qdrant-edge:quant=sq8,oversampling=0.5", ["oversampling=0.5", "1 to"]),
    ("qdrant-edge:oversampling=nan", ["oversampling=nan", "1 to"]),
    ("qdrant-edge:full_dim=-1", ["full_dim=-1", "0 to 65536"]),
    ("qdrant-edge:rescore=maybe", ["rescore='maybe'", "true or false"]),
    ("qdrant-edge:exact=2", ["exact=2", "true or false"]),
    ("qdrant-edge:quant=sq7", ["sq7", "Known"]),
    ("qdrant-edge:memory=warm", ["warm", "default"]),
    # Qdrant (qdrant-client)
    ("qdrant::memory:,batch=0", ["batch=0", "1 to"]),
    ("qdrant::memory:,retries=0", ["retries=0", "1 to"]),
    ("qdrant::memory:,timeout=-1", ["timeout=-1", "to"]),
    ("qdrant::memory:,parallel=0", ["parallel=0", "1 to"]),
    ("qdrant::memory:,shard_number=-1", ["shard_number=-1", "0 to"]),
    ("qdrant::memory:,ef=0", ["ef=0", "1 to"]),
    ("qdrant::memory:,oversampling=0", ["oversampling=0", "1 to"]),
    ("qdrant::memory:,collection=", ["collection", "non-empty"]),
    ("qdrant::memory:,quant=bq9", ["bq9", "Known"]),
    ("qdrant::memory:,quant=tq2", ["quant=tq2", "qdrant-edge"]),
]


@pytest.mark.parametrize("spec,needles", BAD_STORE_SPECS, ids=[s for s, _ in BAD_STORE_SPECS])
def test_bad_store_parameter_is_refused_at_parse(spec, needles):
    with pytest.raises(ConfigError) as info:  # not a segfault, bad_alloc or FAISS abort
        canonical_store_spec(spec)
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


GOOD_STORE_SPECS = [
    "hnsw", "hnsw:M=2", "hnsw:M=16,ef=64", "hnsw:M=512,ef_construction=1,threads=0",
    "faiss", "faiss:Flat", "faiss:HNSW32,SQ8", "faiss:SQfp16", "faiss:SQ4", "faiss:HNSW2",
    "faiss:IVF1024,PQ32,nprobe=32,train_size=100000", "faiss:IVF64,PQ16x4,train_size=100000",
    "faiss:OPQ48,PQ48np", "faiss:PQ4np", "faiss:IVF8,PQ1,nprobe=8,polysemous=true",
    "faiss:IVF4096_HNSW32,Flat", "faiss:PCA64,IVF16,PQ16", "faiss:OPQ16_64,IVF256,PQ16x4fs",
    "faiss:IVF1048576,Flat,train_size=50000000", "faiss:IMI2x8,Flat", "faiss:PQ16x16,train_size=70000",
    "qdrant-edge", "qdrant-edge:m=0", "qdrant-edge:quant=sq8,memory=cold,oversampling=1",
    "qdrant-edge:ef_construct=4,ef=1,rescore=false,exact=true", "qdrant-edge:full_dim=384",
    "qdrant::memory:", "qdrant:http://127.0.0.1:9/c,shard_number=6,replication_factor=2,"
    "write_consistency_factor=2,parallel=4,retries=5,timeout=30",
]


@pytest.mark.parametrize("spec", GOOD_STORE_SPECS)
def test_good_store_specs_still_parse(spec):
    assert canonical_store_spec(spec)


def test_dimension_problems_are_found_without_allocating():
    # PQ m must divide the dimension (FAISS's own check, now reached without allocating)
    assert "PQ7" in store_dim_problem("faiss:PQ7", 32)
    assert store_dim_problem("faiss:PQ8", 32) is None
    # a million lists of 4,096-d centroids: 16 GiB before a single vector is stored
    problem = store_dim_problem("faiss:IVF1048576,Flat,train_size=50000000", 4096)  # no 16 GiB
    assert problem and "GiB" in problem and "IVF" in problem
    assert "GiB" in store_dim_problem("faiss:PQ16x16,train_size=70000", 16384)
    assert store_dim_problem("faiss:PQ16x16,train_size=70000", 1024) is None
    assert "65536" in store_dim_problem("qdrant-edge", 70000)


def test_min_train_vectors_follows_nbits_and_lists():
    assert store_min_train_vectors("faiss:IVF64,Flat") == 64
    assert store_min_train_vectors("faiss:PQ16") == 256
    assert store_min_train_vectors("faiss:PQ16x10") == 1024
    assert store_min_train_vectors("faiss:IMI2x8,Flat") == 256
    assert store_min_train_vectors("faiss:HNSW32") == 0


def test_faiss_refuses_more_lists_than_training_vectors_and_keeps_the_buffer(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 8)).astype(np.float32)
    store = make_store("faiss:IVF64,Flat", tmp_path / "s").create(8)
    store.upsert(np.arange(20), X[:20])
    with pytest.raises(ConfigError) as info:
        store.finalize()
    message = str(info.value)
    assert "IVF64" in message and "64" in message and "20" in message
    store.upsert(np.arange(20, 100), X[20:])  # nothing was lost: the buffer trains once it is enough
    store.finalize()
    assert store.count() == 100
    assert store.search(X[:3], 1).ids[:, 0].tolist() == [0, 1, 2]
    store.close()


def test_faiss_create_refuses_a_dimension_the_factory_cannot_hold(tmp_path):
    with pytest.raises(ConfigError, match="GiB"):
        make_store("faiss:IVF1048576,Flat,train_size=50000000", tmp_path / "s").create(4096)
    assert not (tmp_path / "s" / "index.faiss").exists()


BAD_REDUCER_SPECS = [
    ("pca:0", ["n_components=0", "1 to 65536"]),
    ("pca:-3", ["n_components=-3", "1 to 65536"]),
    ("rp:100000", ["n_components=100000", "1 to 65536"]),
    ("rp:n_components=0", ["n_components=0"]),
]


@pytest.mark.parametrize("spec,needles", BAD_REDUCER_SPECS, ids=[s for s, _ in BAD_REDUCER_SPECS])
def test_bad_reducer_size_is_refused_at_parse(spec, needles):
    with pytest.raises(ConfigError) as info:
        make_reducer(spec)
    for needle in needles:
        assert needle in str(info.value)


def test_cli_refuses_bad_store_spec_in_one_line(tmp_path):
    """``hnsw:M=0`` used to end ``slimvec migrate`` in a segmentation fault (exit -11); the other
    parameter families go through the same parse (the table above), so one subprocess suffices."""
    store, needle = "hnsw:M=0", "M=0"
    rng = np.random.default_rng(1)
    src = tmp_path / "v.npy"
    np.save(src, rng.standard_normal((64, 16)).astype(np.float32))
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "slimvec", "migrate", "--from", str(src), "--index",
                           str(tmp_path / "idx"), "--reducer", "rp:8", "--store", store],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_builder_refuses_a_store_that_cannot_hold_the_reducer_output_before_the_fit(tmp_path):
    """``rp:8`` into ``faiss:PQ3``: refused before the reducer is fitted and saved (it used to be
    refused by FAISS at store creation, after the fit, leaving a reducer in a half index)."""
    from slimvec.migrate.run import MigrateOptions, migrate

    src = tmp_path / "v.npy"
    np.save(src, np.random.default_rng(3).standard_normal((64, 16)).astype(np.float32))
    with pytest.raises(ConfigError, match="PQ3.*8-d"):
        migrate(str(src), tmp_path / "idx", MigrateOptions(reducer="rp:8", store="faiss:PQ3"))
    assert not (tmp_path / "idx" / "reducer").exists()
