"""What an import checks beyond each rating (pure functions over DataFrames, no I/O):

* **who**: each Label Studio annotation's ``completed_by`` against the campaign's user mapping
  (``campaign.json`` ``label_studio_users``). In the Community edition every member sees every
  project, so a student who labels in another's project would be credited to that project's
  annotator: such an export is refused (:func:`check_attribution`);
* **in what order**: each annotator's annotations by ``created_at`` (the order the tasks were
  labelled, skips included) against the back-to-back rule (never one item on two consecutive
  tasks) and against the planned queue (a re-sorted Data Manager serves another order)
  (:func:`served_order`);
* **how much**: the plan (``assignment.csv``) against what came back: tasks rated, skipped
  (only cancelled annotations), not done, annotators with no rating, cells short of their raters
  (:func:`coverage`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from promptlottery.human.ratings import RatingsError


def check_attribution(annotations: pd.DataFrame, users: dict[str, dict[str, Any]] | None) -> bool:
    """Raise a one-line :class:`RatingsError` at the first annotation not completed by its
    annotator's Label Studio user; False when there is no mapping to check against (a plain table,
    or a campaign made before the mapping), True when every annotation was checked."""
    if not users or "completed_by" not in annotations.columns:
        return False
    annotations = annotations[annotations["source"] == "label_studio"]
    if annotations.empty:
        return False
    owner = {int(v["id"]): a for a, v in users.items()}
    for r in annotations.itertuples(index=False):
        if r.annotator not in users:
            continue  # an unknown annotator is check_ratings' one-line error
        want = int(users[r.annotator]["id"])
        got = None if pd.isna(r.completed_by) else int(r.completed_by)
        if got != want:
            who = f"annotator {owner[got]}'s user" if got in owner else "no annotator of the campaign"
            raise RatingsError(
                f"{r.where} annotation {r.annotation_id}: completed by Label Studio user {got} ({who}), not by "
                f"{r.annotator}'s user {want}: a rating by another person in {r.annotator}'s project; export refused"
            )
    return True


def served_order(annotations: pd.DataFrame) -> pd.DataFrame:
    """One row per annotator: ``n_served`` (annotations, skips included), ``back_to_back`` (consecutive
    annotations, by ``created_at``, on one item), ``first_back_to_back`` (that item), ``out_of_plan``
    (annotations not at their place in the planned order of the annotated tasks: > 0 when the queue
    was re-sorted or tasks were picked by hand). Empty when no annotation has a ``created_at``.

    >>> a = pd.DataFrame({"annotator": ["a"] * 3, "item_id": ["x", "x", "y"], "position": [2, 0, 1],
    ...     "created_at": pd.to_datetime(["2026-01-01T10:00", "2026-01-01T10:01", "2026-01-01T10:02"])})
    >>> served_order(a).to_dict("records")  # planned 0, 1, 2; labelled 2, 0, 1: none at its place
    [{'annotator': 'a', 'n_served': 3, 'back_to_back': 1, 'first_back_to_back': 'x', 'out_of_plan': 3}]
    """
    cols = ["annotator", "n_served", "back_to_back", "first_back_to_back", "out_of_plan"]
    a = annotations.dropna(subset=["created_at"]) if "created_at" in annotations.columns else annotations[:0]
    rows = []
    for who, g in a.sort_values(["annotator", "created_at"], kind="mergesort").groupby("annotator"):
        items = g["item_id"].tolist()
        repeats = [x for x, y in zip(items, items[1:]) if x == y]
        pos = pd.to_numeric(g["position"], errors="coerce").tolist()
        rows.append(
            {
                "annotator": who,
                "n_served": len(g),
                "back_to_back": len(repeats),
                "first_back_to_back": repeats[0] if repeats else "",
                "out_of_plan": int(sum(p != q for p, q in zip(pos, sorted(pos)))),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def coverage(annotations: pd.DataFrame, plan: pd.DataFrame, *, raters_per_task: int) -> dict[str, Any]:
    """The plan (``annotator, item_id, wording`` rows) against the annotations: per annotator
    ``planned``, ``rated``, ``skipped`` (only cancelled annotations), ``not_done``; the annotators
    with no rating; the (item, wording) cells with fewer than ``raters_per_task`` ratings."""
    key = ["annotator", "item_id", "wording"]
    plan = plan[key].astype(str).drop_duplicates()
    ann = annotations.assign(cancelled=annotations.get("cancelled", False)).astype({"cancelled": bool})
    rated = ann.loc[~ann["cancelled"], key].drop_duplicates()
    skipped = ann.loc[ann["cancelled"], key].drop_duplicates()
    skipped = skipped.merge(rated, how="left", indicator=True).query("_merge == 'left_only'")[key]
    per = []
    for who, g in plan.groupby("annotator"):
        n_rated = int((rated["annotator"] == who).sum())
        n_skip = int((skipped["annotator"] == who).sum())
        per.append(
            {
                "annotator": who,
                "planned": len(g),
                "rated": n_rated,
                "skipped": n_skip,
                "not_done": len(g) - n_rated - n_skip,
            }
        )
    per_df = pd.DataFrame(per, columns=["annotator", "planned", "rated", "skipped", "not_done"])
    counts = rated.groupby(["item_id", "wording"]).size()
    cells = plan[["item_id", "wording"]].drop_duplicates()
    n = [int(counts.get((i, w), 0)) for i, w in cells.itertuples(index=False)]
    return {
        "per_annotator": per_df,
        "planned": len(plan),
        "rated": int(per_df["rated"].sum()),
        "skipped": int(per_df["skipped"].sum()),
        "not_done": int(per_df["not_done"].sum()),
        "annotators_missing": per_df.loc[per_df["rated"] == 0, "annotator"].tolist(),
        "cells": len(cells),
        "cells_short": int(sum(k < raters_per_task for k in n)),
    }
