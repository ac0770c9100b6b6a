"""A JUDGE-BENCH file (Bavaresco et al., ACL 2025) as a table for `dataset=table`, and its prompt as a template.

    python examples/own_judge/judge_bench_to_table.py ../shared/data/judge_bench_dmg_illc/cola/cola.json \
        grammaticality /tmp/cola.jsonl /tmp/cola.j2 --limit 40

Writes one JSONL line per instance (``id``, ``text``, ``label``: the majority human label mapped to a
number, the first label of ``labels_list`` = 1, the second = 0 for binary metrics; ``mean_human``
as is for graded ones) and the metric's original annotator prompt with ``{{ instance }}`` renamed
to ``{{ response }}``. ``--limit`` keeps a seeded sample of instances.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def convert(src: Path, metric: str, table: Path, template: Path, limit: int | None, seed: int) -> int:
    data = json.loads(src.read_text(encoding="utf-8"))
    ann = next((a for a in data["annotations"] if a["metric"] == metric), None)
    if ann is None:
        raise SystemExit(f"{src}: no metric {metric!r}; metrics: {[a['metric'] for a in data['annotations']]}")
    labels = ann.get("labels_list") or []
    binary = {lab.lower(): float(len(labels) - 1 - i) for i, lab in enumerate(labels)} if len(labels) == 2 else {}
    rows = []
    for inst in data["instances"]:
        a = inst["annotations"].get(metric) or {}
        raw = a.get("majority_human", a.get("mean_human"))
        label = binary.get(str(raw).lower()) if binary else raw
        if label is None or not isinstance(inst.get("instance"), str):
            continue  # no human label, or a structured (dialogue) instance
        rows.append({"id": str(inst["id"]), "text": inst["instance"], "label": label})
    if limit is not None and limit < len(rows):
        keep = sorted(random.Random(seed).sample(range(len(rows)), limit))
        rows = [rows[i] for i in keep]
    table.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    template.write_text(ann["prompt"].replace("{{ instance }}", "{{ response }}") + "\n", encoding="utf-8")
    return len(rows)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path)
    p.add_argument("metric")
    p.add_argument("table", type=Path)
    p.add_argument("template", type=Path)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    n = convert(a.src, a.metric, a.table, a.template, a.limit, a.seed)
    print(f"wrote table={a.table} rows={n} template={a.template}")
