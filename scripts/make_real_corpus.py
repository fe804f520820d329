"""Build the real English corpus (>= 300,000 sentences) from Debian's wordnet-base and dict-gcide.

Thin wrapper around :func:`benchmarks.corpora.realtext.build_corpus` (the rules live there):
installs the packages when their files are missing (apt-get, as root or with sudo -n), reads
WordNet glosses and examples and GCIDE definitions and quotations, drops non-sentences and
duplicates, holds out seeded queries, and writes corpus.jsonl, queries.jsonl and manifest.json to
--out (default ~/.cache/slimvec-corpus, outside git). Text only: encoding is a later step through
slimvec.benchmarks.encoding_cache (see the realtext module docstring).

    python scripts/make_real_corpus.py [--out DIR] [--queries 2000] [--seed 0] [--limit N]

With --encode it then encodes the corpus (resumably, through the encoding cache) into
bench-data/realtext-minilm-{100k,300k,all,queries}.npy, the files the real-text scale suites read
(benchmarks.corpora.realtext_encode); an existing corpus folder is reused, not rebuilt.

    python scripts/make_real_corpus.py --encode [--data bench-data] [--sizes 100000,300000]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's benchmarks/ tree

from benchmarks.corpora.realtext import build_corpus, default_out_dir  # noqa: E402
from slimvec.errors import SlimvecError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse the options, build the corpus, print the manifest's counts; 2 on a slimvec error."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=default_out_dir(),
                    help="Output folder [default: %(default)s].")
    ap.add_argument("--queries", type=int, default=2000, help="Held-out query sentences.")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the query draw.")
    ap.add_argument("--limit", type=int, default=None,
                    help="Entries read per source file at most (a quick partial corpus).")
    ap.add_argument("--no-install", action="store_true",
                    help="Fail instead of running apt-get when the package files are missing.")
    ap.add_argument("--encode", action="store_true",
                    help="Encode the corpus into --data (reuses an existing corpus folder).")
    ap.add_argument("--data", type=Path, default=Path("bench-data"),
                    help="Folder of the encoded .npy files [default: %(default)s].")
    ap.add_argument("--sizes", default="100000,300000",
                    help="Comma-separated corpus prefixes to write [default: %(default)s].")
    ap.add_argument("--model", default="minilm", help="Encoder [default: %(default)s].")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.encode:
        return _encode(args)
    try:
        manifest = build_corpus(args.out, n_queries=args.queries, seed=args.seed,
                                limit=args.limit, install=not args.no_install)
    except SlimvecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = {k: manifest[k] for k in ("corpus", "queries", "dropped_per_source", "packages",
                                        "seconds")}
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    return 0


def _encode(args: argparse.Namespace) -> int:
    from benchmarks.corpora.realtext_encode import encode_corpus

    try:
        if not (args.out / "manifest.json").is_file():
            build_corpus(args.out, n_queries=args.queries, seed=args.seed, limit=args.limit,
                         install=not args.no_install)
        sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
        record = encode_corpus(args.out, args.data, sizes=sizes, model=args.model, seed=args.seed)
    except (SlimvecError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
