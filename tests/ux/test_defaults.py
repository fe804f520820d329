"""Issue 12 E18: reducer defaults are the settings the project's measurements favour."""

from __future__ import annotations

import pytest

from slimvec.errors import ConfigError
from slimvec.reducers import load_reducer, make_reducer


def test_embedtextnet_default_gamma_is_the_measured_one_and_paper_rule_is_named(minilm_vectors, tmp_path):
    X = minilm_vectors[:600]
    default = make_reducer("embedtextnet:8,epochs=1,width=4").fit(X)
    paper = make_reducer("embedtextnet:8,epochs=1,width=4,gamma=paper").fit(X)
    # BENCHMARKS.md: gamma = 1000 beats PCA at D = 16, the paper's rule (10 on MiniLM) collapses
    assert default.gamma_ == 1000.0
    assert paper.gamma_ == 10.0
    assert "gamma" not in default.spec and "gamma=paper" in paper.spec
    paper.save(tmp_path / "r")
    assert load_reducer(tmp_path / "r").gamma_ == 10.0


@pytest.mark.parametrize("bad", ["gamma=rule", "gamma=0", "gamma=-3"])
def test_embedtextnet_bad_gamma_is_a_clear_error(minilm_vectors, bad):
    with pytest.raises(ConfigError, match="gamma must be a positive number or 'paper'"):
        make_reducer(f"embedtextnet:8,epochs=1,width=4,{bad}").fit(minilm_vectors[:64])


def test_mcr2_default_lam_is_the_measured_one_and_paper_value_is_named(minilm_vectors):
    X = minilm_vectors[:256]
    pairs = [[i, i + 1] for i in range(0, 256, 2)]
    opts = "clusters=4,hidden=32,epochs=1,warmup_epochs=1,batch_size=64"
    default = make_reducer(f"mcr2:16,{opts}").fit(X, pairs=pairs)
    paper = make_reducer(f"mcr2:16,{opts},lam=paper").fit(X, pairs=pairs)
    # docs/benchmarks/learned.md: the paper's lam (2000 at D <= 100) collapsed the features
    assert default.lam_ == 100.0
    assert paper.lam_ == 2000.0
    with pytest.raises(ConfigError, match="lam must be a number >= 0 or 'paper'"):
        make_reducer(f"mcr2:16,{opts},lam=big").fit(X, pairs=pairs)
