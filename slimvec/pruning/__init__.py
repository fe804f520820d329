"""SparseCSE: prune a sentence encoder's attention heads and FFN neurons, then rewind.

Stages, one module each: :mod:`~slimvec.pruning.masks` (head / neuron masks as forward
pre-hooks), :mod:`~slimvec.pruning.importance` (alignment + uniformity importance),
:mod:`~slimvec.pruning.prune` (physical slicing), :mod:`~slimvec.pruning.rewind` (unsupervised
SimCSE fine-tuning), :mod:`~slimvec.pruning.persist` (safe save / reload) and
:mod:`~slimvec.pruning.sparsecse` (all of them in order, as ``slimvec prune`` runs them).
"""

from slimvec.pruning.importance import Importance, compute_importance
from slimvec.pruning.masks import StructureMasks, attach_masks
from slimvec.pruning.persist import load_pruned_model, save_pruned_model
from slimvec.pruning.prune import PruningPlan, plan_pruning, prune_model
from slimvec.pruning.rewind import RewindResult, rewind
from slimvec.pruning.sparsecse import PruneOptions, PruneReport, prune_encoder

__all__ = [
    "Importance",
    "PruneOptions",
    "PruneReport",
    "PruningPlan",
    "RewindResult",
    "StructureMasks",
    "attach_masks",
    "compute_importance",
    "load_pruned_model",
    "plan_pruning",
    "prune_encoder",
    "prune_model",
    "rewind",
    "save_pruned_model",
]
