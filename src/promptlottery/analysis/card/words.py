"""The judge card's words (:mod:`promptlottery.analysis.card.build`): its one-line headline and its
one-paragraph verdict, both read from the card's sections."""

from __future__ import annotations

import numpy as np


def _pct(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.0f}%"


def headline(card: dict) -> str:
    k = card["key"]
    parts = [
        f"{'FAKE judge ' if card['fake'] else ''}{k['backbone']} x {k['prompt_group']} on {k['dataset']}/{k['criterion']}"
    ]
    lot = card["lottery"]
    if "changed" in lot:
        parts.append(
            f"{_pct(lot['changed'])} of {lot['n']} items change verdict across {len(card['wordings'])} wordings"
        )
    ctl = card["controls"]
    parts.append(f"controls: {ctl['verdict']}" if "verdict" in ctl else "controls: not judged")
    alt = card["alt_test"]
    if "per_wording" in alt:
        passed = sum(v["passed"] for v in alt["per_wording"].values())
        parts.append(
            f"alt-test passed under {passed}/{len(alt['per_wording'])} wordings (eps {alt['epsilon']})"
        )
    cor = card["corrected"]
    if "per_wording" in cor:
        first = next(iter(cor["per_wording"].values()))[0]
        parts.append(
            f"PPI++ at n={first['n']} covers the human mean in {_pct(first['ppi_coverage'])} of draws"
        )
    return "; ".join(parts) + f" [verdict: {card['verdict']}]"


def verdict_paragraph(card: dict) -> str:
    s = []
    lot, ctl, alt, cor, ln = (
        card["lottery"],
        card["controls"],
        card["alt_test"],
        card["corrected"],
        card["length"],
    )
    if "changed" in lot:
        s.append(
            f"Rewording the prompt changes the verdict on {_pct(lot['changed'])} of items "
            f"(95% CI {_pct(lot['changed_ci'][0])}-{_pct(lot['changed_ci'][1])}, n={lot['n']})."
        )
    if "verdict" in ctl:
        if ctl["deaf"]:
            s.append(
                f"It does not follow its meaning-changing controls ({ctl['verdict']}: signal {ctl['signal']:.2f} vs "
                f"paraphrase noise {ctl['noise']:.2f}), so its stability is not evidence that it reads the rubric."
            )
        else:
            s.append(
                f"It follows its controls (signal {ctl['signal']:.2f} above paraphrase noise {ctl['noise']:.2f}, margin CI "
                f"{ctl['margin_ci'][0]:.2f}-{ctl['margin_ci'][1]:.2f})."
            )
    else:
        s.append(
            "Whether it follows meaning-changing controls is not measured here ("
            + ctl.get("missing", "")
            + ")."
        )
    if "per_wording" in ln:
        key = "slope" if "slope" in next(iter(ln["per_wording"].values())) else "phi"
        sig = [
            w
            for w, v in ln["per_wording"].items()
            if np.isfinite(v[key])
            and (lambda c: c[0] > 0 or c[1] < 0)(v["ci"] if key == "slope" else v["phi_ci"])
        ]
        s.append(f"A length effect is significant under {len(sig)} of {len(ln['per_wording'])} wordings.")
    if "per_wording" in alt:
        passed = [w for w, v in alt["per_wording"].items() if v["passed"]]
        s.append(
            f"It could replace the human annotators (alt-test, epsilon {alt['epsilon']}) under "
            f"{len(passed)} of {len(alt['per_wording'])} wordings{': ' + ', '.join(passed) if passed else ''}."
        )
    if "per_wording" in cor:
        covs = [rows[0]["ppi_coverage"] for rows in cor["per_wording"].values()]
        jc = [rows[0]["judge_covers"] for rows in cor["per_wording"].values()]
        n = next(iter(cor["per_wording"].values()))[0]["n"]
        s.append(
            f"With {n} human labels, PPI++ intervals cover the all-human mean in {_pct(min(covs))}-{_pct(max(covs))} of draws "
            f"(target {_pct(cor['level'])}); the judge-only interval covers it under {int(sum(jc))} of {len(jc)} wordings."
        )
        rk = cor.get("ranks", {})
        if "between_wordings_before" in rk:
            s.append(
                f"Between two wordings {_pct(rk['between_wordings_before'])} of system pairs swap order before correction and "
                f"{_pct(rk['between_wordings_after'])} after ({_pct(rk['share_labelled'])} of each system's items human-labelled)."
            )
    if card["fake"]:
        s.append("This is a FAKE judge (the fake backend): the numbers test the pipeline, not a model.")
    return " ".join(s)
