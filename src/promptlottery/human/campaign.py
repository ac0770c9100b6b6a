"""A campaign from a dataset and a prompt group: the assignment, the tasks, the files, the projects.

Writes into the campaign directory: ``campaign.json`` (what the import checks ratings against:
items, wordings, annotators, the scale's labels, the design, the Label Studio project ids),
``assignment.csv`` (annotator, position, item_id, wording), ``label_config.xml`` and
``tasks/<annotator>.json`` (Label Studio import files, one project per annotator). With a server,
``campaign.json`` also records ``label_studio_url``, ``label_studio_users`` (annotator -> the Label
Studio user's id and email: what the import checks ``completed_by`` against) and
``label_studio_projects`` (annotator -> project id).

:func:`design_counts` is what the stage prints before it creates anything: tasks per annotator,
the gap between repeats of an item in one queue, and whether every item gets "across wordings"
units of distinct annotators (:mod:`promptlottery.human.agreement`), hence which human measures
the design supports.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from promptlottery.data.schema import Item
from promptlottery.human.assignment import Design, assign, check_assignment
from promptlottery.human.labelstudio import labeling_config, tasks_for, write_import_files
from promptlottery.prompts.groups import PromptGroup
from promptlottery.prompts.requests import query_text, render_chat


@dataclass
class Campaign:
    name: str
    dataset: str
    prompt_group: str
    scale: str
    labels: tuple[str, ...]
    items: list[str]
    wordings: list[str]
    annotators: list[str]
    design: Design
    assignment: pd.DataFrame
    instructions: dict[tuple[str, str], str]
    projects: dict[str, int] | None = None
    users: dict[str, dict[str, Any]] | None = None
    label_studio_url: str | None = None

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dataset": self.dataset,
            "prompt_group": self.prompt_group,
            "scale": self.scale,
            "labels": list(self.labels),
            "items": self.items,
            "wordings": self.wordings,
            "annotators": self.annotators,
            "design": asdict(self.design),
            "n_tasks": len(self.assignment),
            "label_studio_url": self.label_studio_url,
            "label_studio_users": self.users,
            "label_studio_projects": self.projects,
        }


def annotator_ids(annotators: list[str] | int) -> list[str]:
    """Given ids, or ``a01 .. aNN`` for a number."""
    if isinstance(annotators, int) and not isinstance(annotators, bool):
        width = max(2, len(str(annotators)))
        return [f"a{i + 1:0{width}d}" for i in range(annotators)]
    return [str(a) for a in annotators]


def instruction_text(group: PromptGroup, wording: str, item: Item) -> str:
    """The wording rendered for the item, as the judge reads it (system turn, then user turn)."""
    messages = render_chat(group, wording, item)
    if len(messages) == 1:
        return messages[0]["content"]
    return query_text(messages, None).replace("[system] ", "", 1).replace("\n\n[user] ", "\n\n", 1)


def build_campaign(
    name: str,
    items: list[Item],
    group: PromptGroup,
    annotators: list[str] | int,
    design: Design,
    *,
    wordings: list[str] | None = None,
) -> Campaign:
    wordings = list(wordings or group.variants)
    for w in wordings:
        group.variant(w)  # an unknown wording is a one-line PromptError naming the valid ones
    ann = annotator_ids(annotators)
    ids = [it.id for it in items]
    a = assign(ids, wordings, ann, design)
    problems = check_assignment(a, design, n_wordings=len(wordings))
    if problems:  # the constructor keeps every constraint; this guards it
        raise AssertionError(f"campaign assignment breaks its constraints: {problems[0]}")
    by_id = {it.id: it for it in items}
    instructions = {
        (i, w): instruction_text(group, w, by_id[i])
        for i, w in a[["item_id", "wording"]].drop_duplicates().itertuples(index=False)
    }
    return Campaign(
        name=name,
        dataset=items[0].dataset if items else "",
        prompt_group=group.id,
        scale=group.scale.name,
        labels=group.scale.labels,
        items=ids,
        wordings=wordings,
        annotators=ann,
        design=design,
        assignment=a,
        instructions=instructions,
    )


def write_campaign(c: Campaign, out_dir: str | Path) -> dict[str, Any]:
    """The campaign's files (see the module docstring); returns ``{name: path}``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    c.assignment.to_csv(out_dir / "assignment.csv", index=False, lineterminator="\n")
    config = labeling_config(c.labels)
    tasks = tasks_for(c.assignment, c.instructions, c.name)
    task_files = write_import_files(tasks, config, out_dir)
    (out_dir / "campaign.json").write_text(json.dumps(c.record(), indent=1) + "\n", encoding="utf-8")
    return {
        "campaign": out_dir / "campaign.json",
        "assignment": out_dir / "assignment.csv",
        "label_config": out_dir / "label_config.xml",
        "tasks": task_files,
    }


def load_campaign(path: str | Path) -> dict[str, Any]:
    """``campaign.json`` of a campaign directory (or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / "campaign.json"
    if not path.exists():
        from promptlottery.human.ratings import RatingsError

        raise RatingsError(f"{path}: no campaign file (run `python -m run +human=campaign ...` first)")
    return json.loads(path.read_text(encoding="utf-8"))


def design_counts(assignment: pd.DataFrame, wordings: list[str], design: Design) -> dict[str, Any]:
    """The design's counts, from the assignment alone (no rating needed): tasks per annotator, the gap
    (in tasks) between two tasks of one item in one queue, and the "across wordings" units of
    distinct annotators each item can form (built as the analysis builds them, on the assignment)."""
    from promptlottery.human.agreement import across_units_of

    loads = assignment.groupby("annotator").size()
    gaps = []
    for _a, g in assignment.groupby("annotator"):
        for _i, pos in g.groupby("item_id")["position"]:
            p = sorted(pos.tolist())
            gaps += [y - x for x, y in zip(p, p[1:])]
    units = across_units_of(assignment)
    size = units.groupby(["item_id", "slot"]).size()
    per_item = size.groupby(level="item_id")
    items = assignment["item_id"].unique()
    with_unit = set(per_item.size().index)
    complete = set(size[size == len(wordings)].reset_index()["item_id"])
    lone, unplaced = units.attrs["left_out"]
    return {
        "tasks": len(assignment),
        "tasks_per_annotator": [int(loads.min()), int(loads.max())],
        "repeats_in_a_queue": len(gaps),
        "min_gap_between_repeats": int(min(gaps)) if gaps else None,
        "items": len(items),
        "items_with_across_units": len(with_unit),
        "items_with_complete_across_units": len(complete),
        "ratings_in_no_across_unit": int(unplaced),
        "across_slots_left_out": int(lone),
        "same_item": design.same_item,
    }


def format_design_counts(c: dict[str, Any]) -> str:
    """The printout of :func:`design_counts`: the counts, then which human measures the design supports."""
    lo, hi = c["tasks_per_annotator"]
    gap = (
        "no annotator meets an item twice"
        if not c["repeats_in_a_queue"]
        else f"{c['repeats_in_a_queue']} repeats of an item in one queue, at least {c['min_gap_between_repeats']} "
        "tasks apart (1 would be back-to-back)"
    )
    n = c["items"]
    across_ok = c["items_with_across_units"] == n
    fleiss_ok = c["items_with_complete_across_units"] == n
    lines = [
        "design (before anything is created):",
        f"  tasks: {c['tasks']}; per annotator {lo}-{hi}; {gap}",
        f"  across-wordings units of distinct annotators: {c['items_with_across_units']} of {n} items have one, "
        f"{c['items_with_complete_across_units']} of {n} have one with every wording; "
        f"{c['ratings_in_no_across_unit']} of {c['tasks']} ratings would be in no unit (their annotator already "
        "rated the item under another wording)",
        "  supported: human agreement within one wording (overlap, Cohen, Fleiss, alpha)"
        + ("; across wordings: overlap, Cohen, alpha" if across_ok else "")
        + ("; across-wordings Fleiss on every item" if fleiss_ok else ""),
    ]
    missing = []
    if not across_ok:
        missing.append(
            f"across wordings on {n - c['items_with_across_units']} item(s) (no unit of two annotators)"
        )
    if not fleiss_ok:
        missing.append(
            f"across-wordings Fleiss on {n - c['items_with_complete_across_units']} item(s) (no complete unit: "
            "add annotators or use same_item=never)"
        )
    if missing:
        lines.append("  not supported: " + "; ".join(missing))
    return "\n".join(lines)


def format_logins(c: Campaign, url: str) -> str:
    """What to hand out: each annotator's Label Studio login and project (no password: the lab sets one)."""
    lines = ["hand out (each annotator logs in and opens only their own project; Label all tasks):"]
    for a in c.annotators:
        u, pid = (c.users or {}).get(a, {}), (c.projects or {}).get(a)
        new = (
            " (new user: set a password with `label-studio reset_password --data-dir DATA_DIR --username EMAIL`)"
            if u.get("created")
            else ""
        )
        lines.append(f"  {a}: {u.get('email')} -> {url}/projects/{pid}/data{new}")
    return "\n".join(lines)
