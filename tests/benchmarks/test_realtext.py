"""The real-text corpus builder on small REAL excerpts of Debian's wordnet-base and dict-gcide.

The readers run on the installed package files but only their first entries (a second or two).
The packages are benchmark-only (scripts/setup.sh does not install them): without their files
these tests skip, naming the command that installs them.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.corpora.realtext import (
    CorpusPaths,
    Record,
    _Tally,
    build_corpus,
    dedupe,
    gcide_entry_texts,
    normalise,
    read_gcide,
    read_gcide_entries,
    read_jsonl,
    read_wordnet,
    sentence_problem,
    split_queries,
    wordnet_gloss_texts,
)
from slimvec.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
PATHS = CorpusPaths()
pytestmark = pytest.mark.skipif(
    bool(PATHS.missing()),
    reason="benchmark-only Debian packages absent: apt-get install wordnet-base dict-gcide")


def test_wordnet_gloss_of_a_real_synset() -> None:
    # a synset's offset is its byte offset in data.verb: 00002724 is "choke"
    with open(PATHS.wordnet_dir / "data.verb", "rb") as fh:
        fh.seek(2724)
        line = fh.readline().decode("utf-8")
    assert line.startswith("00002724 ")
    definition, examples = wordnet_gloss_texts(line)
    assert definition == "breathe with great difficulty, as when experiencing a strong emotion"
    assert examples == ["She choked with emotion when she spoke about her deceased husband"]


def test_wordnet_reader_first_synsets() -> None:
    recs = list(read_wordnet(PATHS.wordnet_dir, limit=100))
    sources = {r.source for r in recs}
    assert sources == {"wordnet:definition", "wordnet:example"}
    # 100 synsets of each of the 4 files, each with exactly one definition
    assert sum(r.source == "wordnet:definition" for r in recs) == 400
    assert not any('"' in r.text or " | " in r.text or r.text != r.text.strip() for r in recs)


def test_gcide_entry_senses_and_quotations() -> None:
    entries = list(read_gcide_entries(PATHS.gcide_dict, PATHS.gcide_index, headwords=["Abandon"]))
    assert len(entries) == 3  # the verb, and two noun entries
    texts = [t for _, e in entries for t in gcide_entry_texts(e)]
    assert ("To cast or drive out; to banish; to expel; to reject.", "definition") in texts
    # quotation kept without its --Udall attribution; source marks and Syn: lists gone
    assert ("That he might . . . abandon them from him.", "quotation") in texts
    assert ("A complete giving up to natural impulses; freedom from artificial constraint; "
            "careless freedom or ease.", "definition") in texts
    joined = " ".join(t for t, _ in texts)
    assert "1913 Webster" not in joined and "--Udall" not in joined
    assert "Syn:" not in joined and "A*ban" not in joined and "OF. abandoner" not in joined


def test_gcide_run_on_derived_forms_and_attributions_are_cut() -> None:
    # "... munificent. -- Boun"te*ous*ly, adv. -- Boun"te*ous*ness, n." and "--Cowper."
    (_, entry), = read_gcide_entries(PATHS.gcide_dict, PATHS.gcide_index, headwords=["Bounteous"])
    texts = [t for t, _ in gcide_entry_texts(entry)]
    assert texts == ["Liberal in charity; disposed to give freely; generously liberal; munificent; "
                     "beneficent; free in bestowing gifts; as, bounteous production.",
                     "But O, thou bounteous Giver of all good."]


def test_gcide_reader_first_entries_have_no_markup() -> None:
    totals: list[int] = []
    recs = list(read_gcide(PATHS.gcide_dict, PATHS.gcide_index, limit=300,
                           on_total=totals.append))
    assert totals == [300] and len(recs) > 300
    assert {r.source for r in recs} <= {"gcide:definition", "gcide:quotation"}
    kept = [r for r in recs if sentence_problem(r.text) is None]
    assert len(kept) > 150
    for r in kept:
        assert not any(c in r.text for c in "{}[]\\"), r
        assert not re.search(r"--[A-Z]|\w\*\w", r.text), r  # no --Author, no syl*la*bles


def test_sentence_rule_and_dedupe_on_real_texts() -> None:
    real = [r for r in read_wordnet(PATHS.wordnet_dir, limit=50)
            if sentence_problem(r.text) is None][:20]
    assert len(real) == 20
    variants = [Record("  " + real[0].text.upper() + " .", "variant"),
                Record(real[1].text.replace(" ", "   ") + ";", "variant"),
                Record('"' + real[2].text + '"', "variant")]
    fragments = [Record("a cake", "fragment"), Record("word " * 70, "fragment"),
                 Record("see {Abandon} here now", "fragment")]
    tally = _Tally()
    kept = dedupe(real + variants + fragments, tally)
    assert [r.text for r in kept] == [r.text for r in real]
    assert tally.dropped["variant"] == {"duplicate": 3}
    assert tally.dropped["fragment"] == {"too_short": 1, "too_long": 1, "markup": 1}
    assert len({normalise(r.text) for r in kept}) == len(kept)


def test_build_small_corpus_dedups_and_holds_out_queries(tmp_path: Path) -> None:
    m = build_corpus(tmp_path / "a", n_queries=40, seed=3, limit=300, paths=PATHS,
                     install=False, show_progress=False)
    corpus = list(read_jsonl(tmp_path / "a" / "corpus.jsonl"))
    queries = list(read_jsonl(tmp_path / "a" / "queries.jsonl"))
    assert len(queries) == 40 and len(corpus) == m["corpus"]["rows"] > 500
    assert set(corpus[0]) == {"id", "text", "source"}
    keys = [normalise(r["text"]) for r in corpus]
    assert len(set(keys)) == len(keys)
    assert not {normalise(q["text"]) for q in queries} & set(keys)
    assert len({r["id"] for r in corpus + queries}) == len(corpus) + len(queries)
    for name in ("corpus", "queries"):
        data = (tmp_path / "a" / f"{name}.jsonl").read_bytes()
        assert m[name]["sha256"] == hashlib.sha256(data).hexdigest()
        assert sum(m[name]["per_source"].values()) == m[name]["rows"]
    assert json.loads((tmp_path / "a" / "manifest.json").read_text()) == m
    assert m["seed"] == 3 and set(m["packages"]) == {"wordnet-base", "dict-gcide"}
    dropped = sum(sum(v.values()) for v in m["dropped_per_source"].values())
    assert sum(m["read_per_source"].values()) == dropped + len(corpus) + len(queries)
    # every dropped text is in rejects.jsonl with its reason, and none of them is in the corpus
    rejects = [json.loads(line) for line in (tmp_path / "a" / "rejects.jsonl").open()]
    assert len(rejects) == dropped == m["rejects"]["rows"] > 0
    assert {r["reason"] for r in rejects} <= {"too_short", "too_long", "markup", "duplicate"}
    assert all(sentence_problem(r["text"]) == r["reason"] for r in rejects
               if r["reason"] != "duplicate")
    assert all(normalise(r["text"]) in set(keys) | {normalise(q["text"]) for q in queries}
               for r in rejects if r["reason"] == "duplicate")
    # reproducible: same seed, same bytes; another seed draws other queries
    m2 = build_corpus(tmp_path / "b", n_queries=40, seed=3, limit=300, paths=PATHS,
                      install=False, show_progress=False)
    assert (m2["corpus"]["sha256"], m2["queries"]["sha256"]) == (m["corpus"]["sha256"],
                                                                 m["queries"]["sha256"])
    # another seed draws other queries from the same unique sentences
    rows = [Record(r["text"], r["source"]) for r in corpus + queries]
    assert split_queries(rows, 40, 3)[1] != split_queries(rows, 40, 4)[1]


def test_too_many_queries_is_a_clear_error() -> None:
    recs = [Record(f"sentence number {i} is long enough", "x") for i in range(5)]
    with pytest.raises(ConfigError, match=r"asked for 5, there are 5.*smaller --queries"):
        split_queries(recs, 5, 0)


def test_missing_package_files_name_the_file_and_the_fix(tmp_path: Path) -> None:
    paths = CorpusPaths(wordnet_dir=tmp_path, gcide_dict=PATHS.gcide_dict,
                        gcide_index=PATHS.gcide_index)
    with pytest.raises(ConfigError, match=r"data\.noun.*apt-get install wordnet-base dict-gcide"):
        build_corpus(tmp_path / "out", paths=paths, install=False, show_progress=False)
    assert not (tmp_path / "out").exists()


def test_bad_gcide_index_row_names_file_and_line(tmp_path: Path) -> None:
    index = tmp_path / "gcide.index"
    index.write_text("abandon\tI79\t2i\nbroken line without tabs\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"gcide\.index line 2: expected headword<TAB>offset"):
        list(read_gcide_entries(PATHS.gcide_dict, index))


def test_script_writes_the_corpus(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_real_corpus.py"),
                           "--out", str(out), "--limit", "100", "--queries", "10",
                           "--no-install"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["queries"]["rows"] == 10
    assert sorted(p.name for p in out.iterdir()) == ["corpus.jsonl", "manifest.json",
                                                     "queries.jsonl", "rejects.jsonl"]
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_real_corpus.py"),
                          "--out", str(tmp_path / "x"), "--limit", "5", "--queries", "100000",
                          "--no-install"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "smaller --queries" in bad.stderr
