import numpy as np
import pytest
import torch

from slimvec.errors import ConfigError
from slimvec.pruning.importance import alignment_loss, compute_importance, uniformity_loss


def test_losses_on_known_points():
    x = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]), dim=1)
    assert float(alignment_loss(x, x)) == 0.0
    assert float(alignment_loss(x, -x)) == pytest.approx(4.0)
    # squared distances 2, 4, 2 -> log mean exp(-2 d)
    expected = np.log(np.mean(np.exp(-2 * np.array([2.0, 4.0, 2.0]))))
    assert float(uniformity_loss(x)) == pytest.approx(expected, rel=1e-5)


def test_damaged_head_scores_lowest_and_scores_are_finite(minilm, corpus_sentences):
    attn = minilm[0].model.encoder.layer[3].attention.self
    with torch.no_grad():  # head 7 of layer 3 now outputs nothing
        attn.value.weight[7 * 32:8 * 32] = 0.0
        attn.value.bias[7 * 32:8 * 32] = 0.0
    weights = {k: v.clone() for k, v in minilm.state_dict().items()}
    imp = compute_importance(minilm, corpus_sentences[:128], batch_size=64)
    assert len(imp.heads) == 6 and all(h.shape == (12,) for h in imp.heads)
    assert all(n.shape == (1536,) for n in imp.neurons)
    assert all(np.isfinite(a).all() and (a >= 0).all() for a in imp.heads + imp.neurons)
    for layer in imp.heads + imp.neurons:  # normalised per layer
        assert np.linalg.norm(layer) == pytest.approx(1.0, rel=1e-6)
    assert int(np.argmin(imp.heads[3])) == 7
    assert imp.heads[3][7] < 1e-6 < np.sort(imp.heads[3])[1]
    assert np.isfinite(imp.alignment) and imp.alignment > 0  # dropout views differ
    assert imp.uniformity < 0
    # scoring does not change the model, nor leave hooks or gradients behind
    for k, v in minilm.state_dict().items():
        assert torch.equal(v, weights[k]), k
    assert all(p.grad is None for p in minilm.parameters())
    assert not minilm.training


def test_pairs_mode_and_bad_inputs(minilm, corpus_sentences):
    s = corpus_sentences[:32]
    imp = compute_importance(minilm, s[:16], positives=s[16:32], batch_size=16)
    assert all(np.isfinite(a).all() for a in imp.heads)
    with pytest.raises(ConfigError, match="partners"):
        compute_importance(minilm, s[:16], positives=s[:3])
    with pytest.raises(ConfigError, match="at least 2"):
        compute_importance(minilm, s[:1])
