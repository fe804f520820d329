"""``python -m benchmarks KIND``: the measurements the suite run cannot make (issue 24 item 3).

The scripts that measured with their own loops are sub-commands of the checkout's
``python -m benchmarks`` (issue 35 item 4: they left the installed ``slimvec bench``, which runs
suites); each writes one JSON record with the machine facts. Here: ``slimvec bench`` is one
command, every table re-renders its published page from the published results, and the filtered
corpus assembled from a cache. Tiny runs of
every measuring kind (they load MiniLM, build stores, start processes) are in
test_bench_kinds_slow.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from benchmarks.cli import app as bench_app
from slimvec.cli import app

ROOT = Path(__file__).resolve().parents[2]
RUNNER = CliRunner()


def _run(*args: str):
    return RUNNER.invoke(app, list(args))


def _bench(*args: str):
    """``python -m benchmarks ARGS``."""
    return RUNNER.invoke(bench_app, list(args))


def _record(path: Path, kind: str) -> dict:
    rec = json.loads(path.read_text())
    assert rec["kind"] == kind and rec["command"].startswith("slimvec ")
    machine = rec["machine"]
    assert machine["cpus"] >= 1 and len(machine["load_average_start"]) == 3
    assert len(machine["load_average_end"]) == 3 and isinstance(machine["quiet"], bool)
    return rec["result"]


def test_bench_is_one_command_and_the_measurements_live_in_the_checkout():
    """Issue 35 item 4: at most 20 commands and sub-commands under ``slimvec bench`` (it is one)."""
    import typer

    bench = typer.main.get_command(app).commands["bench"]
    assert not hasattr(bench, "commands")
    res = _run("bench", "--help")
    assert res.exit_code == 0 and "--suite" in res.output and "--out" in res.output, res.output
    missing = _run("bench", "--suite", str(ROOT / "no-such-suite.toml"))
    assert "No suite file" in str(missing.exception)
    assert _run("bench", "table", "sweep").exit_code == 2  # a former sub-command: a usage error
    kinds = _bench("--help")
    for word in ("ingest", "ingest-ceiling", "rebuild", "sync", "service", "qdrant-compat", "sizing",
                 "scaleout", "pruning", "table", "vectors", "search-profile", "default-recipe"):
        assert word in kinds.output


def test_machine_facts_count_what_other_processes_used_not_the_run_itself():
    from slimvec.benchmarks.record import QUIET_OTHERS, MachineFacts

    facts = MachineFacts(cpus=2, load_average_start=[0.5, 1, 1])
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:  # the run's own CPU: not "other processes"
        pass
    facts.finish()
    assert facts.others_cores is not None and facts.others_cores >= 0
    assert facts.to_json()["others_cores"] == facts.others_cores
    busy = MachineFacts(cpus=2, load_average_start=[0.5, 1, 1], others_cores=QUIET_OTHERS + 0.1)
    idle = MachineFacts(cpus=2, load_average_start=[0.5, 1, 1], load_average_end=[1.9, 1, 1], others_cores=0.05)
    late = MachineFacts(cpus=2, load_average_start=[1.5, 1, 1], others_cores=0.05)
    # a one-thread run ends with the load near 1 on two cores by itself: not a reason to say busy
    assert idle.quiet and not busy.quiet and not late.quiet


def test_machine_facts_call_a_run_quiet_only_below_half_the_cores_at_both_ends(tmp_path):
    from slimvec.benchmarks.record import MachineFacts, Record, load_record, write_record

    quiet = MachineFacts(cpus=4, load_average_start=[1.0, 1, 1], load_average_end=[1.5, 1, 1])
    busy = MachineFacts(cpus=4, load_average_start=[1.0, 1, 1], load_average_end=[2.5, 1, 1])
    assert quiet.quiet and not busy.quiet
    write_record(Record("x", {"a": 1}, busy), tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["machine"]["quiet"] is False
    assert load_record(tmp_path / "r.json") == {"a": 1}


@pytest.mark.parametrize("kind, results, page", [
    ("fair-peers", ["bench-results/fair-peers-rabitq/results.json", "bench-results/fair-peers-pq/results.json"],
     "docs/benchmarks/fair-peers.md"),
    ("filtered", ["bench-results/filtered/results.json"], "docs/benchmarks/filtered.md"),
    ("filtered", ["bench-results/filtered-100k/results.json"], "docs/benchmarks/filtered-100k.md"),
    ("filtered", ["bench-results/filtered-300k/results.json"], "docs/benchmarks/filtered-300k.md"),
    ("filtered", ["bench-results/filtered-20k/results.json"], "docs/benchmarks/filtered-20k.md"),
    ("headline", [], "docs/benchmarks/headline.md"),
    ("default-recipe", [], "docs/benchmarks/default-recipe-runs.md"),
    ("ingest-ceiling", [], "docs/benchmarks/ingest-ceiling-20k.md"),
    ("realtext", [], "docs/benchmarks/realtext.md"),
    ("scale", ["bench-results"], "docs/benchmarks/scale-runs.md"),
    ("sizing", ["docs/benchmarks/sizing.json"], "docs/benchmarks/sizing.md"),
])
def test_a_table_re_renders_its_published_page(kind, results, page, tmp_path):
    """Byte-identical over the published page: the rendered part from the results, the page's
    hand-written notes (below the NOTES line, if any) kept as they were."""
    from benchmarks.pages.tables import hand_notes

    out = tmp_path / "page.md"
    out.write_text("a stale rendering\n" + hand_notes(ROOT / page), encoding="utf-8")
    res = _bench("table", kind, *[str(ROOT / r) for r in results], "--out", str(out))
    assert res.exit_code == 0, res.output
    assert out.read_text(encoding="utf-8") == (ROOT / page).read_text(encoding="utf-8")


def test_sweep_and_pruning_tables_hold_the_published_figures():
    sweep = _bench("table", "sweep", str(ROOT / "bench-results/sweep/results.json"),
                 str(ROOT / "bench-results/sweep-96-48/results.json"))
    assert sweep.exit_code == 0, sweep.output
    reducers = (ROOT / "docs/benchmarks/reducers.md").read_text()
    rows = [line for line in sweep.output.splitlines() if line.startswith("| pca |")]
    assert rows and all(line in reducers for line in rows)
    pruning = _bench("table", "pruning", str(ROOT / "bench-results/pruning/pruning.json"))
    assert pruning.exit_code == 0, pruning.output
    page = (ROOT / "docs/benchmarks/pruning.md").read_text()
    assert [line for line in pruning.output.splitlines() if line.startswith("| 10% |")][0] in page


def test_a_table_without_results_says_what_to_pass(tmp_path):
    res = _bench("table", "scale", str(tmp_path))
    assert "No scale results under" in str(res.exception)
    res = _bench("table", "nope", str(tmp_path))
    assert "Unknown table kind 'nope'" in str(res.exception) and "fair-peers" in str(res.exception)


def test_vectors_kind_assembles_the_filtered_corpus_from_cached_encodings_only(tmp_path):
    from benchmarks.corpora.sentences import filtered_vectors

    shard = tmp_path / "cache" / "fingerprint"
    shard.mkdir(parents=True)
    vecs = np.eye(6, dtype=np.float32)[[0, 1, 1, 2, 3, 4]]  # row 2 repeats row 1
    np.save(shard / "shard-0.keys.npy", np.array([b"a", b"b", b"c", b"d", b"e", b"f"]), allow_pickle=False)
    np.save(shard / "shard-0.vecs.npy", vecs, allow_pickle=False)
    assert filtered_vectors(tmp_path / "out.npy", n=4, caches=[tmp_path / "cache"]) == 4
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), np.eye(6, dtype=np.float32)[[0, 1, 2, 3]])
    res = _bench("vectors", "nope", str(tmp_path / "x.npy"))
    assert "Unknown vectors kind 'nope'" in str(res.exception)


def test_the_filtered_page_says_quiet_only_when_the_run_measured_it():
    """The page's figures carry "(not quiet)" unless the record's others_cores says quiet."""
    from benchmarks.pages.filtered_text import quiet_note
    from slimvec.benchmarks.record import QUIET_OTHERS

    assert quiet_note({"others_cores": 0.007, "cpus": 2}) == (
        "**Quiet**: other processes used 0.007 of a core during the run (2 cores).", "")
    assert quiet_note({"others_cores": QUIET_OTHERS + 0.5})[1] == " (not quiet)"
    assert quiet_note({})[0].startswith("**Not known to be quiet**")


def test_the_moved_modules_find_the_bundled_data_and_the_checkout():
    """Paths computed from ``__file__`` moved with the modules (issue 35 item 4): the slow tier's
    kinds failed with FileNotFoundError when they still pointed one folder too high or low."""
    from benchmarks.corpora import sentences, synthetic
    from benchmarks.kinds import search_profile

    assert (sentences.DATA / "sentences.jsonl").is_file() and list(synthetic.DATA.glob("*.tsv"))
    assert search_profile.ROOT == ROOT
