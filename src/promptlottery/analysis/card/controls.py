"""The judge card's control section (:mod:`promptlottery.analysis.card.build`): the shift of the verdicts
under the prompt group's meaning-changing control variants against the shift under its paraphrases
(:func:`~promptlottery.metrics.controls.control_sensitivity`).

Pointwise the unit is an item and its verdict is the chosen verdict kind's score. Pairwise the unit
is a pair in one order and its verdict the argmax preference for response 1 (1 = response 1 wins, 0
= response 2 wins, 0.5 = a tie, whichever position it was shown in); the bootstrap resamples pairs
(both orders together), and the directions read as the pairwise ones (stricter = toward a tie,
reversed = the other side preferred).
"""

from __future__ import annotations

import pandas as pd

from promptlottery.analysis.card.sections import SOURCES
from promptlottery.metrics.controls import control_sensitivity

SOURCE = SOURCES["controls"]
PAIRWISE_UNIT = (
    "a pair in one order; its verdict the argmax preference for response 1 (1 wins, 0 loses, 0.5 tie); "
    "stricter = toward a tie, more lenient = away from it, reversed = the other side preferred"
)


def _missing(ctrl: pd.DataFrame, controls: dict) -> dict | None:
    if not controls:
        return {"missing": "the prompt group carries no control variants"}
    if ctrl.empty:
        return {
            "missing": "no control variant judged: rerun the sweep with judge.controls=true "
            f"judge.variant={','.join(controls)}"
        }
    return None


def _section(pm: pd.DataFrame, cm: pd.DataFrame, wordings, controls, judged, opts, **kw) -> dict:
    r = control_sensitivity(
        pm.to_numpy(float),
        cm.to_numpy(float),
        directions=[controls[c].control for c in judged],
        bases=[wordings.index(controls[c].base) if controls[c].base in wordings else 0 for c in judged],
        n_resamples=opts.n_resamples,
        level=opts.level,
        seed=opts.seed,
        **kw,
    )
    return {
        "signal": r.signal,
        "signal_ci": list(r.signal_ci),
        "noise": r.noise,
        "noise_ci": list(r.noise_ci),
        "margin": r.margin,
        "margin_ci": list(r.margin_ci),
        "ratio": r.ratio,
        "ratio_ci": list(r.ratio_ci),
        "verdict": r.verdict,
        "deaf": r.deaf,
        "n": r.n_items,
        "controls": judged,
        "per_direction": r.per_direction,
        "source": SOURCE,
    }


def controls_section(para, ctrl, wordings, controls, scale, opts) -> dict:
    """Pointwise: items x wordings and items x controls of the verdict ``value`` on ``scale``."""
    if (gone := _missing(ctrl, controls)) is not None:
        return gone
    judged = [c for c in controls if c in set(ctrl["variant"])]
    pm = para.pivot_table(index="item_id", columns="variant", values="value", aggfunc="first")
    pm = pm.reindex(columns=wordings)
    cm = ctrl.pivot_table(index="item_id", columns="variant", values="value", aggfunc="first")
    return _section(
        pm, cm.reindex(index=pm.index, columns=judged), wordings, controls, judged, opts, scale=scale
    )


def _preferences(rows: pd.DataFrame, columns) -> pd.DataFrame:
    """(pair, order) x variant: the argmax preference for response 1 (tie 0.5)."""
    v = rows.assign(p=rows["preferred"].map({"1": 1.0, "2": 0.0, "tie": 0.5}))
    return v.pivot_table(index=["item_id", "order"], columns="variant", values="p", aggfunc="first").reindex(
        columns=columns
    )


def controls_pairwise(para, ctrl, wordings, controls, opts) -> dict:
    """Pairwise: (pair, order) x wordings and x controls of the preference for response 1."""
    if (gone := _missing(ctrl, controls)) is not None:
        return gone
    judged = [c for c in controls if c in set(ctrl["variant"])]
    pm = _preferences(para, wordings)
    cm = _preferences(ctrl, judged).reindex(index=pm.index)
    clusters = pm.index.get_level_values("item_id").to_numpy()
    out = _section(pm, cm, wordings, controls, judged, opts, pairwise=True, clusters=clusters)
    n_pairs = len(set(clusters[~pm.isna().all(axis=1).to_numpy()]))
    n_text = f"{out['n']} pair-orders of {n_pairs} pairs (unit: {PAIRWISE_UNIT})"
    return {**out, "n_pairs": n_pairs, "unit": PAIRWISE_UNIT, "n_text": n_text}
