import numpy as np
import pytest
import torch

from slimvec.errors import ConfigError, DimensionMismatchError
from slimvec.pruning.masks import StructureMasks, attach_masks, layer_shapes
from slimvec.pruning.prune import PruningPlan, plan_pruning, prune_model

TEXTS = [
    "A man is playing a guitar on the street.",
    "The cat sat quietly on the mat near the window.",
    "Stock markets fell sharply after the announcement.",
    "Two children are riding bicycles in the park.",
]


def _encode(model):
    return model.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)


def test_masks_at_one_leave_the_output_unchanged(minilm):
    before = _encode(minilm)
    with attach_masks(minilm) as masks:
        during = _encode(minilm)
        assert len(masks.heads) == 6 and masks.heads[0].shape == (12,)
        assert masks.neurons[5].shape == (1536,)
    after = _encode(minilm)
    np.testing.assert_allclose(during, before, atol=1e-6)
    np.testing.assert_array_equal(after, before)  # hooks removed on exit


def test_zero_masks_equal_physical_pruning(minilm):
    import copy

    before = _encode(minilm)
    masks = StructureMasks.ones(minilm)
    masks.heads[1][3] = 0.0
    masks.heads[4][0] = 0.0
    masks.heads[4][11] = 0.0
    masks.neurons[2][:200] = 0.0
    masks.neurons[5][::7] = 0.0
    with attach_masks(minilm, masks):
        masked = _encode(minilm)
    assert np.abs(masked - before).max() > 1e-3  # the masks did act

    pruned = copy.deepcopy(minilm)
    plan = PruningPlan(
        heads=[[h for h in range(12) if masks.heads[i][h] > 0] for i in range(6)],
        neurons=[torch.nonzero(masks.neurons[i]).flatten().tolist() for i in range(6)],
    )
    shapes = prune_model(pruned, plan)
    assert shapes[1] == (11, 1536) and shapes[4] == (10, 1536)
    assert shapes[2] == (12, 1336) and shapes[5][1] == 1536 - len(range(0, 1536, 7))
    attn = pruned[0].model.encoder.layer[4].attention
    assert attn.self.query.weight.shape == (10 * 32, 384)
    assert attn.output.dense.weight.shape == (384, 10 * 32)
    np.testing.assert_allclose(_encode(pruned), masked, atol=1e-5)


def test_masks_must_match_the_layers(minilm):
    masks = StructureMasks.ones(minilm)
    masks.heads[0] = torch.ones(11)
    with pytest.raises(DimensionMismatchError, match="head mask of layer 0"):
        attach_masks(minilm, masks)


def test_plan_prunes_lowest_scores_and_keeps_one_per_layer():
    rng = np.random.default_rng(0)
    heads = [rng.random(12) for _ in range(3)]
    heads[1][:] = 0.0  # a useless layer: all its heads go except one
    neurons = [rng.random(100) for _ in range(3)]
    plan = plan_pruning(heads, neurons, 0.4)
    assert sum(plan.head_counts) == 36 - round(0.4 * 36)
    assert sum(plan.neuron_counts) == 300 - 120
    assert plan.head_counts[1] == 1
    lowest = sorted(range(100), key=lambda j: neurons[0][j])[:5]
    kept0 = set(plan.neurons[0])
    assert not kept0 & set(lowest) or len(kept0) > 95
    heads_only = plan_pruning(heads, neurons, 0.4, neurons=False)
    assert heads_only.neuron_counts == [100, 100, 100]
    with pytest.raises(ConfigError, match="sparsity"):
        plan_pruning(heads, neurons, 1.0)
    with pytest.raises(ConfigError, match="Nothing to prune"):
        plan_pruning(heads, neurons, 0.1, heads=False, neurons=False)


def test_layer_shapes_of_minilm(minilm):
    assert layer_shapes(minilm) == [(12, 1536)] * 6
