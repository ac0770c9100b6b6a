"""How often an item subsample can land inside the full grid's interval (ours, a normal approximation).

The budget simulator's ``items`` design judges a share f of the items under every wording; its
``within_full_ci`` column is the share of plans whose estimate lies inside the full grid's interval.
:func:`item_subsample_within_ci` is the ceiling of that share for any statistic that is a smooth
function of item means, and :func:`item_subsample_share_needed` the share of the items a target needs.
"""

from __future__ import annotations

import math

__all__ = ["item_subsample_share_needed", "item_subsample_within_ci"]


def item_subsample_within_ci(share: float, level: float = 0.95) -> float:
    """The share of item subsamples whose estimate lands inside the full grid's ``level`` interval
    (ours: a normal approximation, not a paper's figure).

    ``n = share * N`` items drawn without replacement from the N of the full grid: the subsample's
    estimate differs from the full one with variance ``s^2 (1/n - 1/N) = (s^2 / N) (1 - f) / f``,
    while the full interval's half-width is ``z s / sqrt(N)``; so the estimate is inside with
    probability ``2 Phi(z sqrt(f / (1 - f))) - 1``, whatever N and s are: 0.80 at f = 0.3 and 0.95 at
    f = 0.5 (level 0.95). A design that judges a share f of the items under every wording cannot do
    better than this on average: a target of 90% at 30% of the calls is out of its reach.
    """
    from scipy.stats import norm

    if not 0 < share <= 1:
        raise ValueError(f"share={share}: expected a share of the items in (0, 1]")
    if share == 1:
        return 1.0
    z = norm.ppf(0.5 + level / 2)
    return float(2 * norm.cdf(z * math.sqrt(share / (1 - share))) - 1)


def item_subsample_share_needed(target: float, level: float = 0.95) -> float:
    """The smallest item share f with :func:`item_subsample_within_ci` ``>= target``:
    ``f = r / (1 + r)``, ``r = (Phi^-1((1 + target) / 2) / z)^2`` (0.413 for 90% at level 0.95)."""
    from scipy.stats import norm

    r = (norm.ppf(0.5 + target / 2) / norm.ppf(0.5 + level / 2)) ** 2
    return float(r / (1 + r))
