"""The gate classifier's input: (answer, query) sentence pairs, tokenised and batched.

The answer comes first and always survives truncation; the query is cut so the pair fits
``max_length`` tokens, by default in its middle, so both the judge's instructions at its start and
the judged item at its end (after any few-shot examples) are seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from promptlottery.gating.config import ClassifierConfig

__all__ = ["Collate", "encode", "frame_encode", "make_loader"]


def _cut_middle(tokenizer, answers: list[str], queries: list[str], max_length: int) -> list[str]:
    """``queries`` with their middle replaced by " ... " where the (answer, query) pair is too long.

    The cut is made on token boundaries of the query (offsets of a fast tokenizer): the first third of
    the query's token budget is kept from its start and the rest from its end. A few tokens are left
    spare because re-tokenising at the cut may merge differently; the pair tokenisation after this
    still truncates (``only_second``) as a last resort.
    """
    n_special = tokenizer.num_special_tokens_to_add(pair=True)
    a_len = [len(x) for x in tokenizer(list(answers), add_special_tokens=False)["input_ids"]]
    try:
        q_enc = tokenizer(list(queries), add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError as e:  # a slow (Python) tokenizer has no offsets
        raise ValueError(
            f"gate.classifier.query_truncation=middle needs a fast tokenizer ({type(tokenizer).__name__} "
            "gives no offsets); set gate.classifier.query_truncation=right"
        ) from e
    out = []
    for q, alen, offsets in zip(queries, a_len, q_enc["offset_mapping"]):
        budget = max_length - n_special - alen - 4  # 4: " ... " and re-tokenisation slack
        if len(offsets) <= budget + 4 or budget < 8:
            out.append(q)
            continue
        head = budget // 3
        tail = budget - head
        out.append(q[: offsets[head - 1][1]] + " ... " + q[offsets[len(offsets) - tail][0] :])
    return out


def encode(
    tokenizer,
    answers: list[str],
    queries: list[str],
    labels=None,
    *,
    max_length: int = 512,
    query_truncation: str = "middle",
) -> list[dict]:
    """Tokenised (answer, query) pairs; the query is truncated so the pair fits ``max_length``."""
    if query_truncation == "middle":
        queries = _cut_middle(tokenizer, answers, queries, max_length)
    enc = tokenizer(list(answers), list(queries), truncation="only_second", max_length=max_length)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
    out = []
    for i in range(len(answers)):
        row = {k: enc[k][i] for k in keys}
        if labels is not None:
            row["labels"] = int(labels[i])
        out.append(row)
    return out


class Collate:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, rows: list[dict]):
        import torch

        labels = [r["labels"] for r in rows] if "labels" in rows[0] else None
        feats = [{k: v for k, v in r.items() if k != "labels"} for r in rows]
        batch = self.tokenizer.pad(feats, return_tensors="pt")
        if labels is not None:
            batch["labels"] = torch.tensor(labels, dtype=torch.long)
        return dict(batch)


def make_loader(tokenizer, encoded: list[dict], *, batch_size: int, shuffle: bool, seed: int = 0):
    import torch
    from torch.utils.data import DataLoader

    gen = torch.Generator().manual_seed(seed)
    return DataLoader(
        encoded, batch_size=batch_size, shuffle=shuffle, collate_fn=Collate(tokenizer), generator=gen
    )


def frame_encode(
    tokenizer, df: pd.DataFrame, cfg: ClassifierConfig, *, with_labels: bool = True
) -> list[dict]:
    labels = df["in_cluster"].to_numpy() if with_labels else None
    return encode(
        tokenizer,
        df["answer"].tolist(),
        df["query"].tolist(),
        labels,
        max_length=cfg.max_length,
        query_truncation=cfg.query_truncation,
    )
