"""The acceptance rules on small hand-made tensors (decoding/acceptance_rules.py, decoding/sampling.py): the
first emitted token's closed form, exact and under the labelled lossy rule, and the lossy rule's
samples against it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specbench.analysis.verify.lossless_tests import goodness_of_fit
from specbench.decoding.acceptance_rules import (
    LossyRule,
    accept_draft,
    exact_beta,
    first_token_distribution,
    lossy_accept,
)
from specbench.decoding.sampling import sample


def test_first_token_closed_form_hand_values() -> None:
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.3, 0.5])
    dist, accept = first_token_distribution(p, q)  # exact: P = p, acceptance β = 0.7
    assert torch.allclose(dist.float(), p) and accept == pytest.approx(float(exact_beta(p, q)))
    assert accept == pytest.approx(0.7)
    # ε = 0.1: token 2 (q − p = 0.3 > ε) still takes the exact test, so nothing changes
    dist, accept = first_token_distribution(p, q, 0.1)
    assert torch.allclose(dist.float(), p) and accept == pytest.approx(0.7)
    # ε = 0.3: every draft token is accepted outright, the first token follows q
    dist, accept = first_token_distribution(p, q, 0.3)
    assert torch.allclose(dist.float(), q) and accept == pytest.approx(1.0)
    assert 0.5 * float((dist - p.double()).abs().sum()) == pytest.approx(0.3)


@pytest.mark.slow  # seconds, not milliseconds: make test runs it, make test-fast does not
def test_lossy_rule_samples_match_its_closed_form() -> None:
    gen = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(6, generator=gen) * 2, dim=-1)
    q = torch.softmax(torch.randn(6, generator=gen) * 2, dim=-1)
    eps = 0.1
    expected, accept = first_token_distribution(p, q, eps)
    n = 8000
    firsts, accepted = [], 0
    p2 = torch.stack([p, p])  # (γ+1, V) at γ = 1
    for _ in range(n):
        y = sample(q, gen).reshape(1)
        d = lossy_accept(y, p2, q.unsqueeze(0), False, eps, gen)
        firsts.append(int(y) if d.n_accepted else d.next_token)
        accepted += d.n_accepted
    fit = goodness_of_fit(np.bincount(firsts, minlength=6), expected.numpy())
    assert fit.p_value > 1e-3
    assert accepted / n == pytest.approx(accept, abs=4 * np.sqrt(accept * (1 - accept) / n))
    assert accept > float(exact_beta(p, q))  # it accepts more than the exact rule
    # greedy: the relaxation changes nothing
    one_hot = torch.eye(6)[[2, 4]]
    d_exact = accept_draft(torch.tensor([3]), one_hot, None, True)
    assert lossy_accept(torch.tensor([3]), one_hot, None, True, 0.5) == d_exact
    with pytest.raises(ValueError):
        LossyRule(1.5)
