"""Read the sentence corpus that pruning scores on and rewinding trains on."""

from __future__ import annotations

import json
import os
from pathlib import Path

from slimvec.errors import ConfigError

__all__ = ["read_corpus"]


def read_corpus(path: str | os.PathLike[str], limit: int | None = None) -> list[str]:
    """Unique, non-empty sentences from a corpus file, in file order.

    Parameters
    ----------
    path : path-like
        ``.tsv`` sentence pairs (``sentence1<TAB>sentence2[<TAB>score]``, optional header: both
        sentence columns are used), ``.jsonl`` (the ``"text"`` key of each object), or any other
        text file with one sentence per line.
    limit : int, optional
        Stop after this many unique sentences.

    Raises
    ------
    ConfigError
        The file does not exist or holds fewer than 2 sentences.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Corpus {path} does not exist. Pass a text file with one sentence per "
                          "line, or a .tsv file of sentence pairs.")
    seen: dict[str, None] = {}
    suffix = path.suffix.lower()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh):
            line = line.rstrip("\n\r")
            if suffix == ".tsv":
                cols = line.split("\t")
                if lineno == 0 and cols[0].strip().lower() in ("sentence1", "text1", "s1"):
                    continue
                texts = cols[:2]
            elif suffix == ".jsonl":
                try:
                    obj = json.loads(line) if line.strip() else {}
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{path}:{lineno + 1}: not a JSON object ({exc.msg}). "
                                      "Use one JSON object with a 'text' key per line.") from exc
                texts = [obj.get("text", "")] if isinstance(obj, dict) else []
            else:
                texts = [line]
            for text in texts:
                text = str(text).strip()
                if text:
                    seen.setdefault(text)
            if limit is not None and len(seen) >= limit:
                break
    sentences = list(seen)[:limit] if limit is not None else list(seen)
    if len(sentences) < 2:
        raise ConfigError(f"Corpus {path} holds {len(sentences)} sentence(s); pruning needs at "
                          "least 2 (a few hundred to score, more to rewind).")
    return sentences
