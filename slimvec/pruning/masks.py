"""Head and FFN-neuron masks attached to a BERT encoder with forward pre-hooks.

transformers >= 5 removed ``head_mask`` and ``prune_heads``, so the masks of SparseCSE are put
back from the outside, without touching the model's code:

- a head mask ``xi`` (one value per head of a layer) scales that head's slice of the attention
  output just before the attention output projection (``layer.attention.output``, whose input is
  the concatenation of the heads' context vectors, ``(batch, seq, heads * head_size)``);
- a neuron mask ``nu`` (one value per FFN intermediate neuron) scales the GELU activations just
  before the FFN output Linear (``layer.output``, input ``(batch, seq, intermediate_size)``).

With every mask at one the model computes exactly what it computed before; with a mask at zero
the structure contributes nothing, which is what physically pruning it does. The masks are
leaf tensors, so ``dL/dmask`` is the importance signal of :mod:`slimvec.pruning.importance`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from slimvec.errors import ConfigError

__all__ = ["find_bert", "bert_layers", "head_size", "layer_shapes", "StructureMasks", "attach_masks"]


def find_bert(model: Any) -> nn.Module:
    """Return the transformers encoder (``BertModel``-like) inside a sentence-transformers model.

    Accepts a ``SentenceTransformer``, its first ``Transformer`` module, or the encoder itself.

    Raises
    ------
    ConfigError
        No BERT-style encoder (``encoder.layer[i].attention.self.query``) is found.
    """
    candidates = [model]
    try:
        candidates.append(model[0])
    except (TypeError, IndexError, KeyError, NotImplementedError):
        pass
    for cand in list(candidates):
        for attr in ("model", "auto_model"):
            inner = getattr(cand, attr, None)
            if isinstance(inner, nn.Module):
                candidates.append(inner)
    for cand in candidates:
        enc = getattr(cand, "encoder", None)
        layers = getattr(enc, "layer", None)
        if isinstance(layers, nn.ModuleList) and len(layers) and hasattr(
            getattr(getattr(layers[0], "attention", None), "self", None), "query"
        ):
            return cand
    raise ConfigError(
        f"Expected a BERT-style encoder (encoder.layer[i].attention.self.query/key/value), got "
        f"{type(model).__name__}. SparseCSE pruning supports BERT-family sentence-transformers "
        "models such as all-MiniLM-L6-v2."
    )


def bert_layers(model: Any) -> list[nn.Module]:
    """The transformer layers of the BERT encoder inside ``model``."""
    return list(find_bert(model).encoder.layer)


def head_size(layer: nn.Module) -> int:
    """Size of one attention head in ``layer``."""
    return int(layer.attention.self.attention_head_size)


def layer_shapes(model: Any) -> list[tuple[int, int]]:
    """``(heads, intermediate_size)`` of every layer, as the weights say (pruned or not)."""
    shapes = []
    for layer in bert_layers(model):
        heads = layer.attention.self.query.out_features // head_size(layer)
        shapes.append((int(heads), int(layer.intermediate.dense.out_features)))
    return shapes


@dataclass
class StructureMasks:
    """One mask tensor per layer for heads and for FFN neurons, all ones at creation.

    Attributes
    ----------
    heads : list of Tensor
        ``heads[i]`` has shape ``(n_heads_i,)``.
    neurons : list of Tensor
        ``neurons[i]`` has shape ``(intermediate_size_i,)``.
    """

    heads: list[torch.Tensor]
    neurons: list[torch.Tensor]
    _handles: list[Any] = field(default_factory=list, repr=False)

    @classmethod
    def ones(cls, model: Any, *, requires_grad: bool = False) -> StructureMasks:
        """All-ones masks shaped like ``model``'s layers, on the model's device."""
        device = next(find_bert(model).parameters()).device
        heads, neurons = [], []
        for n_heads, n_inter in layer_shapes(model):
            heads.append(torch.ones(n_heads, device=device, requires_grad=requires_grad))
            neurons.append(torch.ones(n_inter, device=device, requires_grad=requires_grad))
        return cls(heads, neurons)

    def parameters(self) -> Iterator[torch.Tensor]:
        """Every mask tensor, heads first."""
        yield from self.heads
        yield from self.neurons

    def zero_grad(self) -> None:
        """Forget accumulated gradients."""
        for m in self.parameters():
            m.grad = None

    def remove(self) -> None:
        """Detach the hooks from the model (the masks stop acting)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def __enter__(self) -> StructureMasks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _head_hook(mask: torch.Tensor, size: int):
    def hook(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        hidden = args[0]
        shape = hidden.shape
        scaled = (hidden.view(*shape[:-1], mask.numel(), size) * mask.to(hidden.dtype)[:, None])
        return (scaled.view(shape), *args[1:])

    return hook


def _neuron_hook(mask: torch.Tensor):
    def hook(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0] * mask.to(args[0].dtype), *args[1:])

    return hook


def attach_masks(model: Any, masks: StructureMasks | None = None, *,
                 requires_grad: bool = False) -> StructureMasks:
    """Attach head and neuron masks to ``model`` with forward pre-hooks.

    Parameters
    ----------
    model : SentenceTransformer or BertModel
        The encoder to mask (pruned or not).
    masks : StructureMasks, optional
        Masks to use; all ones (shaped like the model) when omitted.
    requires_grad : bool, default False
        Make fresh all-ones masks leaf tensors that collect gradients.

    Returns
    -------
    StructureMasks
        The attached masks; use as a context manager or call ``remove()`` to detach.

    Raises
    ------
    DimensionMismatchError
        A given mask does not match the layer it is attached to.
    """
    from slimvec.errors import DimensionMismatchError

    layers = bert_layers(model)
    if masks is None:
        masks = StructureMasks.ones(model, requires_grad=requires_grad)
    if len(masks.heads) != len(layers) or len(masks.neurons) != len(layers):
        raise DimensionMismatchError("mask layers", len(layers), len(masks.heads),
                                     "Build masks with StructureMasks.ones(model).")
    for i, (layer, (n_heads, n_inter)) in enumerate(zip(layers, layer_shapes(model))):
        if masks.heads[i].numel() != n_heads:
            raise DimensionMismatchError(f"head mask of layer {i}", n_heads, masks.heads[i].numel())
        if masks.neurons[i].numel() != n_inter:
            raise DimensionMismatchError(f"neuron mask of layer {i}", n_inter,
                                         masks.neurons[i].numel())
        masks._handles.append(layer.attention.output.register_forward_pre_hook(
            _head_hook(masks.heads[i], head_size(layer))))
        masks._handles.append(layer.output.register_forward_pre_hook(
            _neuron_hook(masks.neurons[i])))
    return masks
