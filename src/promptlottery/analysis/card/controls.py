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


def missing_controls(ctrl: pd.DataFrame, controls: dict) -> dict | None:
    if not controls:
        return {"missing": "the prompt group carries no control variants"}
    if ctrl.empty:
        return {
            "missing": "no control variant judged: rerun the sweep with judge.controls=true "
            f"judge.variant={','.join(controls)}"
        }
    return None


def controls_measures(pm: pd.DataFrame, cm: pd.DataFrame, wordings, controls, judged, opts, **kw) -> dict:
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
    if (gone := missing_controls(ctrl, controls)) is not None:
        return gone
    judged = [c for c in controls if c in set(ctrl["variant"])]
    pm = para.pivot_table(index="item_id", columns="variant", values="value", aggfunc="first")
    pm = pm.reindex(columns=wordings)
    cm = ctrl.pivot_table(index="item_id", columns="variant", values="value", aggfunc="first")
    return controls_measures(
        pm, cm.reindex(index=pm.index, columns=judged), wordings, controls, judged, opts, scale=scale
    )
