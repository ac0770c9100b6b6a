"""The pairwise judge card end to end on known-answer judges: PandaLM (three annotators a
pair, ties allowed) judged by the fake backend under G17's five paraphrases and its four P1 controls
(``judge.controls=true``), both orders, then the card on the two sweep dirs.

The unit is a pair in one order; its verdict the preference for response 1 (1, 0, or 0.5 for a tie).
With ``t`` the share of pairs whose human majority is a tie, the hand-derived numbers (``metrics.controls``, pairwise: stricter ``|b - 1/2| - |c - 1/2|``, more
lenient its negative, reversed ``|c - b| - |(1 - c) - b|``, criterion dropped ``|c - b|``):

* ``meaning_following``: the oracle under every paraphrase, noise 0; stricter answers the tie (shift
  1/2 on a decided pair, 0 on a tie: ``(1 - t) / 2``); more lenient breaks a tie for the answer shown
  first (response 1 in order 12, response 2 in order 21: shift 1/2 on a tie, ``t / 2``); reversed
  swaps the sides (1 on a decided pair, 0 on a tie: ``1 - t``); criterion dropped answers A, the
  answer shown first (response 1 then response 2: ``|c - b|`` is 1 in one order and 0 in the other
  on a decided pair, 1/2 in both on a tie: ``1/2``). Signal ``(2 - t) / 4``: follows.
* ``constant`` (always A: response 1 in order 12, response 2 in order 21): every control says what
  P1 says, shifts 0, 0, -1, 0: signal -1/4, noise 0: deaf and stable.
* ``inverted`` (P3 mirrored, controls answered as the oracle): 4 of 10 paraphrase pairs differ by 1 on
  a decided pair, noise ``0.4 (1 - t)``; reversed -1 on a decided pair: signal ``-(1 - t) / 4``: deaf
  and wording-sensitive.
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

PARAPHRASES = ["P1", "P2", "P3", "P4", "P5"]
CONTROLS = ["P1_stricter", "P1_more_lenient", "P1_reversed", "P1_criterion_dropped"]


def _card(tmp, behaviour: str):
    cfg = compose(["+experiment=pandalm_pairwise", "backbone=fake", "dataset.limit=30"], tmp_path=tmp)
    with open_dict(cfg):
        cfg.backbone.backend.behaviour = behaviour
        cfg.backbone.backend.inverted_variant = "P3"
        cfg.backbone.backend.label = "A"
    for v in PARAPHRASES + CONTROLS:
        with open_dict(cfg):
            cfg.judge.variant = v
            cfg.judge.controls = v in CONTROLS
        run_stage(cfg, tmp / ("controls" if v in CONTROLS else "grid") / v)
    opts = card_mod.CardOptions(n_resamples=200, n_draws=10)
    (card,) = card_mod.build_cards([str(tmp / "grid"), str(tmp / "controls")], opts)
    pref = pd.read_parquet(tmp / "grid" / "P1" / "judgments.parquet").drop_duplicates("item_id")
    pref = pref["human_preferred"].to_numpy()
    return card, float(np.mean(pref == "tie")), tmp


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    return {b: _card(tmp_path_factory.mktemp(b), b) for b in ("meaning_following", "constant", "inverted")}


def test_meaning_following_follows_its_pairwise_controls(cards):
    card, t, _ = cards["meaning_following"]
    ctl = card["controls"]
    assert 0 < t < 1  # the 30 pairs hold ties and decided pairs
    assert ctl["per_direction"] == pytest.approx(
        {"stricter": (1 - t) / 2, "more_lenient": t / 2, "reversed": 1 - t, "criterion_dropped": 0.5}
    )
    assert ctl["signal"] == pytest.approx((2 - t) / 4) and ctl["noise"] == 0.0
    assert ctl["verdict"] == "follows" and (ctl["n"], ctl["n_pairs"]) == (60, 30)
    assert ctl["controls"] == CONTROLS
    assert card["controls_judged"] == sorted(CONTROLS) and card["wordings"] == PARAPHRASES


def test_constant_judge_is_deaf_to_pairwise_controls(cards):
    ctl = cards["constant"][0]["controls"]
    assert ctl["per_direction"] == pytest.approx(
        {"stricter": 0.0, "more_lenient": 0.0, "reversed": -1.0, "criterion_dropped": 0.0}
    )
    assert ctl["signal"] == pytest.approx(-0.25) and ctl["noise"] == 0.0 and ctl["verdict"] == "deaf: stable"


def test_inverted_judge_is_deaf_and_wording_sensitive(cards):
    card, t, _ = cards["inverted"]
    ctl = card["controls"]
    assert ctl["noise"] == pytest.approx(0.4 * (1 - t)) and ctl["signal"] == pytest.approx(-(1 - t) / 4)
    assert ctl["verdict"] == "deaf: wording-sensitive"


def test_oracle_ranks_the_systems_as_the_humans_do(cards):
    """Under every paraphrase the oracle's order-averaged preference is the human one (f = y on every
    pair), so each system's judge-only win rate is its all-human one, the judge-only Bradley-Terry
    strengths are the all-human fit's, and no two wordings (nor a wording and the humans) order two
    systems differently, before correction or after (the same f, the same slices)."""
    cor = cards["meaning_following"][0]["corrected"]
    for sys_rows in cor["per_system"]["per_wording"].values():
        assert len(sys_rows) == 5  # PandaLM's five response models
        for v in sys_rows.values():
            assert v["judge_only"] == pytest.approx(v["human"])
    rk = cor["ranks"]
    assert rk["n_systems"] == 5 and rk["unit"] == "pairs"
    assert (
        rk["between_wordings_before"] == 0
        and rk["vs_humans_before"] == 0
        and rk["between_wordings_after"] == 0
    )
    bt = cor["bradley_terry"]
    assert bt["defined_draws"] > 0 and bt["n_labelled"] == 15 and bt["n_pairs"] == 30
    for sys_rows in bt["per_wording"].values():
        assert sys_rows[bt["reference"]]["ppi"] == 0.0
        for v in sys_rows.values():
            assert v["judge_only"] == pytest.approx(v["human"], abs=1e-6)
            assert v["ci"][0] <= v["ppi"] <= v["ci"][1]
    assert (
        bt["between_wordings_before"] == 0
        and bt["vs_humans_before"] == 0
        and bt["between_wordings_after"] == 0
    )


def test_card_cli_on_a_pairwise_sweep_and_its_controls(cards, capsys):
    """The CLI on a paraphrase sweep dir and a controls sweep dir (one subdir per job): a page, a figure
    and the index, the headline printed, the fake named."""
    tmp = cards["constant"][2]
    out = tmp / "card_cli"
    argv = [
        str(tmp / "grid"),
        str(tmp / "controls"),
        "--out",
        str(out),
        "--n-draws",
        "10",
        "--n-resamples",
        "50",
    ]
    assert card_mod.main(argv) == 0
    (page,) = out.glob("*/card.md")
    text = page.read_text()
    assert (page.parent / "card.png").stat().st_size > 0 and (out / "cards.json").is_file()
    assert "FAKE judge" in text and "deaf: stable" in text and "pair-orders of 30 pairs" in text
    assert "Bradley-Terry" in text and "controls: deaf: stable" in capsys.readouterr().out


def test_verdict_on_a_pairwise_lottery_prints_its_sentence_and_the_card(cards):
    """``python -m promptlottery.analysis.lottery.verdict`` on a pairwise sweep's lottery (whose verdict table
    has a sentence but no kappa columns) prints that sentence and the card's headline."""
    from promptlottery.analysis.lottery.first_screen import show

    _, _, tmp = cards["constant"]
    cfg = compose(["+experiment=pandalm_pairwise", "backbone=fake", "dataset.limit=30"], tmp_path=tmp)
    with open_dict(cfg):
        cfg.analysis = {
            **OmegaConf.to_container(cfg.analysis, resolve=True),
            **{"embeddings": "none", "plots": False, "n_resamples": 50, "n_permutations": 10},
            "runs": str(tmp / "grid"),
        }
        cfg.stage = "lottery"
    run_stage(cfg, tmp / "lottery")
    assert (
        card_mod.main(
            [str(tmp / "grid"), str(tmp / "controls"), "--out", str(tmp / "card"), "--n-draws", "5"]
        )
        == 0
    )
    text = show(tmp / "lottery")
    assert "(pairwise): the verdict follows the position" in text
    (written,) = json.loads((tmp / "card" / "cards.json").read_text())
    assert written["headline"].startswith("FAKE judge fake x G17 on pandalm/preference")
    assert "Judge cards:" in text and written["headline"] in text and "controls: deaf: stable" in text
