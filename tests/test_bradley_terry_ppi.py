"""PPI++ Bradley-Terry (metrics.bradley_terry_ppi) by hand and against ppi_py's logistic PPI++.

Hand case (the module docstring): two systems, every pair "A vs B", so the design is one column
(B's strength, A the reference at 0) and the estimating equation reads
``sigmoid(-beta_B) = lambda mean(f~) + mean(Y) - lambda mean(f)``: the PPI++ mean on the logit scale.
Labelled Y = (1, 1, 1, 0), judge f = (1, 1, 0, 0) on them, f~ = (1, 1, 1, 1, 0, 0, 0, 0) unlabelled:
at lambda = 1/2, 1/2 * 1/2 + 3/4 - 1/2 * 1/2 = 3/4, beta_B = -log 3; at lambda = 0 the labelled-only
fit, 3/4 again; at lambda = 1, 1/2 + 3/4 - 1/2 = 3/4 (this judge's mean error is the same labelled
and unlabelled).
"""

import math

import numpy as np
import pytest

from promptlottery.metrics.bradley_terry_ppi import bt_design, bt_fit, ppi_bradley_terry

Y = [1, 1, 1, 0] + [0] * 8  # the unlabelled pairs' y are never read
F = [1, 1, 0, 0] + [1, 1, 1, 1, 0, 0, 0, 0]
LAB = [True] * 4 + [False] * 8


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_two_systems_is_the_ppi_mean_on_the_logit_scale(lam):
    r = ppi_bradley_terry(["A"] * 12, ["B"] * 12, Y, F, LAB, lam=lam)
    assert r.systems == ["A", "B"] and r.strength[0] == 0.0
    assert r.strength[1] == pytest.approx(-math.log(3), abs=1e-8)
    assert r.low[1] < r.strength[1] < r.high[1] and (r.n_labelled, r.n_unlabelled) == (4, 8)


def test_design_and_plain_fit():
    x, names = bt_design(["A", "B", "C"], ["B", "C", "A"])
    assert names == ["A", "B", "C"] and x.tolist() == [[-1, 0], [1, -1], [0, 1]]
    # three systems in a cycle, each pair won 3 of 4 times by its first: every strength equal
    first, second = ["A", "B", "C"] * 4, ["B", "C", "A"] * 4
    y = [1, 1, 1] * 3 + [0, 0, 0]
    assert bt_fit(bt_design(first, second)[0], y) == pytest.approx([0.0, 0.0], abs=1e-8)


def test_bad_input():
    with pytest.raises(ValueError, match="not in systems"):
        bt_design(["A"], ["Z"], ["A", "B"])
    with pytest.raises(ValueError, match="at least 2 systems"):
        bt_design(["A"], ["A"])
    with pytest.raises(ValueError, match="one entry per pair"):
        ppi_bradley_terry(["A", "B"], ["B", "A"], [1, 0], [1], [True, False])


def test_against_ppi_python_logistic():
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(1)
    names = ["s0", "s1", "s2", "s3"]
    a = rng.integers(0, 4, 300)
    b = (a + rng.integers(1, 4, 300)) % 4
    strength = np.array([0.0, 0.5, 1.0, -0.5])
    y = (rng.random(300) < 1 / (1 + np.exp(-(strength[a] - strength[b])))).astype(float)
    for noise in (0.1, 0.6):  # a good judge (lambda clipped to 1) and a poor one (lambda < 1)
        f = np.clip(0.7 * y + 0.15 + rng.normal(0, noise, 300), 0, 1)
        lab = np.zeros(300, bool)
        lab[rng.choice(300, 80, replace=False)] = True
        first, second = np.array(names)[a], np.array(names)[b]
        ours = ppi_bradley_terry(first, second, y, f, lab, systems=names, level=0.9)
        x, _ = bt_design(first, second, names)
        opt = {"ftol": 1e-15}
        est = ppi_py.ppi_logistic_pointestimate(
            x[lab], y[lab], f[lab], x[~lab], f[~lab], optimizer_options=opt
        )
        low, high = ppi_py.ppi_logistic_ci(
            x[lab], y[lab], f[lab], x[~lab], f[~lab], alpha=0.1, optimizer_options=opt
        )
        assert ours.strength[1:] == pytest.approx(est, abs=1e-6)
        assert ours.low[1:] == pytest.approx(low, abs=1e-6) and ours.high[1:] == pytest.approx(high, abs=1e-6)
