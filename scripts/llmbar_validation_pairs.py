"""The LLMBar Natural pairs outside the CPU study's sample, as a table for G17's paraphrase generation.

    python scripts/llmbar_validation_pairs.py outputs/llmbar_natural_validation.jsonl [--study-limit 24] [--seed 0]

The pairwise CPU study judges ``dataset.limit=24`` pairs drawn with ``seed=0`` (conf/dataset/
llmbar_natural.yaml); generation's polarity check (d) must not see them, so this writes the other
pairs of the 100, in the loader's order, with the columns the generation command maps:
``id, question, response_a, response_b, human`` (LLMBar's gold: 1 = response_a is better, 2 =
response_b). Data is read in place from ``$PROMPTLOTTERY_DATA_DIR`` (default ``../shared/data``).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from promptlottery.data.registry import load_items, sample_items


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the JSONL file to write")
    ap.add_argument("--study-limit", type=int, default=24, help="the study's dataset.limit (left out)")
    ap.add_argument("--seed", type=int, default=0, help="the study's dataset seed")
    ap.add_argument("--data-dir", default=os.environ.get("PROMPTLOTTERY_DATA_DIR", "../shared/data"))
    args = ap.parse_args(argv)

    items = load_items("llmbar", data_dir=args.data_dir, subset="natural")
    study = {it.id for it in sample_items(items, limit=args.study_limit, seed=args.seed)}
    rows = []
    for it in items:
        if it.id in study:
            continue
        pref = it.human.get("preference")
        if pref not in (0.0, 1.0):
            raise SystemExit(f"{args.data_dir}: LLMBar item {it.id}: preference {pref!r} is not 0 or 1")
        rows.append(
            {
                "id": it.id,
                "question": it.inputs["question"],
                "response_a": it.inputs["response_a"],
                "response_b": it.inputs["response_b"],
                "human": 1 if pref == 1.0 else 2,
            }
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print(f"wrote {len(rows)} pairs ({len(study)} of the study's sample left out) to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
