"""The checks ``--engine ray`` runs on a joined cluster before any work, on the session's runtime
(one node; tests/engines/test_multinode.py runs them across three)."""

from __future__ import annotations

import time

import pytest

from slimvec.engines.preflight import CAPACITY_ENV, NodeTimes, capacity_wait, check_nodes_see, wait_for_capacity
from slimvec.errors import ConfigError


def test_every_node_stats_the_paths_and_a_missing_one_is_named_with_the_node(ray_runtime, tmp_path):
    seen = tmp_path / "docs.jsonl"
    seen.write_text("{}\n")
    assert check_nodes_see([str(seen), str(tmp_path)]) == 1
    missing = tmp_path / "nowhere" / "docs.jsonl"
    with pytest.raises(ConfigError) as err:
        check_nodes_see([str(seen), str(missing)])
    text = str(err.value)
    node = ray_runtime.nodes()[0]["NodeManagerAddress"]  # as the cluster advertises it
    assert f"Ray node {node} (node id" in text and f"cannot see {missing}" in text
    assert "No such file" in text and "shared" in text and str(seen) not in text


def test_no_room_for_an_actor_is_an_error_after_the_wait(ray_runtime):
    told: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        wait_for_capacity(1000.0, 0.0, 0.5, "127.0.0.1:6379", told.append, poll=0.1)
    assert 0.4 <= time.monotonic() - t0 < 10
    text = str(err.value)
    assert "needs 1000 CPU" in text and "2 CPU in all" in text and CAPACITY_ENV in text
    assert len(told) == 1 and "waiting up to 0.5 s" in told[0]
    assert wait_for_capacity(1.0, 0.0, 5.0, "here") < 5.0  # room: no wait, no error


def test_capacity_wait_reads_the_environment(monkeypatch):
    monkeypatch.delenv(CAPACITY_ENV, raising=False)
    assert capacity_wait() == 300.0
    monkeypatch.setenv(CAPACITY_ENV, "12.5")
    assert capacity_wait() == 12.5 and capacity_wait("0") == 0.0
    for bad in ("soon", "-1", "nan"):
        with pytest.raises(ConfigError, match=f"{CAPACITY_ENV}='{bad}': expected seconds"):
            capacity_wait(bad)


def test_node_times_add_up_per_node():
    t = NodeTimes()
    t.encoded("10.0.0.2", 8, 0.25)
    t.encoded("10.0.0.2", 4, 0.5)
    t.encoded("10.0.0.3", 8, 1.0)
    t.wrote("10.0.0.1", 0.125)
    assert t.encode_seconds == 1.75
    assert t.to_json() == {
        "10.0.0.1": {"blocks": 0, "documents": 0, "encode_seconds": 0.0, "write_seconds": 0.125},
        "10.0.0.2": {"blocks": 2, "documents": 12, "encode_seconds": 0.75, "write_seconds": 0.0},
        "10.0.0.3": {"blocks": 1, "documents": 8, "encode_seconds": 1.0, "write_seconds": 0.0}}
