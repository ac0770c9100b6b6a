"""Paraphrase validation: do a group's variants say the same thing in different words?

Each variant's instruction text is its system template (if any) followed by its user template,
**rendered with placeholder values**: every template variable ``x`` is replaced by ``[X]`` (so
``{{ response }}`` reads ``[RESPONSE]`` and ``{% if knowledge %}`` blocks are included). On those
texts we measure, per group:

* semantic similarity: cosine similarity of all-MiniLM-L6-v2 sentence embeddings, averaged over
  all variant pairs (``mean_sim``) and over P2..Pn against P1 (``mean_sim_to_p1``);
* lexical overlap: Jaccard similarity of the sets of lowercase word tokens, averaged over all
  variant pairs (``mean_jaccard``);
* length ratio: words of a paraphrase / words of P1 (mean, min, max over P2..Pn).

A paraphrase whose similarity to P1 is below ``threshold`` (0.85) is flagged. A group meets the
target of a validated paraphrase set when ``mean_sim >= 0.90`` and ``mean_jaccard <= 0.5``:
the variants mean the same while sharing few words (thresholds ours).

The paper (§3.1): "their average sBERT similarity was 0.93 despite lexical overlap of 0.38 +- 0.01.
Three LLMs rated prompt similarity at 81%, 84%, and 79%, respectively". With
``validation.equivalence=true`` the stage's backbone rates each paraphrase against P1
(:func:`rate_equivalence`: "does B ask for the same judgment as A? Yes / No", through the cached
backend calls; the share it accepts is its rating, ours beside the paper's three); sweep
``backbone=`` over the panel for one rating per judge. The wording of that question is ours (the
summary prints none). The other outputs are the same with or without it.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.prompts.group_text import template_variables
from promptlottery.prompts.groups import PromptGroup, render

log = logging.getLogger(__name__)

ORIGINAL = "P1"
DEFAULT_THRESHOLD = 0.85
TARGET_SIMILARITY = 0.90
TARGET_MAX_OVERLAP = 0.5
TEXT_MODE = "rendered with placeholder values ([RESPONSE], ...), system + user"
_WORD = re.compile(r"\w+")

Encoder = Callable[[list[str]], np.ndarray]
#: the paper's §3.1 figures, printed beside ours
PAPER_VALIDATION = {
    "sbert_similarity": "0.93",
    "lexical_overlap": "0.38 +- 0.01",
    "llm_equivalence": "81%, 84% and 79% (three LLMs)",
}
EQUIVALENCE_LABELS = ("Yes", "No")
EQUIVALENCE_VERSION = 1  # bump when the question's wording changes (it is in the cache key)


# -- text measures -----------------------------------------------------------------------------


def word_tokens(text: str) -> list[str]:
    """Lowercase word tokens (runs of letters, digits and underscores)."""
    return _WORD.findall(text.lower())


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' sets of lowercase word tokens (1.0 for two empty texts)."""
    sa, sb = set(word_tokens(a)), set(word_tokens(b))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def length_ratio(text: str, original: str) -> float:
    """Words of ``text`` divided by words of ``original``."""
    n = len(word_tokens(original))
    if n == 0:
        raise ValueError("the original text has no words")
    return len(word_tokens(text)) / n


def placeholder_values(group: PromptGroup) -> dict[str, str]:
    return {name: f"[{name.upper()}]" for name in sorted(template_variables(group))}


def variant_texts(group: PromptGroup) -> dict[str, str]:
    """Each variant's system + user text rendered with placeholder values, in variant order."""
    values = placeholder_values(group)
    texts = {}
    for vid, v in group.variants.items():
        where = f"prompt group {group.id} variant {vid} (placeholder rendering)"
        parts = [render(v.system, values, where=where)] if v.system else []
        parts.append(render(v.user, values, where=where))
        texts[vid] = "\n\n".join(parts)
    return texts


def _default_encoder(texts: list[str]) -> np.ndarray:
    from promptlottery.embeddings import encode

    return encode(texts)


# -- per group / all groups ----------------------------------------------------------------------


def validate_group(
    group: PromptGroup, *, threshold: float = DEFAULT_THRESHOLD, encoder: Encoder | None = None
) -> list[dict[str, Any]]:
    """One row per variant: similarity and overlap with P1 and with the other variants, length ratio, flag.

    The rows carry the group id, so the rows of several groups concatenate into one DataFrame;
    ``group_mean_sim`` / ``group_mean_jaccard`` (the means over all variant pairs) repeat on each row.
    ``encoder`` maps a list of texts to embeddings (default: all-MiniLM-L6-v2); they are
    L2-normalised here, so any encoder works.
    """
    if ORIGINAL not in group.variants:
        raise ValueError(f"prompt group {group.id} has no original variant {ORIGINAL}")
    texts = variant_texts(group)
    ids = list(texts)
    emb = np.asarray((encoder or _default_encoder)([texts[i] for i in ids]), dtype=np.float64)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = emb / np.where(norms > 0, norms, 1.0)
    sim = emb @ emb.T
    p1 = ids.index(ORIGINAL)
    rows = []
    for i, vid in enumerate(ids):
        others = [j for j in range(len(ids)) if j != i]
        rows.append(
            {
                "group": group.id,
                "judge_family": group.judge_family,
                "held_out": group.held_out,
                "variant": vid,
                "words": len(word_tokens(texts[vid])),
                "length_ratio": length_ratio(texts[vid], texts[ORIGINAL]),
                "sim_to_p1": float(sim[i, p1]),
                "jaccard_to_p1": jaccard(texts[vid], texts[ORIGINAL]),
                "mean_sim_to_others": float(np.mean([sim[i, j] for j in others])) if others else np.nan,
                "mean_jaccard_to_others": (
                    float(np.mean([jaccard(texts[vid], texts[ids[j]]) for j in others])) if others else np.nan
                ),
                "flagged": vid != ORIGINAL and float(sim[i, p1]) < threshold,
            }
        )
    # group-level means over every unordered pair, repeated on each row so summarize() can read them
    pairs = list(itertools.combinations(range(len(ids)), 2))
    pair_sim = float(np.mean([sim[i, j] for i, j in pairs])) if pairs else np.nan
    pair_jac = float(np.mean([jaccard(texts[ids[i]], texts[ids[j]]) for i, j in pairs])) if pairs else np.nan
    for r in rows:
        r["group_mean_sim"] = pair_sim
        r["group_mean_jaccard"] = pair_jac
    return rows


def summarize(
    variants: pd.DataFrame,
    *,
    target_similarity: float = TARGET_SIMILARITY,
    max_overlap: float = TARGET_MAX_OVERLAP,
) -> pd.DataFrame:
    """One row per group from the per-variant rows of :func:`validate_group`."""
    out = []
    for gid, df in variants.groupby("group", sort=False):
        para = df[df["variant"] != ORIGINAL]
        mean_sim = float(df["group_mean_sim"].iloc[0])
        mean_jac = float(df["group_mean_jaccard"].iloc[0])
        out.append(
            {
                "group": gid,
                "judge_family": df["judge_family"].iloc[0],
                "held_out": bool(df["held_out"].iloc[0]),
                "n_variants": len(df),
                "p1_words": int(df.loc[df["variant"] == ORIGINAL, "words"].iloc[0]),
                "mean_sim": mean_sim,
                "mean_sim_to_p1": float(para["sim_to_p1"].mean()),
                "min_sim_to_p1": float(para["sim_to_p1"].min()),
                "mean_jaccard": mean_jac,
                "length_ratio_mean": float(para["length_ratio"].mean()),
                "length_ratio_min": float(para["length_ratio"].min()),
                "length_ratio_max": float(para["length_ratio"].max()),
                "flagged": ",".join(para.loc[para["flagged"], "variant"]),
                "meets_target": bool(mean_sim >= target_similarity and mean_jac <= max_overlap),
            }
        )
    return pd.DataFrame(out)


def validate_variants(
    groups: Iterable[PromptGroup], *, threshold: float = DEFAULT_THRESHOLD, encoder: Encoder | None = None
) -> pd.DataFrame:
    """Per-variant rows of every group."""
    rows = [r for g in groups for r in validate_group(g, threshold=threshold, encoder=encoder)]
    return pd.DataFrame(rows)


def validate_all(
    groups: Iterable[PromptGroup],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    target_similarity: float = TARGET_SIMILARITY,
    max_overlap: float = TARGET_MAX_OVERLAP,
    encoder: Encoder | None = None,
) -> pd.DataFrame:
    """One summary row per group (see the module docstring for the columns' meaning)."""
    variants = validate_variants(groups, threshold=threshold, encoder=encoder)
    return summarize(variants, target_similarity=target_similarity, max_overlap=max_overlap)


# -- LLM rating of equivalence (§3.1) -------------------------------------------------------------


def equivalence_question(original: str, variant: str) -> str:
    """The question put to a judge (ours): does prompt B ask for the same judgment as prompt A?"""
    return (
        "Two instructions for an evaluator follow. Decide whether instruction B asks for the same "
        "judgment as instruction A (the same criterion and the same scale), whatever the wording.\n\n"
        f"Instruction A:\n{original}\n\nInstruction B:\n{variant}\n\n"
        "Does B ask for the same judgment as A? Answer Yes or No.\nAnswer:"
    )


def rate_equivalence(
    groups: Iterable[PromptGroup],
    backend: Any,
    cache: Any,
    *,
    prompt_format: str = "chat",
    backbone: str = "",
) -> pd.DataFrame:
    """One row per paraphrase (P2..Pn) of each group: the backend's verdict on "same judgment as P1?".

    ``accepted`` is the argmax of the two labels' probabilities (``p_yes`` = p(Yes) / (p(Yes) + p(No)))
    where the backend gives them, else the answer's first word; NaN with a ``note`` when neither
    names a label. Calls go through ``cache`` (:class:`~promptlottery.calls.cache.CallCache`), keyed
    by the backend's identity, the messages, the decoding and :data:`EQUIVALENCE_VERSION`.
    """
    from promptlottery.backends.base import Decoding
    from promptlottery.calls.cache import make_request
    from promptlottery.calls.loop import CallStats, run_calls

    decoding = Decoding(max_new_tokens=4)
    ident = backend.identity()
    reqs, rows = [], []
    for group in groups:
        texts = variant_texts(group)
        for vid, text in texts.items():
            if vid == ORIGINAL:
                continue
            q = equivalence_question(texts[ORIGINAL], text)
            body = (
                {"prompt": q}
                if prompt_format == "completion"
                else {"messages": [{"role": "user", "content": q}]}
            )
            req = make_request(
                "paraphrase_equivalence", ident, decoding, labels=EQUIVALENCE_LABELS,
                parts={"version": EQUIVALENCE_VERSION}, **body,
            )  # fmt: skip
            key = req.key
            reqs.append(req)
            rows.append({"group": group.id, "variant": vid, "backbone": backbone, "key": key})
    answers = (
        run_calls(reqs, backend, cache, decoding, stats=CallStats(), desc="equivalence ratings")
        if reqs
        else {}
    )
    for r in rows:
        a = answers[r.pop("key")]
        probs = {k: float(v) for k, v in (a.label_probs or {}).items() if k in EQUIVALENCE_LABELS}
        words = word_tokens(a.raw_text or "")
        r["raw_output"] = a.raw_text
        r["p_yes"] = probs.get("Yes", 0.0) / sum(probs.values()) if sum(probs.values()) > 0 else np.nan
        if np.isfinite(r["p_yes"]):
            r["accepted"], r["note"] = float(r["p_yes"] >= 0.5), ""
        elif words and words[0] in ("yes", "no"):
            r["accepted"], r["note"] = (
                float(words[0] == "yes"),
                "no label probabilities: the answer's first word",
            )
        else:
            r["accepted"], r["note"] = np.nan, "n/a: neither label probabilities nor a Yes / No answer"
    return pd.DataFrame(
        rows, columns=["group", "variant", "backbone", "raw_output", "p_yes", "accepted", "note"]
    )


def equivalence_summary(ratings: pd.DataFrame) -> dict[str, Any]:
    """The share of paraphrases the judge accepts as equivalent (answered ones), beside the paper's."""
    ok = ratings["accepted"].dropna() if len(ratings) else pd.Series(dtype=float)
    return {
        "backbone": ratings["backbone"].iloc[0] if len(ratings) else "",
        "n_paraphrases": len(ratings),
        "n_answered": len(ok),
        "share_accepted": float(ok.mean()) if len(ok) else float("nan"),
        "paper": PAPER_VALIDATION["llm_equivalence"],
    }


# -- report ---------------------------------------------------------------------------------------

_COLUMNS = {
    "group": "group",
    "judge_family": "family",
    "n_variants": "n",
    "p1_words": "P1 words",
    "mean_sim": "mean sim (pairs)",
    "mean_sim_to_p1": "mean sim to P1",
    "min_sim_to_p1": "min sim to P1",
    "mean_jaccard": "lexical overlap",
    "length_ratio_mean": "len ratio mean",
    "length_ratio_range": "len ratio min-max",
    "flagged": "flagged (<thr)",
    "meets_target": "target met",
}


def to_markdown(summary: pd.DataFrame) -> str:
    """The summary as a Markdown table (numbers to two decimals)."""
    header = list(_COLUMNS.values())
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in summary.to_dict("records"):
        cells = {
            "group": r["group"] + (" (held out)" if r["held_out"] else ""),
            "judge_family": r["judge_family"],
            "n_variants": str(r["n_variants"]),
            "p1_words": str(r["p1_words"]),
            "mean_sim": f"{r['mean_sim']:.3f}",
            "mean_sim_to_p1": f"{r['mean_sim_to_p1']:.3f}",
            "min_sim_to_p1": f"{r['min_sim_to_p1']:.3f}",
            "mean_jaccard": f"{r['mean_jaccard']:.3f}",
            "length_ratio_mean": f"{r['length_ratio_mean']:.2f}",
            "length_ratio_range": f"{r['length_ratio_min']:.2f}-{r['length_ratio_max']:.2f}",
            "flagged": r["flagged"] or "-",
            "meets_target": "yes" if r["meets_target"] else "no",
        }
        lines.append("| " + " | ".join(cells[k] for k in _COLUMNS) + " |")
    return "\n".join(lines)


def paper_comparison(summary: pd.DataFrame, equivalence: dict[str, Any] | None = None) -> str:
    """The paper's §3.1 validation figures beside ours (means over the groups validated)."""
    sim, jac = float(summary["mean_sim_to_p1"].mean()), float(summary["mean_jaccard"].mean())
    llm = "not run (validation.equivalence=true)"
    if equivalence is not None:
        share = equivalence["share_accepted"]
        llm = f"{share:.1%} ({equivalence['backbone']})" if np.isfinite(share) else "n/a"
    return "\n".join(
        [
            "## Beside the paper (§3.1)",
            "",
            "| measure | paper | ours (mean over groups) | how ours differs |",
            "|---|---|---|---|",
            f"| similarity of the paraphrases to P1 | {PAPER_VALIDATION['sbert_similarity']} (sBERT) | {sim:.3f} | "
            "ours: all-MiniLM-L6-v2 cosine, templates rendered with placeholders |",
            f"| lexical overlap | {PAPER_VALIDATION['lexical_overlap']} | {jac:.3f} | ours: token Jaccard, "
            "mean over variant pairs |",
            f"| LLM rating of equivalence | {PAPER_VALIDATION['llm_equivalence']} | {llm} | ours: the question "
            "of `rate_equivalence`, one judge per run |",
        ]
    )
