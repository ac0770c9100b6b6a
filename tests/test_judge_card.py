"""The judge card end to end on known-answer judges: tc_usr_engaging (G1, yes/no, three USR raters per
item, six systems) judged by the fake backend under the five paraphrases and G1's four P1 controls
(``judge.controls=true``), then ``python -m promptlottery.analysis.card.build`` on the two sweep dirs.

Hand-derived numbers (``p``: the share of items whose human mean, mapped from the experiment's
``dataset.human_range`` (USR engaging: 1-3) onto the yes/no scale, is nearer yes, i.e. >= 2; the
oracle answers that label):

* ``meaning_following`` (the oracle under paraphrases; stricter -> no, more lenient and criterion
  dropped -> yes, reversed -> the mirrored label): no item changes, noise 0, signal
  ``(p + (1 - p) + 1 + (1 - p)) / 4 = (3 - p) / 4``, per direction ``p, 1 - p, 1, 1 - p``: follows;
  its judge-only mean on the raters' 1-3 scale is ``1 + 2p``;
* ``constant`` (always yes): nothing changes, signal ``(0 + 0 - 1 + 0) / 4 = -1/4``, noise 0:
  deaf and stable;
* ``inverted`` (the oracle, P3 mirrored, controls answered as the oracle): every item changes, noise
  4 of 10 paraphrase pairs = 0.4, signal -1/4: deaf and wording-sensitive.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf, open_dict

from promptlottery.analysis.card import build as card_mod
from promptlottery.stages import run_stage
from tests.conftest import compose

LIMIT = 36
ANALYSIS = {"embeddings": "none", "plots": False, "n_resamples": 100, "n_permutations": 10}
PARAPHRASES = ["P1", "P2", "P3", "P4", "P5"]
CONTROLS = ["P1_stricter", "P1_more_lenient", "P1_reversed", "P1_criterion_dropped"]


def _judge(tmp, behaviour: str):
    cfg = compose(
        ["+experiment=tc_usr_engaging", "backbone=fake", f"dataset.limit={LIMIT}", "dataset.sample_by=item"],
        tmp_path=tmp,
    )
    with open_dict(cfg):
        cfg.backbone.backend.behaviour = behaviour
        cfg.backbone.backend.inverted_variant = "P3"
        if behaviour == "constant":
            cfg.backbone.backend.label = "yes"
    for v in PARAPHRASES:
        with open_dict(cfg):
            cfg.judge.variant = v
        run_stage(cfg, tmp / "grid" / v)
    for v in CONTROLS:
        with open_dict(cfg):
            cfg.judge.variant = v
            cfg.judge.controls = True
        run_stage(cfg, tmp / "controls" / v)
    if behaviour == "meaning_following":  # the lottery beside the card: verdict prints the card's headline
        with open_dict(cfg):
            cfg.analysis = {
                **(OmegaConf.to_container(cfg.analysis, resolve=True) if cfg.get("analysis") else {}),
                **ANALYSIS,
                "runs": str(tmp / "grid"),
            }
            cfg.stage = "lottery"
        run_stage(cfg, tmp / "lottery")
    out = tmp / "card"
    rc = card_mod.main(
        [
            str(tmp / "grid"),
            str(tmp / "controls"),
            "--out",
            str(out),
            "--n-draws",
            "40",
            "--n-resamples",
            "200",
        ]
    )
    assert rc == 0
    (page,) = out.glob("*/card.md")
    card = json.loads((page.parent / "card.json").read_text())
    humans = pd.read_parquet(tmp / "grid" / "P1" / "judgments.parquet").drop_duplicates("item_id")["human"]
    # the oracle's label: the human mean mapped from engaging's human_range [1, 3] onto (yes = 1,
    # no = 0), a tie to the label listed first (yes): yes iff the mean is >= 2
    assert list(cfg_range(tmp)) == [1.0, 3.0]
    p = float(np.mean(humans.to_numpy(float) >= 2))
    return card, page, p


def cfg_range(tmp) -> list[float]:
    return json.loads((tmp / "grid" / "P1" / "results.json").read_text())["config"]["dataset"]["human_range"]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    return {b: _judge(tmp_path_factory.mktemp(b), b) for b in ("meaning_following", "constant", "inverted")}


def test_meaning_following_oracle_follows(judged):
    card, page, p = judged["meaning_following"]
    ctl = card["controls"]
    assert 0 < p < 1
    assert ctl["signal"] == pytest.approx((3 - p) / 4) and ctl["noise"] == 0.0
    assert ctl["per_direction"] == pytest.approx(
        {"stricter": p, "more_lenient": 1 - p, "reversed": 1.0, "criterion_dropped": 1 - p}
    )
    assert ctl["verdict"] == "follows" and not ctl["deaf"]
    assert card["lottery"]["changed"] == 0.0 and card["n_items"] == LIMIT
    # the card maps yes/no onto the raters' observed range, USR engaging's 1-3: no -> 1, yes -> 3
    assert card["human_scale"] == [1.0, 3.0]
    judge_mean = card["corrected"]["per_wording"]["P1"][0]["judge_mean"]
    assert judge_mean == pytest.approx(1 + 2 * p)
    text = page.read_text()
    assert "FAKE" in text and "follows" in text and card["fake"]
    assert (page.parent / "card.png").stat().st_size > 10_000


def test_verdict_prints_the_card_headline(judged):
    from promptlottery.analysis.lottery.first_screen import show

    card, page, _ = judged["meaning_following"]
    text = show(page.parent.parent.parent / "lottery")
    assert "Judge cards:" in text and card["headline"] in text and "controls: follows" in text


def test_constant_judge_is_deaf_and_stable(judged):
    card, _, _ = judged["constant"]
    ctl = card["controls"]
    assert ctl["signal"] == pytest.approx(-0.25) and ctl["noise"] == 0.0
    assert ctl["verdict"] == "deaf: stable" and card["lottery"]["changed"] == 0.0
    assert "does not follow its meaning-changing controls" in card["verdict_text"]


def test_wording_sensitive_judge_is_deaf_and_noisy(judged):
    card, _, _ = judged["inverted"]
    ctl = card["controls"]
    assert ctl["noise"] == pytest.approx(0.4) and ctl["signal"] == pytest.approx(-0.25)
    assert ctl["verdict"] == "deaf: wording-sensitive" and card["lottery"]["changed"] == 1.0


def test_controls_are_refused_unless_asked(tmp_path):
    from promptlottery.errors import UserError

    cfg = compose(
        [
            "+experiment=tc_usr_engaging",
            "backbone=fake",
            "dataset.limit=4",
            "dataset.sample_by=item",
            "judge.variant=P1_stricter",
        ],
        tmp_path=tmp_path,
    )
    with pytest.raises(UserError, match="judge it only with judge.controls=true"):
        run_stage(cfg, tmp_path / "job")


def test_card_cli_bad_dir(tmp_path, capsys):
    assert card_mod.main([str(tmp_path / "nope")]) == 2
    assert "no sweep directory" in capsys.readouterr().err


def test_pairwise_card_always_first(tmp_path):
    """PandaLM (three annotators a pair), ``always_first``: it answers A in both orders, so every pair
    is judged inconsistently (1.0) and the first-shown answer always wins (1.0); averaged over the two
    orders each pair is a tie (0.5), so the raw and length-controlled win rates are 0.5 and phi 0, and
    the corrected win rate is the human-only one (the power-tuning lambda of a constant judge is 0)."""
    cfg = compose(["+experiment=pandalm_pairwise", "backbone=fake", "dataset.limit=30"], tmp_path=tmp_path)
    with open_dict(cfg):
        cfg.backbone.backend.behaviour = "always_first"
    for v in ("P1", "P2"):
        with open_dict(cfg):
            cfg.judge.variant = v
        run_stage(cfg, tmp_path / "grid" / v)
    cards = card_mod.build_cards([str(tmp_path / "grid")], card_mod.CardOptions(n_resamples=100, n_draws=10))
    (card,) = cards
    pos = card["position"]["per_wording"]["P1"]
    assert pos["inconsistent"] == 1.0 and pos["first_rate"] == 1.0 and pos["n"] == 30
    ln = card["length"]["per_wording"]["P1"]
    assert (
        ln["win_rate_1"] == 0.5
        and ln["lc_win_rate_1"] == pytest.approx(0.5)
        and ln["phi"] == pytest.approx(0.0, abs=1e-9)
    )
    assert card["alt_test"]["per_wording"]["P1"]["n_annotators"] == 3
    # a constant judge (0.5 on every pair) carries no information: lambda* = 0, PPI++ is the human-only interval
    row = card["corrected"]["per_wording"]["P1"][0]
    assert row["judge_mean"] == 0.5 and row["ppi_width"] == pytest.approx(row["human_width"])
    assert row["ppi_coverage"] == row["human_coverage"]
