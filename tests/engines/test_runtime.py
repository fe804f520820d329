"""Without the ``ray`` extra, ``--engine ray`` says how to install it (no traceback)."""

from __future__ import annotations

import sys

import pytest

from slimvec.errors import ConfigError, MissingDependencyError


def test_missing_ray_gives_an_install_hint(monkeypatch):
    from slimvec.engines.runtime import require_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as when absent
    with pytest.raises(MissingDependencyError, match=r"slimvec\[ray\]"):
        require_ray()


def test_bad_ray_address_is_a_config_error(monkeypatch):
    pytest.importorskip("ray")
    import ray

    from slimvec.engines.runtime import start_ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(ConfigError, match="HOST:PORT"):
        start_ray("not-an-address")


def test_glob_folder_and_file_inputs(tmp_path):
    from slimvec.engines.blocks import expand_inputs

    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.csv").write_text("text\ny\n")
    (tmp_path / "notes.bin").write_bytes(b"\0")
    assert [f.spec.path.rsplit("/", 1)[1] for f in expand_inputs(str(tmp_path))] == ["a.jsonl", "b.csv"]
    assert len(expand_inputs(str(tmp_path / "*.jsonl"))) == 1
    with pytest.raises(ConfigError, match="matches no"):
        expand_inputs(str(tmp_path / "*.parquet"))
