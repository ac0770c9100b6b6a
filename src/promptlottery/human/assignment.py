"""Who rates which item under which wording, in what order: the campaign's assignment (no I/O).

The paper's user study (§3.2): "Each example was rated by at least three annotators, and
annotators did not rate the same item under different instructions back-to-back." Our design
(ours) makes both the within-wording and the across-wording agreement of
:mod:`promptlottery.human.agreement` measurable:

* a *task* is one (item, wording) cell; every cell is rated by ``raters_per_task`` different
  annotators (default 3), so every item is rated by at least that many annotators, under
  ``wordings_per_item`` different wordings (default: all of them) across annotators;
* ``same_item="not_back_to_back"`` (the paper's rule): an annotator may meet one item under two
  wordings, never in two consecutive tasks of their queue; ``same_item="never"``: an annotator
  meets each item at most once (needs ``raters_per_task * wordings_per_item`` annotators);
* balanced load: annotators' numbers of tasks differ by at most one;
* seeded: the same inputs and seed give the same assignment on every machine.

The annotators of each item are the least-loaded ones (ties broken by the seeded draw), which
keeps the load balanced and, with enough annotators, gives each annotator an item only once
even under ``not_back_to_back``.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from promptlottery.config import ConfigError

SAME_ITEM = ("not_back_to_back", "never")
COLUMNS = ("annotator", "position", "item_id", "wording")


class CampaignError(ConfigError):
    """A campaign cannot be built as asked (too few annotators, bad option); one line."""


@dataclass(frozen=True)
class Design:
    """The options of one assignment (see the module docstring)."""

    raters_per_task: int = 3
    wordings_per_item: int | None = None
    same_item: str = "not_back_to_back"
    seed: int = 0

    def __post_init__(self) -> None:
        k = self.raters_per_task
        if isinstance(k, bool) or not isinstance(k, int) or k < 2:
            raise CampaignError(
                f"human.raters_per_task={k!r}: must be an integer >= 2 (agreement needs two ratings of a task)"
            )
        m = self.wordings_per_item
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise CampaignError(f"human.wordings_per_item={m!r}: must be an integer >= 1, or null for all")
        if self.same_item not in SAME_ITEM:
            raise CampaignError(f"human.same_item={self.same_item!r}: must be one of {', '.join(SAME_ITEM)}")


def assign(
    items: Sequence[str], wordings: Sequence[str], annotators: Sequence[str], design: Design
) -> pd.DataFrame:
    """The assignment: one row per task an annotator rates, columns ``annotator``, ``position``
    (0-based place in the annotator's queue), ``item_id``, ``wording``; sorted by annotator, position.

    >>> a = assign(["i1", "i2"], ["P1", "P2"], ["a", "b", "c", "d", "e", "f"], Design(seed=1))
    >>> len(a), a.groupby("annotator").size().tolist()
    (12, [2, 2, 2, 2, 2, 2])
    """
    items, wordings, annotators = (
        _unique(items, "item"),
        _unique(wordings, "wording"),
        _unique(annotators, "annotator"),
    )
    m = len(wordings) if design.wordings_per_item is None else design.wordings_per_item
    k = design.raters_per_task
    if m > len(wordings):
        raise CampaignError(f"human.wordings_per_item={m} but the prompt group has {len(wordings)} wordings")
    per_item = k * m if design.same_item == "never" else k
    if len(annotators) < per_item:
        need = f"{k} raters x {m} wordings" if design.same_item == "never" else f"{k} raters per task"
        raise CampaignError(
            f"{len(annotators)} annotators cannot rate every item with {need} (same_item={design.same_item}); "
            f"give at least {per_item} annotators"
        )
    rng = random.Random(design.seed)
    order = list(items)
    rng.shuffle(order)
    load: Counter[str] = Counter({a: 0 for a in annotators})
    tie = {a: rng.random() for a in annotators}
    tasks: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for n, item in enumerate(order):
        # a rotating subset of wordings per item keeps every wording equally used
        shown = [wordings[(n + j) % len(wordings)] for j in range(m)] if m < len(wordings) else list(wordings)
        if design.same_item == "never":
            chosen = _least_loaded(annotators, load, tie, k * m)
            for j, w in enumerate(shown):
                for a in chosen[j * k : (j + 1) * k]:
                    tasks[a].append((item, w))
                    load[a] += 1
        else:
            for w in shown:
                for a in _least_loaded(annotators, load, tie, k):
                    tasks[a].append((item, w))
                    load[a] += 1
        for a in annotators:  # fresh tie-breaks per item, from the one seeded stream
            tie[a] = rng.random()
    rows = []
    for a in annotators:
        for pos, (item, w) in enumerate(_queue(tasks[a], rng, a)):
            rows.append({"annotator": a, "position": pos, "item_id": item, "wording": w})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _unique(values: Sequence[str], what: str) -> list[str]:
    out = [str(v) for v in values]
    if not out:
        raise CampaignError(f"the campaign has no {what}s")
    dup = [v for v, c in Counter(out).items() if c > 1]
    if dup:
        raise CampaignError(f"duplicate {what} id {dup[0]!r}")
    return out


def _least_loaded(annotators: list[str], load: Counter, tie: dict[str, float], n: int) -> list[str]:
    return sorted(annotators, key=lambda a: (load[a], tie[a]))[:n]


def _queue(tasks: list[tuple[str, str]], rng: random.Random, annotator: str) -> list[tuple[str, str]]:
    """The tasks in a seeded order in which no item comes twice in a row.

    Greedy: at each step the item with the most tasks left that differs from the previous one
    (ties by the seeded draw); this finds such an order whenever one exists (no item holds more
    than half the queue, rounded up).
    """
    by_item: dict[str, list[tuple[str, str]]] = defaultdict(list)
    shuffled = list(tasks)
    rng.shuffle(shuffled)
    for t in shuffled:
        by_item[t[0]].append(t)
    tie = {i: rng.random() for i in by_item}
    out: list[tuple[str, str]] = []
    prev = None
    while by_item:
        cands = sorted((i for i in by_item if i != prev), key=lambda i: (-len(by_item[i]), tie[i]))
        if not cands:
            raise CampaignError(
                f"annotator {annotator}: item {prev} fills more than half of the queue; no order avoids "
                "rating it back-to-back (add annotators)"
            )
        i = cands[0]
        out.append(by_item[i].pop())
        if not by_item[i]:
            del by_item[i]
        prev = i
    return out


def check_assignment(assignment: pd.DataFrame, design: Design, *, n_wordings: int) -> list[str]:
    """The constraints the assignment breaks (empty when it keeps all): each as one line."""
    problems = []
    k = design.raters_per_task
    m = n_wordings if design.wordings_per_item is None else design.wordings_per_item
    cell = assignment.groupby(["item_id", "wording"])["annotator"]
    for (item, w), ann in cell:
        if ann.nunique() != len(ann):
            problems.append(f"item {item} wording {w}: an annotator rates this task twice")
        if len(ann) != k:
            problems.append(f"item {item} wording {w}: {len(ann)} raters, expected {k}")
    for item, g in assignment.groupby("item_id"):
        if g["wording"].nunique() != m:
            problems.append(f"item {item}: {g['wording'].nunique()} wordings, expected {m}")
    for a, g in assignment.sort_values("position").groupby("annotator"):
        seq = g["item_id"].tolist()
        if design.same_item == "never" and len(set(seq)) != len(seq):
            problems.append(f"annotator {a}: an item twice (same_item=never)")
        for x, y in zip(seq, seq[1:]):
            if x == y:
                problems.append(f"annotator {a}: item {x} twice in a row")
    loads = assignment.groupby("annotator").size()
    if len(loads) and loads.max() - loads.min() > 1:
        problems.append(f"unbalanced load: {loads.min()}-{loads.max()} tasks per annotator")
    return problems
