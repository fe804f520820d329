"""Physical pruning: slice attention heads and FFN neurons out of a BERT encoder.

A pruned head disappears from the query, key and value projections (its rows) and from the
attention output projection (its columns); a pruned neuron disappears from the FFN intermediate
Linear (its row) and from the FFN output Linear (its column). The installed transformers 5.x BERT
reshapes with ``view(..., -1, head_size)``, so only the Linear shapes and the attention module's
``num_attention_heads`` / ``all_head_size`` need updating; layers may keep different numbers of
heads and neurons.

Every layer keeps at least one head and one neuron: a layer without heads would make the
``view(..., -1, head_size)`` of an empty tensor ambiguous.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from slimvec.errors import ConfigError, DimensionMismatchError
from slimvec.pruning.masks import bert_layers, head_size, layer_shapes

__all__ = ["PruningPlan", "plan_pruning", "prune_model", "slice_linear", "resize_layer"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PruningPlan:
    """What each layer keeps, as indices into the layer it is applied to.

    Attributes
    ----------
    heads : list of list of int
        Kept head indices per layer, sorted.
    neurons : list of list of int
        Kept FFN intermediate neuron indices per layer, sorted.
    """

    heads: list[list[int]]
    neurons: list[list[int]]

    def to_json(self) -> dict[str, list[list[int]]]:
        """Plain JSON-ready form."""
        return {"heads": [list(map(int, h)) for h in self.heads],
                "neurons": [list(map(int, n)) for n in self.neurons]}

    @property
    def head_counts(self) -> list[int]:
        """Kept heads per layer."""
        return [len(h) for h in self.heads]

    @property
    def neuron_counts(self) -> list[int]:
        """Kept neurons per layer (the new intermediate sizes)."""
        return [len(n) for n in self.neurons]


def _keep_global(scores: Sequence[np.ndarray], n_prune: int, minimum: int) -> list[list[int]]:
    """Drop the ``n_prune`` lowest scores over all layers, keeping ``minimum`` per layer."""
    flat = [(float(s), li, j) for li, layer in enumerate(scores) for j, s in enumerate(layer)]
    flat.sort(key=lambda t: (t[0], t[1], t[2]))
    remaining = [len(layer) for layer in scores]
    dropped: set[tuple[int, int]] = set()
    for _score, li, j in flat:
        if len(dropped) >= n_prune:
            break
        if remaining[li] <= minimum:
            continue
        dropped.add((li, j))
        remaining[li] -= 1
    return [[j for j in range(len(layer)) if (li, j) not in dropped]
            for li, layer in enumerate(scores)]


def plan_pruning(head_scores: Sequence[np.ndarray], neuron_scores: Sequence[np.ndarray],
                 sparsity: float, *, heads: bool = True, neurons: bool = True) -> PruningPlan:
    """Choose what to prune: the lowest-scoring heads and neurons, ranked across layers.

    Parameters
    ----------
    head_scores, neuron_scores : sequence of ndarray
        Per-layer importance (normalised per layer, see :func:`slimvec.pruning.importance`).
    sparsity : float
        Fraction in [0, 1) of all heads and of all neurons to remove
        (``round(sparsity * total)`` of each).
    heads, neurons : bool
        Prune heads, neurons, or both (joint, the default).

    Returns
    -------
    PruningPlan
        Kept indices per layer; every layer keeps at least one head and one neuron.

    Raises
    ------
    ConfigError
        ``sparsity`` outside [0, 1) or nothing selected to prune.
    """
    if not 0.0 <= float(sparsity) < 1.0:
        raise ConfigError(f"sparsity must be in [0, 1), got {sparsity}. Use e.g. 0.2 for 20%.")
    if not (heads or neurons):
        raise ConfigError("Nothing to prune: enable heads, neurons or both.")
    if len(head_scores) != len(neuron_scores):
        raise DimensionMismatchError("score layers", len(head_scores), len(neuron_scores))
    n_heads = sum(len(s) for s in head_scores)
    n_neurons = sum(len(s) for s in neuron_scores)
    kept_heads = _keep_global(head_scores, round(sparsity * n_heads) if heads else 0, 1)
    kept_neurons = _keep_global(neuron_scores, round(sparsity * n_neurons) if neurons else 0, 1)
    return PruningPlan(kept_heads, kept_neurons)


def slice_linear(linear: nn.Linear, index: Sequence[int], dim: int) -> nn.Linear:
    """A new Linear keeping rows (``dim=0``, output features) or columns (``dim=1``) ``index``.

    The bias follows the output rows; slicing columns keeps the whole bias.
    """
    idx = torch.as_tensor(list(index), dtype=torch.long, device=linear.weight.device)
    weight = linear.weight.detach().index_select(dim, idx).clone()
    bias = None
    if linear.bias is not None:
        bias = linear.bias.detach()
        bias = (bias.index_select(0, idx) if dim == 0 else bias).clone()
    out_f, in_f = weight.shape
    new = nn.Linear(in_f, out_f, bias=bias is not None, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        new.weight.copy_(weight)
        if bias is not None:
            new.bias.copy_(bias)
    new.weight.requires_grad_(linear.weight.requires_grad)
    if new.bias is not None and linear.bias is not None:
        new.bias.requires_grad_(linear.bias.requires_grad)
    return new


def _set_heads(layer: nn.Module, n_heads: int) -> None:
    attn = layer.attention.self
    attn.num_attention_heads = int(n_heads)
    attn.all_head_size = int(n_heads) * int(attn.attention_head_size)


def resize_layer(layer: nn.Module, n_heads: int, intermediate_size: int) -> None:
    """Give ``layer`` empty (uninitialised) Linears for ``n_heads`` heads and that FFN size.

    Used to rebuild a pruned architecture before loading its saved weights.
    """
    size = head_size(layer)
    attn, hidden = layer.attention.self, layer.attention.self.query.in_features
    dev, dt = attn.query.weight.device, attn.query.weight.dtype
    for name in ("query", "key", "value"):
        setattr(attn, name, nn.Linear(hidden, n_heads * size, device=dev, dtype=dt))
    layer.attention.output.dense = nn.Linear(n_heads * size, hidden, device=dev, dtype=dt)
    layer.intermediate.dense = nn.Linear(hidden, intermediate_size, device=dev, dtype=dt)
    layer.output.dense = nn.Linear(intermediate_size, hidden, device=dev, dtype=dt)
    _set_heads(layer, n_heads)


def prune_model(model: Any, plan: PruningPlan) -> list[tuple[int, int]]:
    """Slice ``model``'s layers in place to what ``plan`` keeps.

    Parameters
    ----------
    model : SentenceTransformer or BertModel
        The encoder; its current layer shapes are what ``plan``'s indices refer to.
    plan : PruningPlan
        Kept heads and neurons per layer.

    Returns
    -------
    list of (int, int)
        The new ``(heads, intermediate_size)`` per layer.

    Raises
    ------
    DimensionMismatchError
        The plan's layer count or an index does not fit the model.
    """
    layers = bert_layers(model)
    shapes = layer_shapes(model)
    if len(plan.heads) != len(layers) or len(plan.neurons) != len(layers):
        raise DimensionMismatchError("pruning plan layers", len(layers), len(plan.heads))
    for i, (layer, (n_heads, n_inter)) in enumerate(zip(layers, shapes)):
        keep_h, keep_n = sorted(plan.heads[i]), sorted(plan.neurons[i])
        if not keep_h or max(keep_h) >= n_heads or min(keep_h) < 0:
            raise DimensionMismatchError(f"kept heads of layer {i}", n_heads, len(keep_h),
                                         "Indices must be in [0, heads) and at least one kept.")
        if not keep_n or max(keep_n) >= n_inter or min(keep_n) < 0:
            raise DimensionMismatchError(f"kept neurons of layer {i}", n_inter, len(keep_n),
                                         "Indices must be in [0, intermediate) and at least one kept.")
        if len(keep_h) < n_heads:
            size = head_size(layer)
            rows = [h * size + k for h in keep_h for k in range(size)]
            attn = layer.attention.self
            attn.query = slice_linear(attn.query, rows, 0)
            attn.key = slice_linear(attn.key, rows, 0)
            attn.value = slice_linear(attn.value, rows, 0)
            layer.attention.output.dense = slice_linear(layer.attention.output.dense, rows, 1)
            _set_heads(layer, len(keep_h))
        if len(keep_n) < n_inter:
            layer.intermediate.dense = slice_linear(layer.intermediate.dense, keep_n, 0)
            layer.output.dense = slice_linear(layer.output.dense, keep_n, 1)
    new_shapes = layer_shapes(model)
    log.info("pruned to (heads, intermediate) per layer: %s", new_shapes)
    return new_shapes
