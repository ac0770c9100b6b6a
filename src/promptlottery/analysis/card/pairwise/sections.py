"""The pairwise judge card's own sections (:class:`~promptlottery.analysis.card.pairwise.card.PairwiseCard`):
the lottery and human agreement on the first order's verdict, position bias (a pair judged in both
orders), AlpacaEval 2's length term, the control sensitivity of a pair in one order and the alt-test
on the first order's verdict. A verdict is the argmax preference in the pair's terms (``"1"``,
``"2"``, ``"tie"``: :mod:`promptlottery.modes.pairwise`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from promptlottery.analysis.card.alt import epsilon_for, few_items_note, rho_ci
from promptlottery.analysis.card.controls import controls_measures, missing_controls
from promptlottery.analysis.card.sections import SOURCES, ci_bounds, rater_columns
from promptlottery.metrics.alt_test import alt_test
from promptlottery.metrics.bootstrap import bootstrap_ci
from promptlottery.metrics.length_bias import length_controlled_win_rate
from promptlottery.modes.pairwise import ORDERS

#: the pair's two presentation orders (the mode's vocabulary): response_a shown first, then swapped
FIRST, SECOND = ORDERS


def pref_value(preferred) -> float:
    return {"1": 1.0, "2": 0.0, "tie": 0.5}.get(preferred, np.nan)


def lottery_pairwise(para, wordings, opts) -> dict:
    p12 = para[para["order"] == FIRST]
    lab = p12.pivot_table(index="item_id", columns="variant", values="preferred", aggfunc="first").reindex(
        columns=wordings
    )
    ok = lab.notna().sum(axis=1) >= 2
    changed = np.array([len(set(r.dropna())) > 1 for _, r in lab[ok].iterrows()], dtype=float)
    if changed.size < 2:
        return {"missing": "fewer than 2 pairs with two paraphrase verdicts"}
    ch = bootstrap_ci(np.mean, changed, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed)
    hum = p12.drop_duplicates("item_id").set_index("item_id")["human_preferred"].reindex(lab.index)
    per = {}
    for w in wordings:
        keep = lab[w].notna() & hum.notna()
        agree = (lab[w][keep] == hum[keep]).to_numpy(float)
        if agree.size >= 2:
            r = bootstrap_ci(np.mean, agree, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed)
            per[w] = {"agreement": r.estimate, "ci": ci_bounds(r), "n": int(agree.size)}
    return {
        "changed": ch.estimate,
        "changed_ci": ci_bounds(ch),
        "n": int(changed.size),
        "per_wording": per,
        "source": SOURCES["lottery"].replace(
            "Spearman of each wording's verdict with the human mean",
            "agreement with the human majority (order 12)",
        ),
    }


def position_bias(para, wordings, opts) -> dict:
    per = {}
    for w in wordings:
        rows = para[para["variant"] == w]
        wide = rows.pivot_table(index="item_id", columns="order", values="preferred", aggfunc="first")
        if not {FIRST, SECOND} <= set(wide.columns):
            continue
        wide = wide.dropna()
        incons = (wide[FIRST] != wide[SECOND]).to_numpy(float)
        shown_first = np.r_[(wide[FIRST] == "1").to_numpy(float), (wide[SECOND] == "2").to_numpy(float)]
        decided = np.r_[(wide[FIRST] != "tie").to_numpy(bool), (wide[SECOND] != "tie").to_numpy(bool)]
        if incons.size < 2 or decided.sum() < 2:
            continue
        a = bootstrap_ci(np.mean, incons, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed)
        b = bootstrap_ci(
            np.mean, shown_first[decided], n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed
        )
        per[w] = {
            "inconsistent": a.estimate,
            "inconsistent_ci": ci_bounds(a),
            "first_rate": b.estimate,
            "first_rate_ci": ci_bounds(b),
            "n": int(incons.size),
        }
    if not per:
        return {"missing": "no wording judged in both orders (judge.position_swap=false?)"}
    return {"per_wording": per, "source": SOURCES["position"]}


def length_pairwise(para, wordings, texts, note, opts) -> dict:
    if not texts:
        return {"missing": note or "no item texts"}
    per = {}
    for w in wordings:
        rows = para[para["variant"] == w].assign(p=lambda d: d["preferred"].map(pref_value))
        pref = rows.groupby("item_id")["p"].mean()  # the two orders averaged
        l1 = np.array([len(texts.get(i, {}).get("response_a", "")) for i in pref.index], float)
        l2 = np.array([len(texts.get(i, {}).get("response_b", "")) for i in pref.index], float)
        hum = (
            rows.drop_duplicates("item_id")
            .set_index("item_id")["human_preferred"]
            .reindex(pref.index)
            .map(pref_value)
        )
        r = length_controlled_win_rate(
            pref.to_numpy(), l1, l2, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed
        )
        longer1 = l1 > l2
        dec = (pref.to_numpy() != 0.5) & (l1 != l2) & ~np.isnan(pref.to_numpy())
        longer_wins = (
            float(np.mean((pref.to_numpy()[dec] > 0.5) == longer1[dec])) if dec.any() else float("nan")
        )
        hdec = (hum.to_numpy() != 0.5) & (l1 != l2) & ~np.isnan(hum.to_numpy())
        h_longer = (
            float(np.mean((hum.to_numpy()[hdec] > 0.5) == longer1[hdec])) if hdec.any() else float("nan")
        )
        per[w] = {
            "lc_win_rate_1": r.estimate,
            "ci": ci_bounds(r),
            "win_rate_1": r.extra["win_rate"],
            "phi": r.extra["phi"],
            "phi_ci": [r.extra["phi_low"], r.extra["phi_high"]],
            "longer_wins_judge": longer_wins,
            "longer_wins_humans": h_longer,
            "n": r.n,
        }
    return {"per_wording": per, "source": SOURCES["length_pairwise"]}


def alt_test_pairwise(para, wordings, dataset, opts) -> dict:
    raters = rater_columns(para[para["order"] == FIRST])
    if raters.empty or raters.notna().sum(axis=1).max() < 3:
        return {"missing": "fewer than 3 human votes per pair (the alt-test asks for >= 3)"}
    code = {"1": 0.0, "2": 1.0, "tie": 2.0}
    h = raters.apply(lambda col: col.map(code))
    eps, why = epsilon_for(dataset, opts)
    per = {}
    for w in wordings:
        f = (
            para[(para["variant"] == w) & (para["order"] == FIRST)]
            .set_index("item_id")["preferred"]
            .reindex(h.index)
            .map(code)
        )
        r = alt_test(
            f.to_numpy(float),
            h.to_numpy(float),
            epsilon=eps,
            scoring="accuracy",
            min_items_per_human=min(30, len(h)),
        )
        per[w] = {
            "winning_rate": r.winning_rate,
            "advantage_probability": r.advantage_probability,
            "rho_ci": rho_ci(f.to_numpy(float), h.to_numpy(float), eps, "accuracy", opts),
            "passed": r.passed,
            "n_items": r.n_items,
            "n_annotators": r.n_annotators,
        }
    return {
        **few_items_note(len(h)),
        "per_wording": per,
        "epsilon": eps,
        "epsilon_reason": why,
        "scoring": "accuracy (order 12 verdict)",
        "source": SOURCES["alt_test"],
    }


PAIRWISE_UNIT = (
    "a pair in one order; its verdict the argmax preference for response 1 (1 wins, 0 loses, 0.5 tie); "
    "stricter = toward a tie, more lenient = away from it, reversed = the other side preferred"
)


def _preferences(rows: pd.DataFrame, columns) -> pd.DataFrame:
    """(pair, order) x variant: the argmax preference for response 1 (tie 0.5)."""
    v = rows.assign(p=rows["preferred"].map({"1": 1.0, "2": 0.0, "tie": 0.5}))
    return v.pivot_table(index=["item_id", "order"], columns="variant", values="p", aggfunc="first").reindex(
        columns=columns
    )


def controls_pairwise(para, ctrl, wordings, controls, opts) -> dict:
    """Pairwise: (pair, order) x wordings and x controls of the preference for response 1."""
    if (gone := missing_controls(ctrl, controls)) is not None:
        return gone
    judged = [c for c in controls if c in set(ctrl["variant"])]
    pm = _preferences(para, wordings)
    cm = _preferences(ctrl, judged).reindex(index=pm.index)
    clusters = pm.index.get_level_values("item_id").to_numpy()
    out = controls_measures(pm, cm, wordings, controls, judged, opts, pairwise=True, clusters=clusters)
    n_pairs = len(set(clusters[~pm.isna().all(axis=1).to_numpy()]))
    n_text = f"{out['n']} pair-orders of {n_pairs} pairs (unit: {PAIRWISE_UNIT})"
    return {**out, "n_pairs": n_pairs, "unit": PAIRWISE_UNIT, "n_text": n_text}
