"""The human-baseline measures computed by hand (plain loops over units, straight from the
definitions in promptlottery.human.agreement's docstring), for the Label Studio tests to compare
the package's figures with. Nothing here imports promptlottery's metrics.

A *unit* is a dict {rater: label}; a table is a list of units.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np


def overlap(units: list[dict]) -> float:
    """Mean over rater pairs (with a shared unit) of the share of shared units with one label."""
    raters = sorted({r for u in units for r in u})
    vals = []
    for a, b in itertools.combinations(raters, 2):
        shared = [u for u in units if a in u and b in u]
        if shared:
            vals.append(sum(u[a] == u[b] for u in shared) / len(shared))
    return float(np.mean(vals))


def cohen(units: list[dict], labels) -> float:
    """Mean over rater pairs of (p_o - p_e) / (1 - p_e) on their shared units (>= 2, p_e < 1)."""
    raters = sorted({r for u in units for r in u})
    vals = []
    for a, b in itertools.combinations(raters, 2):
        shared = [u for u in units if a in u and b in u]
        if len(shared) < 2:
            continue
        n = len(shared)
        p_o = sum(u[a] == u[b] for u in shared) / n
        ca, cb = Counter(u[a] for u in shared), Counter(u[b] for u in shared)
        p_e = sum(ca[lab] * cb[lab] for lab in labels) / n**2
        if p_e < 1:
            vals.append((p_o - p_e) / (1 - p_e))
    return float(np.mean(vals))


def fleiss(units: list[dict]) -> float:
    """Fleiss' kappa: every unit with the same number m of ratings; P_i = (sum n_ic^2 - m)/(m(m-1))."""
    m = len(units[0])
    assert all(len(u) == m for u in units)
    p_i = [(sum(c * c for c in Counter(u.values()).values()) - m) / (m * (m - 1)) for u in units]
    totals = Counter(v for u in units for v in u.values())
    n = sum(totals.values())
    p_e = sum((c / n) ** 2 for c in totals.values())
    return (float(np.mean(p_i)) - p_e) / (1 - p_e)


def alpha_nominal(units: list[dict]) -> float:
    """Krippendorff's alpha, nominal: 1 - D_o / D_e over the pairable units (>= 2 ratings)."""
    pairable = [Counter(u.values()) for u in units if len(u) >= 2]
    n = sum(sum(c.values()) for c in pairable)
    d_o = sum(sum(c[x] * c[y] for x in c for y in c if x != y) / (sum(c.values()) - 1) for c in pairable) / n
    tot = Counter()
    for c in pairable:
        tot.update(c)
    d_e = sum(tot[x] * tot[y] for x in tot for y in tot if x != y) / (n * (n - 1))
    return 1 - d_o / d_e


def four(units: list[dict], labels, fleiss_units: list[dict] | None = None) -> dict[str, float]:
    """The four measures; Fleiss' kappa on ``fleiss_units`` (the complete units) where given."""
    return {
        "overlap": overlap(units),
        "cohen": cohen(units, labels),
        "fleiss": fleiss(units if fleiss_units is None else fleiss_units),
        "alpha": alpha_nominal(units),
    }


def across_units(cells: dict[tuple[str, str], dict[str, str]], wordings: list[str]) -> list[dict]:
    """Units (item, slot) x wordings: wording j's rating is the first from position (s + j) mod n of the
    cell's ratings in annotator order that is unused and by an annotator not yet in the unit; a slot
    with fewer than two such ratings is no unit (distinct annotators only)."""
    items = sorted({i for i, _ in cells})
    units = []
    for item in items:
        cell = {w: sorted(cells[(item, w)].items()) for w in wordings if (item, w) in cells}
        used = {w: set() for w in cell}
        for s in range(max(len(c) for c in cell.values())):
            unit, who, picked = {}, set(), []
            for j, w in enumerate(wordings):
                if w not in cell:
                    continue
                c = cell[w]
                order = [(s + j + t) % len(c) for t in range(len(c))]
                fresh = [i for i in order if i not in used[w] and c[i][0] not in who]
                if fresh:
                    picked.append((w, fresh[0]))
                    who.add(c[fresh[0]][0])
                    unit[w] = c[fresh[0]][1]
            if len(unit) >= 2:
                for w, i in picked:
                    used[w].add(i)
                units.append(unit)
    return units
