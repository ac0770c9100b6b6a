"""A campaign from a dataset and a prompt group: the assignment, the tasks, the files, the projects.

Writes into the campaign directory: ``campaign.json`` (what the import checks ratings against:
items, wordings, annotators, the scale's labels, the design, the Label Studio project ids),
``assignment.csv`` (annotator, position, item_id, wording), ``label_config.xml`` and
``tasks/<annotator>.json`` (Label Studio import files, one project per annotator).
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
