"""A real English corpus of >= 300,000 sentences, built reproducibly from Debian packages.

Sources (read in this order; the first occurrence of a normalised text wins):

- ``wordnet-base`` (``/usr/share/wordnet/data.{noun,verb,adj,adv}``): every synset's gloss gives
  one definition (the text before the first quoted example) and its quoted examples.
- ``dict-gcide`` (``/usr/share/dictd/gcide.dict.dz`` + ``gcide.index``): the Collaborative
  International Dictionary of English. ``.dz`` is dictzip, a gzip file with random-access chunks,
  so :mod:`gzip` reads it whole; the index gives each entry's offset and length in dictd's base64.
  Each entry gives its numbered senses (definitions) and its indented quotations (attribution
  ``--Author.`` dropped); headword lines, pronunciations, etymologies, ``[1913 Webster]`` source
  marks, ``[Obs.]``-style notes and ``Syn:`` lists are dropped.

Sentence rule (:func:`sentence_problem`): after collapsing whitespace a text is kept when it has
at least ``MIN_WORDS`` (4) words and ``MIN_CHARS`` (20) characters, at most ``MAX_WORDS`` (64)
words and ``MAX_CHARS`` (400) characters, contains a letter, and has no leftover markup (``{``,
``}``, ``[``, ``]``, ``\\``, ``|``, ``syl*la*ble`` marks, ``--Author``) and no ``?`` standing
alone (GCIDE's mark for a Greek or Hebrew word it cannot show). Shorter ones are fragments
(``"a cake"``), longer ones are usage essays.

Deduplication uses :func:`normalise` (NFKC, casefold, whitespace collapsed, surrounding quotes and
final punctuation stripped). Queries are a fixed seeded sample of the unique texts, removed from
the corpus, so no query's normalised text is in the corpus.

Outputs (in ``--out``, default ``~/.cache/slimvec-corpus``): ``corpus.jsonl`` and
``queries.jsonl`` (one ``{"id", "text", "source"}`` per line), ``rejects.jsonl`` (every dropped
text with its ``source`` and ``reason``: ``too_short``, ``too_long``, ``markup``, ``duplicate``)
and ``manifest.json`` (counts per source, drops per reason, package versions, seed, rule,
SHA-256 of the files, seconds).

Encoding is a separate step (not done here). A later run encodes the texts through the resumable
encoding cache, which keys each text by its hash, so an interrupted run resumes where it stopped::

    from slimvec.benchmarks.encoding_cache import EncodingCache, default_cache_dir
    from slimvec.encoder import Encoder
    enc = Encoder("minilm")
    texts = [row["text"] for row in read_jsonl(out / "corpus.jsonl")]
    X = EncodingCache(default_cache_dir(), enc.fingerprint).encode(enc, texts, chunk=4096)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import time
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError, PersistenceError

__all__ = [
    "CorpusPaths", "Record", "build_corpus", "default_out_dir", "ensure_packages", "normalise",
    "gcide_entry_texts", "read_gcide", "read_gcide_entries", "read_jsonl", "read_wordnet",
    "sentence_problem", "wordnet_gloss_texts", "dedupe", "split_queries",
]

log = logging.getLogger(__name__)

MIN_WORDS, MIN_CHARS, MAX_WORDS, MAX_CHARS = 4, 20, 64, 400
SENTENCE_RULE = (f"{MIN_WORDS}..{MAX_WORDS} words and {MIN_CHARS}..{MAX_CHARS} characters after "
                 "collapsing whitespace; a letter; no leftover markup ({ } [ ] \\ | "
                 "syl*la*ble --Author) and no lone '?'")
PACKAGES = ("wordnet-base", "dict-gcide")
WORDNET_POS = ("noun", "verb", "adj", "adv")


@dataclass(frozen=True)
class CorpusPaths:
    """Where the Debian packages put the files the readers open."""

    wordnet_dir: Path = Path("/usr/share/wordnet")
    gcide_dict: Path = Path("/usr/share/dictd/gcide.dict.dz")
    gcide_index: Path = Path("/usr/share/dictd/gcide.index")

    def missing(self) -> list[Path]:
        """Files the readers need that are absent."""
        need = [self.wordnet_dir / f"data.{p}" for p in WORDNET_POS]
        need += [self.gcide_dict, self.gcide_index]
        return [p for p in need if not p.is_file()]


@dataclass(frozen=True)
class Record:
    """One text with where it came from (``source`` e.g. ``wordnet:example``)."""

    text: str
    source: str


def default_out_dir() -> Path:
    """``~/.cache/slimvec-corpus`` (outside any git checkout)."""
    return Path.home() / ".cache" / "slimvec-corpus"


# ---------------------------------------------------------------- text rules

_WS = re.compile(r"\s+")
_EDGE = re.compile(r"^[\s\"'`“”‘’(]+|[\s\"'`“”‘’).;:,!?]+$")


def normalise(text: str) -> str:
    """Key for deduplication: NFKC, casefold, whitespace collapsed, edge quotes/punctuation off."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return _EDGE.sub("", _WS.sub(" ", t)).strip()


def sentence_problem(text: str) -> str | None:
    """Why ``text`` is not kept as a sentence (``too_short``, ``too_long``, ``markup``), or None."""
    words = len(text.split())
    if words < MIN_WORDS or len(text) < MIN_CHARS or not any(c.isalpha() for c in text):
        return "too_short"
    if words > MAX_WORDS or len(text) > MAX_CHARS:
        return "too_long"
    if (any(c in text for c in "{}[]\\|") or re.search(r"(^|\s)\?(\s|[,;.]|$)", text)
            or re.search(r"\w\*\w|--[A-Z]", text)):  # GCIDE syllable marks, attributions
        return "markup"
    return None


def _clean(text: str) -> str:
    return _WS.sub(" ", text).strip()


# ---------------------------------------------------------------- WordNet

_QUOTED = re.compile(r'"([^"]*)"')


def wordnet_gloss_texts(line: str) -> tuple[str, list[str]]:
    """Definition and quoted examples of one ``data.*`` synset line.

    Parameters
    ----------
    line : str
        A synset line: ``offset lex_filenum ss_type ... | gloss``.

    Returns
    -------
    (str, list of str)
        The definition (text before the first quote, trailing ``;`` removed) and the examples.
    """
    _, sep, gloss = line.partition(" | ")
    if not sep:
        return "", []
    gloss = gloss.strip()
    head = gloss.split('"', 1)[0]
    definition = _clean(head).rstrip(";: ").strip()
    examples = [_clean(m) for m in _QUOTED.findall(gloss) if _clean(m)]
    return definition, examples


def read_wordnet(wordnet_dir: Path, *, limit: int | None = None,
                 progress: Any = None) -> Iterator[Record]:
    """Definitions and examples of every synset in ``data.noun/verb/adj/adv``.

    Parameters
    ----------
    wordnet_dir : Path
        Folder of WordNet's database files (``/usr/share/wordnet``).
    limit : int, optional
        Synsets read per file at most (tests read a few hundred).
    progress : callable, optional
        Called with the number of synsets read after each file chunk.
    """
    for pos in WORDNET_POS:
        path = Path(wordnet_dir) / f"data.{pos}"
        try:
            fh = path.open(encoding="utf-8", errors="strict")
        except OSError as exc:
            raise PersistenceError(f"Cannot read WordNet file {path}: {exc}. Expected the "
                                   "wordnet-base package's data files; install it with "
                                   "apt-get install wordnet-base.") from exc
        with fh:
            n = 0
            for lineno, line in enumerate(fh, 1):
                if line.startswith("  "):  # licence header
                    continue
                if " | " not in line:
                    raise ConfigError(f"{path} line {lineno}: expected a synset line with a "
                                      f"' | ' gloss, got {line[:80]!r}. Reinstall wordnet-base.")
                definition, examples = wordnet_gloss_texts(line)
                if definition:
                    yield Record(definition, "wordnet:definition")
                for ex in examples:
                    yield Record(ex, "wordnet:example")
                n += 1
                if progress is not None and n % 1000 == 0:
                    progress(1000)
                if limit is not None and n >= limit:
                    break
            if progress is not None:
                progress(n % 1000)


# ---------------------------------------------------------------- GCIDE

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_VALUE = {c: i for i, c in enumerate(_B64)}
_B64_NUM = re.compile(r"[A-Za-z0-9+/]+\Z")


def _dict_b64(s: str) -> int:
    value = 0
    for c in s:
        value = value * 64 + _B64_VALUE[c]
    return value


def read_gcide_entries(dict_path: Path, index_path: Path, *, limit: int | None = None,
                       headwords: Iterable[str] | None = None,
                       on_total: Callable[[int], None] | None = None) -> Iterator[tuple[str, str]]:
    """``(headword, entry text)`` of each distinct GCIDE entry, in file order.

    Parameters
    ----------
    dict_path : Path
        ``gcide.dict.dz`` (dictzip: gzip-compatible, read whole with :mod:`gzip`).
    index_path : Path
        ``gcide.index``: ``headword<TAB>offset<TAB>length`` with dictd's base64 numbers.
    limit : int, optional
        Entries at most (after skipping the ``00-database-*`` headers).
    headwords : iterable of str, optional
        Only entries indexed under these headwords (exact, case-sensitive).
    on_total : callable, optional
        Called once with the number of entries to come (for a progress bar's total).
    """
    wanted = set(headwords) if headwords is not None else None
    spans: dict[tuple[int, int], str] = {}
    try:
        with open(index_path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 3 or not _B64_NUM.match(parts[1]) or not _B64_NUM.match(parts[2]):
                    raise ConfigError(f"{index_path} line {lineno}: expected headword<TAB>offset"
                                      f"<TAB>length (dictd base64), got {line[:80]!r}. "
                                      "Reinstall dict-gcide.")
                word = parts[0]
                if word.startswith("00-") or (wanted is not None and word not in wanted):
                    continue
                spans.setdefault((_dict_b64(parts[1]), _dict_b64(parts[2])), word)
    except OSError as exc:
        raise PersistenceError(f"Cannot read the GCIDE index {index_path}: {exc}. Install it "
                               "with apt-get install dict-gcide.") from exc
    order = sorted(spans)
    if limit is not None:
        order = order[:limit]
    if on_total is not None:
        on_total(len(order))
    if not order:
        return
    end = max(o + n for o, n in order)
    try:
        with gzip.open(dict_path, "rb") as fh:
            data = fh.read(end)
    except (OSError, EOFError, zlib.error) as exc:
        raise PersistenceError(f"Cannot read the GCIDE dictionary {dict_path}: {exc}. Expected a "
                               "dictzip (gzip) file; reinstall dict-gcide.") from exc
    for o, n in order:
        if o + n > len(data):
            raise ConfigError(f"{index_path}: entry {spans[(o, n)]!r} ends at byte {o + n}, "
                              f"past the end of {dict_path} ({len(data)} bytes). Reinstall "
                              "dict-gcide.")
        yield spans[(o, n)], data[o:o + n].decode("utf-8", errors="replace")


_SENSE = re.compile(r"^\s*(?:\d+\.|\([a-z]\))\s+")
_ENTITY = {"[ae]": "ae", "[AE]": "Ae", "[oe]": "oe", "[OE]": "Oe", "[eacute]": "e",
           "[egrave]": "e", "[ecir]": "e", "[ccedil]": "c"}
_ENTITY_RE = re.compile("|".join(re.escape(k) for k in _ENTITY))
#: "--Shak." / "--I. Taylor." attributions (to the next quote or the end); "-- " is a dash
_ATTRIB = re.compile(r"\s*--(?=[A-Z(])[^\"]*?(?=\s+\"|$)|\s--\s*$")
#: run-on derived forms after a sense: "-- Boun\"te*ous*ly, adv." (syllable-marked headwords)
_DERIVED = re.compile(r"\s+-{1,2}\s+\S*[\"*`]\S*.*$")
_LABEL = re.compile(r"^(?:\([A-Z][^)]{0,40}\)\s*)+")
_MARK_LINE = re.compile(r"^\s*\[[^\]]*\]\s*$")


def _strip_brackets(text: str) -> str:
    out, depth = [], 0
    for c in text:
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def gcide_entry_texts(entry: str) -> list[tuple[str, str]]:
    """``(text, kind)`` of one GCIDE entry: kind ``definition`` or ``quotation``.

    The headword line (and a bracketed etymology continuing it or on the lines after it) is
    skipped; the rest is split at blank lines, source-mark lines (``[1913 Webster]``) and sense
    numbers; ``Syn:`` lists are dropped; brackets, braces and ``--Author`` attributions are removed.
    Texts are returned cleaned but not yet filtered by :func:`sentence_problem`.
    """
    lines = _ENTITY_RE.sub(lambda m: _ENTITY[m.group(0)], entry).split("\n")
    # skip the header: the first line, then lines while an etymology bracket is open or starts
    i, depth = 1, lines[0].count("[") - lines[0].count("]")
    while i < len(lines) and (depth > 0 or lines[i].lstrip().startswith("[")):
        depth += lines[i].count("[") - lines[i].count("]")
        i += 1
    chunks: list[tuple[list[str], int]] = []  # lines, indentation of the first line
    current: list[str] = []
    indent = 0
    for line in lines[i:]:
        if not line.strip() or _MARK_LINE.match(line) or _SENSE.match(line):
            if current:
                chunks.append((current, indent))
            current = []
            if not line.strip() or _MARK_LINE.match(line):
                continue
            line = _SENSE.sub("", line)
            indent = 3
        elif not current:
            indent = len(line) - len(line.lstrip())
        current.append(line)
    if current:
        chunks.append((current, indent))
    texts: list[tuple[str, str]] = []
    for chunk, ind in chunks:
        text = _clean(" ".join(chunk))
        if re.match(r"^(Syn|Syn\.|Stress|Where|See)\s*:", text):  # synonym lists, not prose
            continue
        text = re.sub(r"^(Usage|Note):\s*", "", text)
        kind = "quotation" if ind >= 8 else "definition"
        text = _strip_brackets(text).replace("{", "").replace("}", "")
        text = _clean(_ATTRIB.sub("", _DERIVED.sub("", _clean(text))))
        text = _LABEL.sub("", text).strip()
        if text:
            texts.append((text, kind))
    return texts


def read_gcide(dict_path: Path, index_path: Path, *, limit: int | None = None,
               progress: Any = None,
               on_total: Callable[[int], None] | None = None) -> Iterator[Record]:
    """Definitions and quotations of every GCIDE entry (see :func:`gcide_entry_texts`).

    ``progress`` is called with the entries read since its last call, ``on_total`` once with the
    number of entries (see :func:`read_gcide_entries`).
    """
    n = 0
    for _, entry in read_gcide_entries(dict_path, index_path, limit=limit, on_total=on_total):
        for text, kind in gcide_entry_texts(entry):
            yield Record(text, f"gcide:{kind}")
        n += 1
        if progress is not None and n % 1000 == 0:
            progress(1000)
    if progress is not None:
        progress(n % 1000)


# ---------------------------------------------------------------- packages

def ensure_packages(paths: CorpusPaths, *, install: bool = True) -> dict[str, str]:
    """Install ``wordnet-base`` and ``dict-gcide`` when their files are missing; their versions.

    Raises
    ------
    ConfigError
        Files still missing (not root, no apt-get, or ``install=False``), naming the command to run.
    """
    missing = paths.missing()
    if missing and install and shutil.which("apt-get"):
        prefix = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
        if prefix is not None:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            cmd = prefix + ["apt-get", "install", "-y", "-q", *PACKAGES]
            log.warning("installing %s (their files are missing: %s)", " ".join(PACKAGES),
                        ", ".join(map(str, missing)))
            if subprocess.run(cmd, env=env, check=False).returncode != 0:
                subprocess.run(prefix + ["apt-get", "update", "-q"], env=env, check=False)
                subprocess.run(cmd, env=env, check=False)
            missing = paths.missing()
    if missing:
        raise ConfigError(f"The real-text corpus reads {', '.join(map(str, missing))}, which "
                          f"{'is' if len(missing) == 1 else 'are'} missing. Expected the Debian "
                          f"packages {' and '.join(PACKAGES)}; run `sudo apt-get install "
                          f"{' '.join(PACKAGES)}` and try again.")
    versions: dict[str, str] = {}
    for pkg in PACKAGES:
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                                 text=True, check=False)
            versions[pkg] = out.stdout.strip() or "unknown"
        except OSError:
            versions[pkg] = "unknown"
    return versions


# ---------------------------------------------------------------- building

@dataclass
class _Tally:
    read: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    rejects: list[tuple[Record, str]] | None = None  # kept when a rejects file is wanted

    def drop(self, rec: Record, reason: str) -> None:
        d = self.dropped.setdefault(rec.source, {})
        d[reason] = d.get(reason, 0) + 1
        if self.rejects is not None:
            self.rejects.append((rec, reason))


def dedupe(records: Iterable[Record], tally: _Tally | None = None) -> list[Record]:
    """Sentences of ``records`` (see :func:`sentence_problem`), first of each normalised text.

    Whitespace is collapsed in the kept text; dropped rows are counted in ``tally`` per source
    and reason (``too_short``, ``too_long``, ``markup``, ``duplicate``).
    """
    seen: set[str] = set()
    kept: list[Record] = []
    for rec in records:
        text = _clean(rec.text)
        if tally is not None:
            tally.read[rec.source] = tally.read.get(rec.source, 0) + 1
        problem = sentence_problem(text)
        key = normalise(text) if problem is None else ""
        if problem is None and key in seen:
            problem = "duplicate"
        if problem is not None:
            if tally is not None:
                tally.drop(Record(text, rec.source), problem)
            continue
        seen.add(key)
        kept.append(Record(text, rec.source))
    return kept


def split_queries(records: list[Record], n_queries: int, seed: int) -> tuple[list[Record],
                                                                             list[Record]]:
    """Corpus and held-out queries: ``n_queries`` rows drawn with ``seed``, removed from the corpus.

    ``records`` must be deduplicated (:func:`dedupe`), so no query's normalised text remains in
    the corpus. Both keep the input order.
    """
    if not 0 <= n_queries < len(records):
        raise ConfigError(f"Expected fewer held-out queries than sentences: asked for "
                          f"{n_queries}, there are {len(records)}. Pass a smaller --queries "
                          "(or read more entries).")
    rng = np.random.default_rng(seed)
    chosen = np.zeros(len(records), dtype=bool)
    chosen[rng.choice(len(records), size=n_queries, replace=False)] = True
    corpus = [r for r, c in zip(records, chosen) if not c]
    queries = [r for r, c in zip(records, chosen) if c]
    return corpus, queries


def _write_jsonl(path: Path, rows: list[Record], prefix: str) -> str:
    digest = hashlib.sha256()
    tmp = path.with_name(path.name + ".tmp")
    width = max(7, len(str(len(rows))))
    with tmp.open("wb") as fh:
        for i, rec in enumerate(rows):
            line = json.dumps({"id": f"{prefix}{i:0{width}d}", "text": rec.text,
                               "source": rec.source}, ensure_ascii=False).encode("utf-8") + b"\n"
            digest.update(line)
            fh.write(line)
    os.replace(tmp, path)
    return digest.hexdigest()


def _write_rejects(path: Path, rejects: list[tuple[Record, str]]) -> str:
    digest = hashlib.sha256()
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        for rec, reason in rejects:
            line = json.dumps({"text": rec.text, "source": rec.source, "reason": reason},
                              ensure_ascii=False).encode("utf-8") + b"\n"
            digest.update(line)
            fh.write(line)
    os.replace(tmp, path)
    return digest.hexdigest()


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a ``corpus.jsonl`` / ``queries.jsonl`` written by :func:`build_corpus`."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path} line {lineno}: expected a JSON object with id, text "
                                  f"and source, got {line[:80]!r} ({exc}). Rebuild the corpus "
                                  "with scripts/make_real_corpus.py.") from exc
            yield row


def _count(rows: list[Record]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r.source] = out.get(r.source, 0) + 1
    return dict(sorted(out.items()))


def build_corpus(out: Path | None = None, *, n_queries: int = 2000, seed: int = 0,
                 limit: int | None = None, paths: CorpusPaths | None = None,
                 install: bool = True, show_progress: bool = True,
                 console: Any = None) -> dict[str, Any]:
    """Read the sources, deduplicate, hold out queries and write the corpus folder.

    Parameters
    ----------
    out : Path, optional
        Output folder [default: :func:`default_out_dir`].
    n_queries : int
        Held-out query sentences (their normalised text is absent from the corpus).
    seed : int
        Seed of the query draw.
    limit : int, optional
        Entries read per source file at most (tests; None reads everything).
    paths : CorpusPaths, optional
        Where the package files are [default: the Debian locations].
    install : bool
        Run ``apt-get install`` for missing packages.
    show_progress : bool
        Progress lines/bar (:func:`slimvec.ui.make_progress`).

    Returns
    -------
    dict
        The manifest also written to ``out/manifest.json``.
    """
    from slimvec.ui import make_progress

    started = time.perf_counter()
    paths = paths or CorpusPaths()
    out = Path(out) if out is not None else default_out_dir()
    versions = ensure_packages(paths, install=install)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PersistenceError(f"Cannot create the corpus folder {out}: {exc}. Pass --out to a "
                               "writable folder.") from exc
    tally = _Tally(rejects=[])
    with make_progress(show_progress, unit="entries", console=console) as bar:
        def records() -> Iterator[Record]:
            wn_task = bar.add_task("WordNet synsets", total=None)
            synsets = [0]

            def wn_progress(n: int) -> None:
                synsets[0] += n
                bar.advance(wn_task, n)

            yield from read_wordnet(paths.wordnet_dir, limit=limit, progress=wn_progress)
            bar.update(wn_task, total=max(synsets[0], 1), completed=synsets[0])  # its "done" line
            # added when reached, so its rate and ETA count from its own start
            gc_task = bar.add_task("GCIDE entries", total=None)
            yield from read_gcide(paths.gcide_dict, paths.gcide_index, limit=limit,
                                  progress=lambda n: bar.advance(gc_task, n),
                                  on_total=lambda t: bar.update(gc_task, total=t))

        unique = dedupe(records(), tally)
    corpus, queries = split_queries(unique, n_queries, seed)
    sha_corpus = _write_jsonl(out / "corpus.jsonl", corpus, "c")
    sha_queries = _write_jsonl(out / "queries.jsonl", queries, "q")
    rejects = tally.rejects or []
    sha_rejects = _write_rejects(out / "rejects.jsonl", rejects)
    manifest: dict[str, Any] = {
        "format": "slimvec-realtext/1",
        "corpus": {"file": "corpus.jsonl", "rows": len(corpus), "sha256": sha_corpus,
                   "per_source": _count(corpus)},
        "queries": {"file": "queries.jsonl", "rows": len(queries), "sha256": sha_queries,
                    "per_source": _count(queries)},
        "rejects": {"file": "rejects.jsonl", "rows": len(rejects), "sha256": sha_rejects},
        "read_per_source": dict(sorted(tally.read.items())),
        "dropped_per_source": {k: dict(sorted(v.items()))
                               for k, v in sorted(tally.dropped.items())},
        "packages": versions,
        "files": {"wordnet": str(paths.wordnet_dir), "gcide_dict": str(paths.gcide_dict),
                  "gcide_index": str(paths.gcide_index)},
        "seed": seed,
        "n_queries": n_queries,
        "limit_per_source_file": limit,
        "sentence_rule": SENTENCE_RULE,
        "normalisation": "NFKC, casefold, whitespace collapsed, edge quotes/final punctuation off",
        "seconds": round(time.perf_counter() - started, 2),
    }
    tmp = out / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, out / "manifest.json")
    log.info("real-text corpus: %d sentences, %d queries in %s", len(corpus), len(queries), out)
    return manifest
