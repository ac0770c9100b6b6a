"""The lottery analysis on an analytic sweep: the wording sensitivity of each criterion of an
analytic rubric (ASAP set 1's five ASAP++ traits, three wordings, the fake backend).

The judge is the inverted oracle: under P1 and P2 it answers each trait's human label, under P3 the
label mirrored on the 1-6 scale (l -> 7 - l). Every number below is worked out by hand from the
human trait values and the definitions the report names: the correlation with the human labels is
+1 for P1 and P2 and -1 for P3; every essay changes its verdict under some wording (7 - l != l on
1-6); the mean pairwise Cohen's kappa is (1 + 2 kappa(l, 7 - l)) / 3 and Fleiss' kappa that of the
items x (l, l, 7 - l) matrix.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from promptlottery.stages import run_stage
from tests.conftest import DATA_DIR, compose
from tests.test_known_answers import fleiss

TRAITS = ["content", "organization", "word_choice", "sentence_fluency", "conventions"]
APPROX = {"abs": 6e-5}  # the tables are written with four decimals


def cohen(a: list[str], b: list[str]) -> float:
    """Cohen (1960): (p_o - p_e) / (1 - p_e), p_o the share of items with the same label, p_e the
    sum over labels of the product of the two raters' shares of it."""
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[c] * cb[c] for c in set(a) | set(b)) / n**2
    return (p_o - p_e) / (1 - p_e)


@pytest.mark.skipif(not (DATA_DIR / "asap").is_dir(), reason="needs ../shared/data/asap")
def test_the_lottery_measures_each_traits_wording_sensitivity(tmp_path):
    judge = ["backbone=fake", "backbone.backend.behaviour=inverted", "dataset=asap_set1", "dataset.limit=6",
             "judge=analytic_asap_set1"]  # fmt: skip
    for v in ("P1", "P2", "P3"):
        run_stage(compose([*judge, f"judge.variant={v}"], tmp_path=tmp_path), tmp_path / "grid" / v)
    analysis = ["+analysis=lottery", f"analysis.runs={tmp_path / 'grid'}", "analysis.embeddings=none",
                "analysis.plots=false", "analysis.n_resamples=50", "analysis.n_permutations=10"]  # fmt: skip
    assert run_stage(compose(analysis, tmp_path=tmp_path), tmp_path / "lottery")["status"] == "ok"

    def table(name: str) -> pd.DataFrame:
        return pd.read_csv(
            tmp_path / "lottery" / "tables" / f"{name}.csv", keep_default_na=False, na_values=[""]
        )

    p1 = pd.read_parquet(tmp_path / "grid" / "P1" / "judgments.parquet")
    configs = table("configurations").set_index("criterion")
    assert sorted(configs.index) == sorted(TRAITS) and set(configs["n_items"]) == {6}
    verdict = table("verdict").set_index("config_id")
    corr = table("variant_human_correlation")
    agree = table("agreement_collapse")
    agree = agree[agree.setting == "paraphrases"].set_index("config_id")
    for trait in TRAITS:
        config = configs.loc[trait, "config_id"]
        human = p1[p1.criterion == trait].sort_values("item_id")["human"].to_numpy(float)
        assert (human == np.round(human)).all() and set(human) <= set(range(1, 7))
        same = [str(int(h)) for h in human]
        mirrored = [str(7 - int(h)) for h in human]
        r = corr[corr.config_id == config].set_index("variant")["pearson"]
        if len(set(same)) > 1:
            assert (r["P1"], r["P2"], r["P3"]) == pytest.approx((1.0, 1.0, -1.0), **APPROX)
        assert verdict.loc[config, "changed"] == 1.0
        assert verdict.loc[config, "kappa"] == pytest.approx((1 + 2 * cohen(same, mirrored)) / 3, **APPROX)
        matrix = np.array([same, same, mirrored]).T
        assert agree.loc[config, "fleiss_kappa"] == pytest.approx(fleiss(matrix), **APPROX)
