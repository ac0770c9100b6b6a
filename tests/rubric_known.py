"""The rubric study's known-answer runs and the paper's definitions computed by hand
(``tests/test_known_answers_rubric.py``): Kendall's tau-b, the Pareto-dominance tau, the oracle's
rounding, one ``stage=rubric`` run with one fake-backend behaviour per backbone, an ASAP sample's
human values, and the checks every run's intervals must pass."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from promptlottery.data import load_items
from promptlottery.stages import run_stage
from tests.conftest import DATA_DIR, REPO, compose

LIMIT = 8
N_RESAMPLES = 200
SEED = 0  # conf/config.yaml's seed: the bootstrap's
MIN_ITEMS = 5  # rubric.stats.min_items of every rubric experiment
INVERTED = "analytic_batch"
EXPERIMENTS = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("rubric_*.yaml"))
ASAP = [e for e in EXPERIMENTS if e.startswith("rubric_asap_set")]
#: per ASAP set: the holistic scale (the raters' range), the trait scale (ASAP++) and the traits with
#: the paper's row names (Table 1's caption)
SETS = {
    1: ((1, 6), (1, 6), {"content": "Ide.", "organization": "Or.", "word_choice": "WC",
                         "sentence_fluency": "SF", "conventions": "Cv."}),
    4: ((0, 3), (0, 3), {"content": "Ct.", "prompt_adherence": "PA", "language": "La.", "narrativity": "Na."}),
    6: ((0, 4), (0, 4), {"content": "Ct.", "prompt_adherence": "PA", "language": "La.", "narrativity": "Na."}),
}  # fmt: skip
HOLISTIC = ("Full", "3ex")
ANALYTIC = ("Sep.", "Bat.", "Edited")
#: the rubric.backbones keys the fake judges stand in for, and the names the tables give them
K1, K2 = "smollm2", "gemma3_270m"
B1, B2 = f"fake-{K1}", f"fake-{K2}"


# --------------------------------------------------------------------------- the definitions, by hand
def tau_b(x, y) -> float | None:
    """Kendall's tau-b (the paper: SciPy's tau with ties); None where a side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return float(stats.kendalltau(x, y).statistic)


def pareto_tau(h, a) -> float | None:
    """tau-b between ``h`` and the Pareto order of the rows of ``a`` (the paper's §4.3 words): over
    the pairs, sign(h_i - h_j) times +1 / -1 where one row dominates the other, 0 where neither does."""
    h, a = np.asarray(h, float), np.asarray(a, float)
    s = n_h = n_d = 0
    for i in range(len(h)):
        for j in range(i + 1, len(h)):
            d = 1 if (a[i] >= a[j]).all() and (a[i] > a[j]).any() else 0
            d = -1 if (a[j] >= a[i]).all() and (a[j] > a[i]).any() else d
            sh = int(np.sign(h[i] - h[j]))
            s, n_h, n_d = s + sh * d, n_h + (sh != 0), n_d + (d != 0)
    return None if n_h == 0 or n_d == 0 else s / math.sqrt(n_h * n_d)


def nearest(v: float, lo: int) -> int:
    """The label nearest ``v`` on an integer scale, a tie to the lower one (4.5 -> 4)."""
    return max(lo, math.ceil(v - 0.5))


# --------------------------------------------------------------------------- the runs
class Run:
    """One rubric experiment with one known behaviour per backbone, through the real stage."""

    def __init__(self, name: str, b1: str, b2: str, root: Path, extra: tuple[str, ...] = ()):
        self.name = name
        over = [f"+experiment={name}", f"dataset.limit={LIMIT}", f"rubric.stats.n_resamples={N_RESAMPLES}"]
        for bb, behaviour in ((K1, b1), (K2, b2)):
            over += [
                f"backbone@rubric.backbones.{bb}=fake",
                f"rubric.backbones.{bb}.backend.behaviour={behaviour}",
                f"rubric.backbones.{bb}.backend.model=fake-{bb}",  # the two random judges differ
                f"rubric.backbones.{bb}.backend.inverted_variant={INVERTED}",
                f"rubric.backbones.{bb}.backend.label=1",  # constant: on every ASAP scale
            ]
        self.cfg = compose([*over, *extra], tmp_path=root)
        self.job = root / "job"
        self.error: Exception | None = None
        try:
            self.record = run_stage(self.cfg, self.job)
        except Exception as exc:  # noqa: BLE001 - the refusal test reads it
            self.error = exc
            return
        self.cells = pd.read_csv(self.job / "cells.csv", keep_default_na=False)
        self.ours = self.cells[self.cells.source == "ours"]
        tests = self.job / "significance.csv"  # no test ran: an empty file
        self.tests = (
            pd.read_csv(tests, keep_default_na=False) if tests.read_text().strip() else pd.DataFrame()
        )
        self.scores = pd.read_parquet(self.job / "scores.parquet")
        ids = self.record["sample"]["item_ids"]
        loaded = {
            it.id: it
            for it in load_items(self.cfg.dataset.name, data_dir=DATA_DIR, **self.cfg.dataset.options)
        }
        self.items = [loaded[i] for i in ids]

    def cell(self, table: str, block: str, row: str, column: str) -> pd.Series:
        hit = self.ours[
            (self.ours.table == table)
            & (self.ours.block == block)
            & (self.ours.row == row)
            & (self.ours.column == column)
        ]
        assert len(hit) == 1, (table, block, row, column, len(hit))
        return hit.iloc[0]

    def value(self, table: str, block: str, row: str, column: str) -> float | None:
        c = self.cell(table, block, row, column)
        return None if c.estimate == "" else float(c.estimate)


class Humans:
    """One ASAP sample's human values as the paper defines them, and the oracle's answers."""

    def __init__(self, r: Run):
        essay_set = int(r.cfg.dataset.options.essay_set)
        (self.lo, _hi), (tlo, thi), self.traits = SETS[essay_set]
        raters = np.array([it.human["holistic"] for it in r.items], float)
        # the human holistic score: set 1 the two raters' mean (its resolved score is their sum, the
        # same ranking); sets 4 and 6 the resolved score, ASAP's domain1_score
        if essay_set == 1:
            self.h = raters.mean(axis=1)
        else:
            self.h = np.array([it.meta["domain1_score"] for it in r.items], float)
        self.agree = raters[:, 0] == raters[:, 1]
        self.oracle_h = np.array([nearest(v, self.lo) for v in self.h], float)
        self.t = np.array([[it.human[k][0] for k in self.traits] for it in r.items], float)
        self.mirrored_t = tlo + thi - self.t  # the inverted judge's batch answers


def intervals_hold(r: Run) -> None:
    """Every printed interval contains its estimate; every count of undefined resamples adds up."""
    num = r.ours[(r.ours.estimate != "") & (r.ours.low != "")]
    assert len(num) > 0
    est, low, high = (num[c].astype(float).to_numpy() for c in ("estimate", "low", "high"))
    assert ((low <= est + 1e-12) & (est <= high + 1e-12)).all()
    for note, shown in zip(r.ours.note, r.ours.ci_resamples):
        m = re.fullmatch(
            r"CI over the (\d+) of (\d+) resamples where tau is defined \((\d+) undefined\)", note
        )
        if m:
            k, total, undefined = map(int, m.groups())
            assert k + undefined == total == N_RESAMPLES and shown == f"{k}/{total}"
    ran = r.tests[r.tests["error"] == ""] if "error" in r.tests else r.tests
    for t in ran.itertuples():
        assert 0 <= float(t.n_undefined) < float(t.n_resamples) == N_RESAMPLES
        assert float(t.low) - 1e-12 <= float(t.difference) <= float(t.high) + 1e-12, t
