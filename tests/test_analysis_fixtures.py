"""Small synthetic judgments tables for the analysis tests, with answers computable by hand.

Config A (stsb / semantic_alignment / G12 / likert_1_5, backbone bb1): 4 items, 3 variants

    item  system human   P1 P2 P3   (argmax labels)
    i1    A      1       1  1  1
    i2    B      2       1  1  2
    i3    C      3       2  2  2
    i4    D      4       2  2  1

  plus P1 sampled 3 times at T = 1e-5 (the same label every time: 1, 1, 2, 2 per item) and at
  T = 0.7 (sampled answers, ``parsed_label``, all "5": collapsed).
Config B (topical_chat_usr / dialogue_quality / G1 / binary, backbone bb1): 6 items, 3 variants

    i1 yes yes yes | i2 yes no no | i3 no yes yes | i4 no no yes | i5 yes no yes | i6 no yes no

Config C (stsb / G12, backbone bb2): the same items as A, every verdict "5" (collapsed).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

A_LABELS = {"P1": ["1", "1", "2", "2"], "P2": ["1", "1", "2", "2"], "P3": ["1", "2", "2", "1"]}
A_HUMAN = [1.0, 2.0, 3.0, 4.0]
A_SYSTEMS = ["A", "B", "C", "D"]
B_LABELS = {
    "P1": ["yes", "yes", "no", "no", "yes", "no"],
    "P2": ["yes", "no", "yes", "no", "no", "yes"],
    "P3": ["yes", "no", "yes", "yes", "yes", "no"],
}
B_HUMAN = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]


def _row(
    dataset,
    family,
    group,
    scale,
    backbone,
    criterion,
    item,
    system,
    human,
    variant,
    label,
    *,
    temperature=1e-5,
    sample_index=0,
    parsed=None,
    weighted=None,
):
    score = {"yes": 1.0, "no": 0.0}.get(label, None) if scale == "binary_yes_no" else float(label)
    return {
        "schema_version": 1,
        "condition": f"{dataset}/{family}/{group}/{variant}/{backbone}",
        "dataset": dataset,
        "judge_family": family,
        "prompt_group": group,
        "variant": variant,
        "backbone": backbone,
        "criterion": criterion,
        "rubric": None,
        "prompt_format": "chat",
        "scale": scale,
        "item_id": item,
        "system": system,
        "sample_index": sample_index,
        "temperature": temperature,
        "seed": 0,
        "human": human,
        "human_raters": None,
        "human_kind": "mean",
        "raw_output": parsed if parsed is not None else label,
        "parsed_label": parsed if parsed is not None else label,
        "argmax_label": label,
        "argmax_score": score,
        "weighted_score": weighted if weighted is not None else score,
        "label_mass": 0.9,
        "scoring_mode": "logprob_weighted",
        "score": weighted if weighted is not None else score,
        "label_probs": json.dumps({label: 0.9}),
    }


def config_a(backbone: str = "bb1", labels: dict | None = None, *, baselines: bool = True) -> list[dict]:
    labels = labels or A_LABELS
    rows = []
    for v, labs in labels.items():
        for k, lab in enumerate(labs):
            rows.append(
                _row(
                    "stsb",
                    "semantic_alignment",
                    "G12",
                    "likert_1_5",
                    backbone,
                    "similarity",
                    f"i{k + 1}",
                    A_SYSTEMS[k],
                    A_HUMAN[k],
                    v,
                    lab,
                    weighted=float(lab) + 0.1 * (k % 2),
                )
            )
    if baselines:
        for k, lab in enumerate(labels["P1"]):
            for s in range(3):
                # near-greedy: sample 0 duplicates the paraphrase row (deduplicated on load)
                rows.append(
                    _row(
                        "stsb",
                        "semantic_alignment",
                        "G12",
                        "likert_1_5",
                        backbone,
                        "similarity",
                        f"i{k + 1}",
                        A_SYSTEMS[k],
                        A_HUMAN[k],
                        "P1",
                        lab,
                        sample_index=s,
                    )
                )
                # sampled: the argmax stays the same, the sampled answer says 5
                rows.append(
                    _row(
                        "stsb",
                        "semantic_alignment",
                        "G12",
                        "likert_1_5",
                        backbone,
                        "similarity",
                        f"i{k + 1}",
                        A_SYSTEMS[k],
                        A_HUMAN[k],
                        "P1",
                        lab,
                        temperature=0.7,
                        sample_index=s,
                        parsed="5",
                    )
                )
    return rows


def config_b(backbone: str = "bb1") -> list[dict]:
    rows = []
    for v, labs in B_LABELS.items():
        for k, lab in enumerate(labs):
            rows.append(
                _row(
                    "topical_chat_usr",
                    "dialogue_quality",
                    "G1",
                    "binary_yes_no",
                    backbone,
                    "engaging",
                    f"t{k + 1}",
                    None,
                    B_HUMAN[k],
                    v,
                    lab,
                )
            )
    return rows


def config_c(backbone: str = "bb2") -> list[dict]:
    return config_a(backbone, {v: ["5"] * 4 for v in A_LABELS}, baselines=False)


def judgments(*parts: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([r for p in parts for r in p])


def default_judgments() -> pd.DataFrame:
    return judgments(config_a(), config_b(), config_c())


def write_sweep(root: Path, df: pd.DataFrame | None = None) -> Path:
    """One job directory per (dataset, backbone, variant, temperature), like a Hydra sweep."""
    df = default_judgments() if df is None else df
    root.mkdir(parents=True, exist_ok=True)
    keys = ["dataset", "backbone", "variant", "temperature"]
    for n, (key, g) in enumerate(sorted(df.groupby(keys), key=lambda t: tuple(map(str, t[0])))):
        job = root / f"{n}_{'_'.join(map(str, key))}"
        job.mkdir()
        g.to_parquet(job / "judgments.parquet", index=False)
        (job / "results.json").write_text(
            json.dumps(
                {
                    "status": "ok",
                    "backend": {"model": f"model-{key[1]}"},
                    "config": {"backbone": {"name": key[1]}},
                    "metrics": {"n_judgments": len(g)},
                }
            )
        )
    return root


def fake_encode(texts: list[str]) -> np.ndarray:
    """Deterministic stand-in for the sentence encoder: a unit vector from the text's bytes."""
    out = []
    for t in texts:
        rng = np.random.default_rng(sum(t.encode()) % 2**32)
        v = rng.normal(size=8)
        out.append(v / np.linalg.norm(v))
    return np.array(out)
