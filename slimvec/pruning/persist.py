"""Save and reload a pruned encoder without executing anything from the artifact.

A pruned model folder holds:

- ``slimvec_pruned.json`` -- slimvec's own config, the authority: the base architecture
  (hidden size, layers, vocabulary...), the heads and FFN size kept per layer (and which of the
  source model's heads were kept), pooling and normalisation, the maximum sequence length, the
  SHA-256 of the weights and how the model was made (sparsity, scoring, rewinding);
- ``model.safetensors`` -- the sliced weights;
- ``config.json`` -- the same architecture as a transformers config of model type
  ``slimvec_pruned_bert``, which slimvec registers in-process with ``AutoConfig`` / ``AutoModel``
  (no ``trust_remote_code``; a config naming any other type or carrying ``auto_map`` is refused);
- the tokenizer files, written by the tokenizer's ``save_pretrained``.

:func:`load_pruned_model` checks the format, version and checksum, rebuilds the sliced BERT from
``slimvec_pruned.json`` (passed over whatever ``config.json`` says) and assembles the
sentence-transformers pipeline (Transformer, Pooling, optional Normalize) itself instead of
reading ``modules.json``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from transformers import AutoConfig, AutoModel, BertConfig, BertModel

from slimvec.errors import ConfigError, PersistenceError
from slimvec.models import PRUNED_CONFIG, quiet_loading
from slimvec.persistence import fsync_dir, library_versions, read_json, sha256_file, write_json_atomic
from slimvec.pruning.masks import find_bert, layer_shapes
from slimvec.pruning.prune import resize_layer

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MODEL_TYPE",
    "PrunedBertConfig",
    "PrunedBertModel",
    "save_pruned_model",
    "load_pruned_model",
    "read_pruned_config",
    "model_bytes",
]

log = logging.getLogger(__name__)

FORMAT = "slimvec-pruned-encoder"
FORMAT_VERSION = 1
MODEL_TYPE = "slimvec_pruned_bert"
CONFIG_NAME = PRUNED_CONFIG
WEIGHTS_NAME = "model.safetensors"
#: config keys that are transformers bookkeeping, not architecture
_NOT_ARCHITECTURE = {"architectures", "model_type", "transformers_version", "auto_map",
                     "heads_per_layer", "intermediate_sizes", "dtype", "torch_dtype"}


class PrunedBertConfig(BertConfig):
    """A BERT config whose layers may keep different numbers of heads and FFN neurons.

    Parameters
    ----------
    heads_per_layer : list of int, optional
        Attention heads of each layer (default: ``num_attention_heads`` everywhere).
    intermediate_sizes : list of int, optional
        FFN intermediate size of each layer (default: ``intermediate_size`` everywhere).
    **kwargs
        Any :class:`transformers.BertConfig` argument.
    """

    model_type = MODEL_TYPE

    def __init__(self, heads_per_layer: list[int] | None = None,
                 intermediate_sizes: list[int] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        n = self.num_hidden_layers
        self.heads_per_layer = [int(h) for h in (heads_per_layer or [self.num_attention_heads] * n)]
        self.intermediate_sizes = [int(s) for s in (intermediate_sizes or [self.intermediate_size] * n)]
        if len(self.heads_per_layer) != n or len(self.intermediate_sizes) != n:
            raise ConfigError(
                f"PrunedBertConfig: expected {n} per-layer sizes (num_hidden_layers), got "
                f"{len(self.heads_per_layer)} head counts and {len(self.intermediate_sizes)} "
                "intermediate sizes."
            )


class PrunedBertModel(BertModel):
    """``BertModel`` built with the per-layer sizes of a :class:`PrunedBertConfig`."""

    config_class = PrunedBertConfig

    def __init__(self, config: PrunedBertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config, add_pooling_layer=add_pooling_layer)
        for layer, heads, inter in zip(self.encoder.layer, config.heads_per_layer,
                                       config.intermediate_sizes):
            resize_layer(layer, heads, inter)


_REGISTERED = False


def _register() -> None:
    """Make ``slimvec_pruned_bert`` known to transformers' Auto classes (idempotent)."""
    global _REGISTERED
    if _REGISTERED:
        return
    try:
        AutoConfig.register(MODEL_TYPE, PrunedBertConfig)
    except ValueError:  # already registered (e.g. module reloaded)
        pass
    try:
        AutoModel.register(PrunedBertConfig, PrunedBertModel)
    except ValueError:
        pass
    _REGISTERED = True


def _st_modules() -> tuple[type, type, type]:
    try:  # sentence-transformers >= 6
        from sentence_transformers.base.modules import Normalize, Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:  # pragma: no cover - older layout
        from sentence_transformers.models import Normalize, Pooling, Transformer
    return Transformer, Pooling, Normalize


def _pooling_settings(model: Any) -> tuple[dict[str, Any], bool]:
    """Pooling mode / include_prompt and whether a Normalize module follows."""
    Transformer, Pooling, Normalize = _st_modules()
    modules = list(model)
    if not modules or not isinstance(modules[0], Transformer):
        raise ConfigError(f"Expected a sentence-transformers model whose first module is a "
                          f"Transformer, got {[type(m).__name__ for m in modules]}.")
    pooling = [m for m in modules if isinstance(m, Pooling)]
    others = [m for m in modules[1:] if not isinstance(m, (Pooling, Normalize))]
    if len(pooling) != 1 or others:
        raise ConfigError(
            "slimvec can save pruned Transformer -> Pooling [-> Normalize] pipelines; this model "
            f"has {[type(m).__name__ for m in modules]}. Prune a plain sentence-transformers "
            "encoder such as all-MiniLM-L6-v2."
        )
    cfg = pooling[0].get_config_dict()
    mode = cfg.get("pooling_mode")
    if mode is None and hasattr(pooling[0], "get_pooling_mode_str"):
        mode = pooling[0].get_pooling_mode_str()
    settings = {"pooling_mode": mode if isinstance(mode, str) else list(mode),
                "include_prompt": bool(cfg.get("include_prompt", True))}
    return settings, any(isinstance(m, Normalize) for m in modules)


def _architecture(bert: Any) -> dict[str, Any]:
    cfg = bert.config.to_dict()
    return {k: v for k, v in cfg.items() if not k.startswith("_") and k not in _NOT_ARCHITECTURE}


def save_pruned_model(model: Any, path: str | os.PathLike[str], *,
                      info: dict[str, Any] | None = None) -> Path:
    """Write a (pruned) BERT sentence-transformers model to a folder slimvec can reload.

    Parameters
    ----------
    model : SentenceTransformer
        Transformer -> Pooling [-> Normalize]; its layers may have any head / FFN sizes.
    path : path-like
        Target folder; replaced atomically if it exists.
    info : dict, optional
        JSON-serialisable provenance stored under ``"info"`` (source model, sparsity, plan,
        rewind settings...).

    Returns
    -------
    Path
        The folder written.

    Raises
    ------
    ConfigError
        The model is not a plain BERT Transformer -> Pooling [-> Normalize] pipeline.
    PersistenceError
        The folder cannot be written.
    """
    from safetensors.torch import save_file

    bert = find_bert(model)
    shapes = layer_shapes(bert)
    pooling, normalize = _pooling_settings(model)
    arch = _architecture(bert)
    heads = [h for h, _ in shapes]
    inters = [n for _, n in shapes]
    hf_config = PrunedBertConfig(heads_per_layer=heads, intermediate_sizes=inters, **arch)
    hf_config.architectures = ["PrunedBertModel"]
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        state = {k: v.detach().to("cpu").contiguous() for k, v in bert.state_dict().items()}
        save_file(state, str(tmp / WEIGHTS_NAME), metadata={"format": "pt"})
        hf_config.save_pretrained(tmp)
        model.tokenizer.save_pretrained(str(tmp))
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "architecture": arch,
            "heads_per_layer": heads,
            "intermediate_sizes": inters,
            "pooling": pooling,
            "normalize": normalize,
            "max_seq_length": int(model.max_seq_length or 512),
            "do_lower_case": bool(getattr(model[0], "do_lower_case", False)),
            "embedding_dim": int(arch["hidden_size"]),
            "parameters": int(sum(p.numel() for p in bert.parameters())),
            "weights": WEIGHTS_NAME,
            "sha256": {WEIGHTS_NAME: sha256_file(tmp / WEIGHTS_NAME)},
            "info": info or {},
            "versions": library_versions(),
        }
        write_json_atomic(tmp / CONFIG_NAME, manifest)
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
        raise PersistenceError(f"Cannot write pruned model {path}: {exc.strerror or exc}. "
                               "Check permissions and free space.") from exc
    log.info("saved pruned encoder to %s (heads %s, intermediate %s)", path, heads, inters)
    return path


def read_pruned_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check ``slimvec_pruned.json`` and the weights' checksum.

    Raises
    ------
    PersistenceError
        Missing files, wrong format, newer version, inconsistent sizes or a checksum mismatch.
    """
    path = Path(path)
    cfg_path = path / CONFIG_NAME
    cfg = read_json(cfg_path)
    if cfg.get("format") != FORMAT:
        raise PersistenceError(f"{cfg_path}: expected format {FORMAT!r}, got {cfg.get('format')!r}.")
    version = cfg.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise PersistenceError(f"{cfg_path}: format_version {version!r} is newer than this slimvec "
                               f"supports ({FORMAT_VERSION}); upgrade slimvec.")
    arch = cfg.get("architecture")
    if not isinstance(arch, dict) or "num_hidden_layers" not in arch:
        raise PersistenceError(f"{cfg_path}: no 'architecture' with num_hidden_layers; the file "
                               "is damaged. Re-run slimvec prune.")
    n = int(arch["num_hidden_layers"])
    for key in ("heads_per_layer", "intermediate_sizes"):
        sizes = cfg.get(key)
        if not isinstance(sizes, list) or len(sizes) != n or not all(
                isinstance(s, int) and s >= 1 for s in sizes):
            raise PersistenceError(f"{cfg_path}: {key} must list {n} positive integers "
                                   f"(one per layer), got {sizes!r}.")
    weights = path / WEIGHTS_NAME
    if not weights.exists():
        raise PersistenceError(f"{weights} is missing; the pruned model folder is incomplete.")
    expected = (cfg.get("sha256") or {}).get(WEIGHTS_NAME)
    actual = sha256_file(weights)
    if expected != actual:
        raise PersistenceError(
            f"{weights}: SHA-256 mismatch (manifest {str(expected)[:12]}..., file {actual[:12]}...). "
            "The file was modified or corrupted; re-create the pruned model with slimvec prune."
        )
    hf_cfg = read_json(path / "config.json")
    if hf_cfg.get("model_type") != MODEL_TYPE or "auto_map" in hf_cfg:
        raise PersistenceError(
            f"{path / 'config.json'}: expected model_type {MODEL_TYPE!r} without auto_map, got "
            f"{hf_cfg.get('model_type')!r}. slimvec never runs code from a model folder; "
            "re-create it with slimvec prune."
        )
    return cfg


def load_pruned_model(path: str | os.PathLike[str], device: str | None = None) -> Any:
    """Rebuild a pruned encoder saved by :func:`save_pruned_model`.

    Parameters
    ----------
    path : path-like
        Folder holding ``slimvec_pruned.json``.
    device : str, optional
        Torch device (``cpu``, ``cuda``...); sentence-transformers picks one when omitted.

    Returns
    -------
    SentenceTransformer
        Ready to ``encode``.

    Raises
    ------
    PersistenceError
        See :func:`read_pruned_config`.
    """
    from sentence_transformers import SentenceTransformer

    _register()
    path = Path(path)
    cfg = read_pruned_config(path)
    Transformer, Pooling, Normalize = _st_modules()
    # slimvec's config is the authority: it overrides every architecture key of config.json
    config_kwargs = dict(cfg["architecture"])
    config_kwargs.update(heads_per_layer=cfg["heads_per_layer"],
                         intermediate_sizes=cfg["intermediate_sizes"])
    with quiet_loading():
        transformer = Transformer(
            str(path),
            max_seq_length=int(cfg["max_seq_length"]),
            do_lower_case=bool(cfg.get("do_lower_case", False)),
            config_kwargs=config_kwargs,
            model_kwargs={"local_files_only": True},
            processor_kwargs={"local_files_only": True},
        )
    bert = find_bert(transformer)
    got = layer_shapes(bert)
    want = list(zip(cfg["heads_per_layer"], cfg["intermediate_sizes"]))
    if [tuple(s) for s in got] != [tuple(s) for s in want]:
        raise PersistenceError(f"{path}: rebuilt layers {got} differ from {CONFIG_NAME} {want}.")
    pooling = cfg.get("pooling") or {"pooling_mode": "mean"}
    modules = [transformer, Pooling(int(cfg["architecture"]["hidden_size"]), **pooling)]
    if cfg.get("normalize", True):
        modules.append(Normalize())
    model = SentenceTransformer(modules=modules, device=device)
    model.eval()
    return model


def model_bytes(model: Any) -> int:
    """Bytes of the encoder's parameters (what the weights file holds, without the header)."""
    return int(sum(p.numel() * p.element_size() for p in find_bert(model).parameters()))

