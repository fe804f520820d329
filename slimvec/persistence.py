"""Safe artifact folders: ``config.json`` + ``state.safetensors``, checked by SHA-256.

Nothing here can execute code from a file: JSON is parsed as data and arrays are read with
safetensors (no pickle, no ``np.load(allow_pickle=True)``, no bare ``torch.load``). Writes go to a
temporary sibling folder that is renamed into place, so a crash never leaves a half-written
artifact under the final name.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import PersistenceError

__all__ = [
    "FORMAT_VERSION",
    "sha256_file",
    "write_json_atomic",
    "read_json",
    "save_artifact",
    "load_artifact",
    "check_artifact",
    "library_versions",
    "allocated_bytes",
]

FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
STATE_NAME = "state.safetensors"


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def allocated_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes allocated on disk (``st_blocks * 512``) for a file or a whole folder.

    Sparse, preallocated files (Qdrant Edge) count only what is really allocated.
    """
    p = Path(path)
    if not p.exists():
        return 0
    if p.is_file():
        return p.stat().st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(p):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:  # removed while we walked (a concurrent writer)
                continue
    return total


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape an artifact, recorded for diagnosis."""
    from importlib import metadata

    out = {}
    for pkg in ("slimvec", "numpy", "scikit-learn", "torch", "safetensors"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON to ``path`` through a fsynced temporary file and an atomic rename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, default=_json_default)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        raise PersistenceError(
            f"Cannot write {path}: {exc.strerror or exc}. Check that the folder is writable "
            "and the disk is not full."
        ) from exc


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a JSON object, raising :class:`PersistenceError` naming the file on any problem."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError as exc:
        raise PersistenceError(f"{path} does not exist.") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PersistenceError(f"{path} is not a readable JSON file: {exc}.") from exc
    if not isinstance(data, dict):
        raise PersistenceError(f"{path}: expected a JSON object, got {type(data).__name__}.")
    return data


def save_artifact(
    path: str | os.PathLike[str],
    config: dict[str, Any],
    arrays: dict[str, np.ndarray],
    *,
    kind: str = "slimvec-artifact",
) -> Path:
    """Write an artifact folder atomically.

    Parameters
    ----------
    path : path-like
        Target folder; replaced if it exists.
    config : dict
        JSON-serialisable description (type, params, fitted shapes...).
    arrays : dict of str to ndarray
        Fitted state, stored in ``state.safetensors``.
    kind : str
        Artifact family, checked on load.

    Returns
    -------
    Path
        The folder written.
    """
    from safetensors.numpy import save_file

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        state = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
        save_file(state, str(tmp / STATE_NAME))
        full = dict(config)
        full.update(
            format=kind,
            format_version=FORMAT_VERSION,
            versions=library_versions(),
            sha256={STATE_NAME: sha256_file(tmp / STATE_NAME)},
        )
        write_json_atomic(tmp / CONFIG_NAME, full)
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        raise PersistenceError(
            f"Cannot write artifact {path}: {exc.strerror or exc}. Check permissions and free space."
        ) from exc
    return path


def load_artifact(
    path: str | os.PathLike[str], *, kind: str = "slimvec-artifact"
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and verify an artifact folder written by :func:`save_artifact`.

    Raises
    ------
    PersistenceError
        Missing files, wrong kind, a newer format version, or a checksum mismatch; the message
        names the file.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    config = check_artifact(path, kind=kind)
    state_path = Path(path) / STATE_NAME
    try:
        arrays = load_file(str(state_path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise PersistenceError(f"{state_path} is not a valid safetensors file: {exc}.") from exc
    return config, arrays


def check_artifact(path: str | os.PathLike[str], *, kind: str = "slimvec-artifact") -> dict[str, Any]:
    """The checks of :func:`load_artifact` (kind, format version, the state file's SHA-256)
    without loading the arrays; returns the config (``slimvec info`` reads no reducer state)."""
    path = Path(path)
    if not path.is_dir():
        raise PersistenceError(f"{path} is not an artifact folder (expected {CONFIG_NAME} inside).")
    cfg_path = path / CONFIG_NAME
    config = read_json(cfg_path)
    if config.get("format") != kind:
        raise PersistenceError(
            f"{cfg_path}: expected format {kind!r}, got {config.get('format')!r}."
        )
    version = config.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise PersistenceError(
            f"{cfg_path}: format_version {version!r} is newer than this slimvec supports "
            f"({FORMAT_VERSION}); upgrade slimvec."
        )
    state_path = path / STATE_NAME
    if not state_path.exists():
        raise PersistenceError(f"{state_path} is missing.")
    expected = (config.get("sha256") or {}).get(STATE_NAME)
    if expected is None:
        raise PersistenceError(f"{cfg_path} records no sha256 for {STATE_NAME}.")
    actual = sha256_file(state_path)
    if actual != expected:
        raise PersistenceError(
            f"{state_path}: SHA-256 mismatch (manifest {expected[:12]}..., file {actual[:12]}...). "
            "The file was modified or corrupted; re-create or re-download the artifact."
        )
    return config
