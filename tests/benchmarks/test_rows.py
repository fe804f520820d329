"""The typed benchmark row: JSON round trip, legacy results files, k-aware names, report notes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slimvec.benchmarks.report import MAX_LINE, render_report
from slimvec.errors import ConfigError
from slimvec.planner.rows import LEGACY_KEYS, ROW_KEYS, Row, load_rows, metric_title, save_rows

REPO = Path(__file__).resolve().parents[2]
# six rows of bench-results/rescore/results.json as written before the typed row (commit 92a7b82);
# a copy, because the committed runs are regenerated in the new format
OLD_RESULTS = Path(__file__).parent / "data" / "legacy_results.json"


def test_old_results_file_loads_and_round_trips(tmp_path: Path) -> None:
    old = json.loads(OLD_RESULTS.read_text(encoding="utf-8"))
    assert "neighbor_recall_at_k" not in old["rows"][0]  # really a file of the old format
    rows, meta = load_rows(OLD_RESULTS)
    assert len(rows) == len(old["rows"]) and meta["command"] == old["meta"]["command"]
    for row, raw in zip(rows, old["rows"]):
        assert row.k == 10
        assert row.neighbor_recall_at_k == raw["neighbor_recall_at_10"]
        assert row.task_recall_at_k == raw["task_recall_at_10"]
        assert row.routed_recall_at_k == raw["routed_recall_at_10"]
        assert row.get("neighbor_recall_at_10") is None and "neighbor_recall_at_10" not in row  # one spelling
        assert row.reducer == raw["reducer"] and row.store == raw["store"] and row.rescore == raw["rescore"]
    # written back: one spelling, every old value kept under it
    save_rows(rows, meta, tmp_path)
    again = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    for new, raw in zip(again["rows"], old["rows"]):
        assert not any(key.endswith("_at_10") for key in new)
        assert {k: new[LEGACY_KEYS.get(k, k)] for k in raw} == raw
        assert new["k"] == 10 and set(new) == set(ROW_KEYS) | set(rows[0].extra)
    assert load_rows(tmp_path / "results.json")[0] == rows


@pytest.mark.parametrize("path", sorted((REPO / "bench-results").glob("*/results.json"))
                         + [OLD_RESULTS, Path(__file__).parent / "data" / "stsb_dev_results.json"],
                         ids=lambda p: p.parent.name if p.name == "results.json" else p.name)
def test_every_committed_results_file_reads_with_one_spelling(path: Path) -> None:
    """Issue 24 item 5: the results files on disk (written before and after the typed row, with the
    ``*_at_10`` keys, the ``*_at_k`` keys or both) load as rows whose "at k" figures are the
    ``*_at_k`` fields, equal to whatever either spelling said."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw_rows = raw["rows"] if isinstance(raw, dict) else raw
    rows, _ = load_rows(path)
    assert len(rows) == len(raw_rows) > 0
    for row, data in zip(rows, raw_rows):
        for legacy, new in LEGACY_KEYS.items():
            said = data.get(new) if data.get(new) is not None else data.get(legacy)
            assert getattr(row, new) == said, (path, legacy)
        assert not any(key.endswith("_at_10") for key in row.to_json())
    # the report of an old file titles its columns at its k
    assert "R@10" in render_report(rows[:5]) or all(r.k != 10 for r in rows[:5])


def test_a_legacy_key_in_a_row_of_another_k_is_not_read_as_that_k() -> None:
    row = Row.from_json({"reducer": "pca:8", "store": "hnsw", "k": 5, "neighbor_recall_at_10": 0.7})
    assert row.k == 5 and row.neighbor_recall_at_k is None  # an @10 figure is no @5 figure
    assert row.extra == {"neighbor_recall_at_10": 0.7}  # kept as read


def test_k_other_than_10_never_writes_an_at_10_key(tmp_path: Path) -> None:
    row = Row(dataset="d", reducer="pca:8", store="hnsw", k=20, neighbor_recall_at_k=0.5,
              extra={"note": "kept"})
    data = row.to_json()
    assert data["k"] == 20 and data["neighbor_recall_at_k"] == 0.5 and data["note"] == "kept"
    assert not any(key.endswith("_at_10") for key in data)
    assert row.get("neighbor_recall_at_10") is None  # no lie about @10
    back = Row.from_json(data)
    assert back == row
    assert metric_title("neighbor_recall_at_k", 20) == "nbr R@20"
    text = render_report([row, Row(dataset="d", reducer="none", store="hnsw", k=20, bytes_per_vector=1536.0,
                                   neighbor_recall_at_k=1.0)])
    assert "nbr R@20" in text and "@10" not in text
    with pytest.raises(ConfigError, match="field 'k' must be a positive integer"):
        Row.from_json({"reducer": "pca:8", "store": "hnsw", "k": "ten"})


def test_report_notes_are_counts_not_walls() -> None:
    """The committed dev run has 388 rows and skipped configurations: no line over MAX_LINE."""
    rows, meta = load_rows(REPO / "bench-results" / "dev" / "results.json")
    assert len(rows) > 300
    many = dict(meta, skipped=[{"dataset": "stsb", "config": f"lle:{d} → faiss", "reason":
                                f"ValueError: dimension {d} does not fit the factory " + "x" * 400}
                               for d in range(200)])
    text = render_report(rows, many)
    longest = max(text.splitlines(), key=len)
    assert len(longest) <= MAX_LINE, longest[:120]
    notes = text.split("## Notes")[1]
    assert "skipped 200×: ValueError: dimension N does not fit the factory" in notes
    assert notes.count("\n- ") < 20  # grouped, not one item per configuration
    assert "(routed 58)" in notes  # null metrics counted per kind instead of listing 58 labels
