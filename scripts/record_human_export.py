"""Record the small Label Studio export the fast tests read (tests/data/human/), from a running server.

    LABEL_STUDIO_API_KEY=... .venv-human/bin/python scripts/record_human_export.py http://127.0.0.1:8080

The toy campaign: the first 6 answers of examples/own_judge/qa_answers.jsonl, wordings P1 and P2 of
examples/own_judge/correctness.yaml, 3 annotators (a01-a03), 3 raters per task (so each annotator rates
every item under both wordings, never back-to-back), one Label Studio user per annotator
(toy-a01@example.org, ...) created by the campaign's client and recorded in campaign.json. Simulated
annotators, in their queue's order: the table's rating, except that a01 and a02 read P2 as a harsher
rule (2 points lower, floor 1). The export files are Label Studio's own JSON export, unedited.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "human"


def main(url: str) -> None:
    import os

    from label_studio_sdk import LabelStudio

    from promptlottery.data.loaders.table import load_table
    from promptlottery.human.assignment import Design
    from promptlottery.human.campaign import build_campaign, write_campaign
    from promptlottery.human.labelstudio import LabelStudioClient, choice_result, labeling_config, tasks_for
    from promptlottery.prompts.groups import load_group_file

    table = REPO / "examples" / "own_judge" / "qa_answers.jsonl"
    fields = {
        "id": "id",
        "response": "answer",
        "context": "question",
        "reference": "gold",
        "system": "system",
        "human": "rating",
    }
    items = load_table(REPO, path=str(table), fields=fields, human_range=[1, 5])[:6]
    group = load_group_file(REPO / "examples" / "own_judge" / "correctness.yaml")
    c = build_campaign("toy", items, group, 3, Design(raters_per_task=3, seed=0), wordings=["P1", "P2"])
    client = LabelStudioClient(url)
    c.users = client.map_users({a: f"toy-{a}@example.org" for a in c.annotators})
    c.projects = client.create_projects(
        tasks_for(c.assignment, c.instructions, c.name), labeling_config(c.labels), title="toy"
    )
    c.label_studio_url = client.url
    sdk = LabelStudio(base_url=url, api_key=os.environ["LABEL_STUDIO_API_KEY"])
    truth = {it.id: int(it.human["human"]) for it in items}
    for a, pid in c.projects.items():
        for t in sorted(sdk.tasks.list(project=pid), key=lambda x: x.meta["position"]):
            y = truth[t.meta["item_id"]]
            if t.meta["wording"] == "P2" and a in ("a01", "a02"):
                y = max(1, y - 2)
            sdk.annotations.create(
                id=t.id,
                completed_by=c.users[a]["id"],
                lead_time=1.0,
                result=choice_result(str(y)),
            )
    if OUT.exists():
        shutil.rmtree(OUT)
    write_campaign(c, OUT)
    shutil.rmtree(OUT / "tasks")  # the import files are rebuilt by the tests; the export holds the tasks
    client.export(c.projects, OUT)
    print(json.dumps({"projects": c.projects, "files": sorted(p.name for p in OUT.iterdir())}))


if __name__ == "__main__":
    main(sys.argv[1])
