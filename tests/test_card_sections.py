"""The judge card's corrected-estimate pieces on hand cases: the coverage simulation, the rank study."""

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.card.corrected import coverage, discordant_share, rank_changes
from promptlottery.analysis.card.ppi_coverage import simulated_judges
from promptlottery.analysis.card.sections import scale_mapper


def test_discordant_pairs_by_hand():
    a = pd.Series({"s1": 1.0, "s2": 2.0, "s3": 3.0})
    b = pd.Series({"s1": 1.0, "s2": 3.0, "s3": 2.0})  # only (s2, s3) swaps: 1 of 3 pairs
    assert discordant_share(a, b) == pytest.approx(1 / 3)
    assert discordant_share(a, a) == 0.0


def test_coverage_of_a_biased_judge():
    rng = np.random.default_rng(0)
    y = rng.integers(1, 6, 1000).astype(float)
    f = y + 10.0  # a judge off by 10 points: its own interval never covers the human mean
    r = coverage(y, f, 100, n_draws=200, level=0.9, seed=1)
    assert r["judge_covers"] == 0.0 and r["judge_mean"] == pytest.approx(y.mean() + 10)
    # f is y shifted: Y - lambda f has the variance of (1 - lambda) y, so PPI++ is narrower than human-only
    assert r["ppi_width"] < r["human_width"]
    assert 0.8 <= r["ppi_coverage"] <= 1.0 and 0.8 <= r["human_coverage"] <= 1.0
    assert (r["n"], r["N"], r["draws"]) == (100, 1000, 200)


def test_rank_changes_vanish_for_judges_equal_to_the_humans():
    rng = np.random.default_rng(0)
    systems = np.repeat(np.array(["a", "b", "c", "d"], dtype=object), 20)
    y = rng.normal(0, 1, 80) + np.repeat([0.0, 1.0, 2.0, 3.0], 20)
    r = rank_changes(y, {"P1": y, "P2": y}, systems, share=0.25, n_draws=5, level=0.9, seed=0)
    assert r["between_wordings_before"] == 0.0 and r["between_wordings_after"] == 0.0
    assert r["vs_humans_before"] == 0.0 and r["n_systems"] == 4


def test_simulated_judges_and_scale_mapping():
    y = np.array([1.0, 3.0, 5.0, 2.0])
    js = simulated_judges(
        y, np.array(["a", "a", "b", "b"], dtype=object), scale=(1, 5), noise_sd=0.0, system_sd=0.0
    )
    assert js["P3"].tolist() == y.tolist()  # bias 0, no noise: the human labels themselves
    assert js["P5"].tolist() == [2.0, 4.0, 5.0, 3.0]  # bias +0.9 rounded, clipped at 5
    assert scale_mapper((0, 1), (1, 3))(np.array([0.0, 1.0])).tolist() == [1.0, 3.0]


def test_rogan_gladen_section_and_per_system_estimates():
    from types import SimpleNamespace

    from promptlottery.analysis.card.corrected import per_system, rogan_gladen_section

    opts = SimpleNamespace(slices=(25, 50), n_draws=100, seed=0, ppi_level=0.9)
    y = np.array([1.0, 3.0] * 40)  # binary human labels at the ends of a 1-3 scale, share of 3s = 0.5
    r = rogan_gladen_section(
        y, {"P1": y.copy()}, opts
    )  # a perfect judge: Se = Sp = 1, the estimate is the share
    assert r["human_share"] == 0.5 and r["per_wording"]["P1"]["mean_estimate"] == pytest.approx(0.5)
    assert r["per_wording"]["P1"]["coverage"] == 1.0 and r["per_wording"]["P1"]["n"] == 25
    assert "missing" in rogan_gladen_section(np.arange(80.0), {"P1": np.arange(80.0)}, opts)
    systems = np.repeat(np.array(["a", "b"], dtype=object), 40)
    ps = per_system(y, {"P1": y + 1.0}, systems, share=0.25, level=0.9, seed=0)
    row = ps["per_wording"]["P1"]["a"]
    assert (
        row["judge_only"] == pytest.approx(3.0)
        and row["human"] == pytest.approx(2.0)
        and row["n_labelled"] == 10
    )
    assert row["ci"][0] <= 2.0 <= row["ci"][1]  # PPI++ removes the judge's +1 bias


def test_ppi_coverage_cli_refuses_in_one_line(capsys):
    from promptlottery.analysis.card.ppi_coverage import main
    from tests.conftest import DATA_DIR

    assert main(["--dataset", "summeval", "--criterion", "nope", "--data-dir", str(DATA_DIR)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: summeval/nope has 0 labelled items") and err.count("\n") == 1
    assert main(["--dataset", "summeval", "--criterion", "coherence", "--scale", "1-5"]) == 2
