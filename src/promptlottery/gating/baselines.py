"""Classifier baselines on the same split as the learned gate.

* :func:`embedding_logreg`: frozen all-MiniLM-L6-v2 sentence embeddings of (answer + query), then a
  class-balanced logistic regression;
* :func:`llm_prompt_classifier`: a judge backend (a ``conf/backbone`` entry; SmolLM2 on CPU) asked
  whether the verdict will agree with the majority of the prompt variants, zero- or few-shot,
  scored by its probability of "yes" against "no". Its calls go through the call cache like
  judgments.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import numpy as np
import pandas as pd

from promptlottery.backends.base import Backend, BackendError, Decoding, JudgeRequest
from promptlottery.calls.cache import CallCache, make_request
from promptlottery.calls.loop import CallStats, run_calls
from promptlottery.gating.config import LLMBaselineConfig
from promptlottery.registry import Registry

logger = logging.getLogger(__name__)


def polarity_rates(in_cluster, trusted) -> dict[str, float]:
    """True positive / negative rates of a gate's trust decisions under both polarities, each named.

    * ``tpr_in_cluster`` / ``tnr_in_cluster``: ours, positive = the verdict is in the plurality cluster
      (trusted among in-cluster verdicts / not trusted among the others);
    * ``tpr_needs_aggregation`` / ``tnr_needs_aggregation``: the paper's, positive = the verdict needs
      aggregation (not trusted among out-of-cluster verdicts / trusted among in-cluster ones). Its
      call derivation (5 -> 1.99 calls on stable items = 1 + (1 - 0.6942) x 3.2464) reads its TNR as
      the share of stable verdicts trusted, so these are the rates printed beside its 85.06 / 69.42.

    >>> polarity_rates([1, 1, 0, 0], [True, False, False, False])
    {'tpr_in_cluster': 0.5, 'tnr_in_cluster': 1.0, 'tpr_needs_aggregation': 1.0, 'tnr_needs_aggregation': 0.5}
    """
    y = np.asarray(in_cluster, dtype=int)
    t = np.asarray(trusted, dtype=bool)
    pos, neg = y == 1, y == 0
    trusted_in = float(t[pos].mean()) if pos.any() else float("nan")
    flagged_out = float((~t[neg]).mean()) if neg.any() else float("nan")
    return {
        "tpr_in_cluster": trusted_in,
        "tnr_in_cluster": flagged_out,
        "tpr_needs_aggregation": flagged_out,
        "tnr_needs_aggregation": trusted_in,
    }


def classification_metrics(y_true, prob, threshold: float = 0.5) -> dict[str, float]:
    """MCC, balanced accuracy, TPR and TNR of ``prob >= threshold`` (the positive class: in the cluster).

    With one class among ``y_true`` (every verdict in the cluster, or none) the rate of the absent
    class, the MCC (0 / 0) and the balanced accuracy (a mean of the two rates) are undefined: NaN,
    not sklearn's 0 or the one rate left. A constant prediction on two classes keeps sklearn's MCC
    convention, 0 (no better than chance).

    >>> m = classification_metrics([1, 1, 1], [0.9, 0.2, 0.7])
    >>> round(m["tpr"], 4), [bool(np.isnan(m[k])) for k in ("tnr", "mcc", "balanced_accuracy")]
    (0.6667, [True, True, True])
    """
    from sklearn.metrics import matthews_corrcoef

    y = np.asarray(y_true, dtype=int)
    p = np.asarray(prob, dtype=float)
    pred = (np.nan_to_num(p, nan=0.0) >= threshold).astype(int)
    pos, neg = y == 1, y == 0
    tpr = float((pred[pos] == 1).mean()) if pos.any() else float("nan")
    tnr = float((pred[neg] == 0).mean()) if neg.any() else float("nan")
    two_classes = bool(pos.any() and neg.any())
    return {
        "mcc": float(matthews_corrcoef(y, pred)) if two_classes else float("nan"),
        "balanced_accuracy": (tpr + tnr) / 2 if two_classes else float("nan"),
        "tpr": tpr,
        "tnr": tnr,
        "positive_rate": float(y.mean()) if len(y) else float("nan"),
        "n": int(len(y)),
    }


def embedding_text(df: pd.DataFrame) -> list[str]:
    # answer first: the encoder truncates at 256 tokens, and the answer must survive
    return [f"{a}\n\n{q}" for a, q in zip(df["answer"], df["query"])]


def embedding_logreg(
    train_df: pd.DataFrame, others: dict[str, pd.DataFrame], *, C: float = 1.0, seed: int = 0
) -> dict[str, np.ndarray]:
    """Fit on ``train_df``; P(in cluster) for each frame in ``others`` (one encoding pass for all)."""
    from sklearn.linear_model import LogisticRegression

    from promptlottery.embeddings import encode

    names = list(others)
    frames = [train_df, *(others[n] for n in names)]
    texts = [t for f in frames for t in embedding_text(f)]
    emb = encode(texts)
    bounds = np.cumsum([0, *(len(f) for f in frames)])
    x_train = emb[bounds[0] : bounds[1]]
    clf = LogisticRegression(C=C, class_weight="balanced", max_iter=2000, random_state=seed)
    clf.fit(x_train, train_df["in_cluster"].to_numpy())
    return {n: clf.predict_proba(emb[bounds[i + 1] : bounds[i + 2]])[:, 1] for i, n in enumerate(names)}


# -- the LLM prompt classifier --------------------------------------------------------------------

QUESTION = (
    "A language-model judge was given the evaluation prompt below and answered with the verdict shown. "
    "The same judge was also given {n_others} other wordings of this prompt, and the most common "
    "verdict among all {n_total} is the majority verdict.\n\n"
    "=== Evaluation prompt ===\n{query}\n=== End of prompt ===\n\n"
    "Judge's {answer}\n\n"
    "Will this verdict agree with the majority verdict? Answer yes or no."
)
LABELS = ("yes", "no")
TASK_VERSION = 2  # 2: the paper's cuts (queries 3,500 characters, shots 1,200 each, §F.2)


def cut_middle(text: str, max_chars: int) -> str:
    """``text`` within ``max_chars``: its first third and its end, joined by " [...] " (ours).

    The end is kept because a few-shot judge prompt ends with the judged item."""
    if len(text) <= max_chars:
        return text
    head = max_chars // 3
    return text[:head] + " [...] " + text[len(text) - (max_chars - head) :]


def cut_right(text: str, max_chars: int) -> str:
    """The paper's cut (§F.2, "truncated to 3,500 characters"): the first ``max_chars`` characters.

    >>> cut_right("abcdef", 4), cut_right("ab", 4)
    ('abcd', 'ab')
    """
    return text[:max_chars]


#: the query cuts by ``truncation`` name
CUTS: Registry[Callable[[str, int], str]] = Registry("truncation", error=ValueError)
CUTS.register("right", cut_right)
CUTS.register("middle", cut_middle)


def _user_turn(query: str, answer: str, *, n_total: int, max_chars: int, truncation: str = "right") -> str:
    q = CUTS[str(truncation)](query, max_chars)
    return QUESTION.format(query=q, answer=answer, n_others=n_total - 1, n_total=n_total)


def llm_messages(
    row,
    shots: list,
    *,
    n_total: int,
    max_chars: int,
    shot_chars: int | None = None,
    truncation: str = "right",
) -> list[dict[str, str]]:
    """Chat messages: the solved ``shots`` as earlier turns, then the question about ``row``.

    The judged row's query is cut to ``max_chars``, each shot's query to ``shot_chars`` (the
    paper's 3,500 and 1,200; a shot is never longer than the judged query's cut)."""
    shot_chars = max_chars if shot_chars is None else min(shot_chars, max_chars)
    msgs: list[dict[str, str]] = []
    for s in shots:
        turn = _user_turn(s.query, s.answer, n_total=n_total, max_chars=shot_chars, truncation=truncation)
        msgs.append({"role": "user", "content": turn})
        msgs.append({"role": "assistant", "content": "yes" if int(s.in_cluster) else "no"})
    turn = _user_turn(row.query, row.answer, n_total=n_total, max_chars=max_chars, truncation=truncation)
    msgs.append({"role": "user", "content": turn})
    return msgs


def pick_shots(train_df: pd.DataFrame, n_shot: int, seed: int) -> list:
    """``n_shot`` training examples alternating positive and negative (positive first), seeded."""
    if n_shot <= 0:
        return []
    rng = random.Random(seed)
    pos = [r for r in train_df.itertuples(index=False) if int(r.in_cluster) == 1]
    neg = [r for r in train_df.itertuples(index=False) if int(r.in_cluster) == 0]
    rng.shuffle(pos)
    rng.shuffle(neg)
    out = []
    while len(out) < n_shot and (pos or neg):
        src = pos if (len(out) % 2 == 0 and pos) or not neg else neg
        out.append(src.pop())
    return out


def context_limit(backend: Backend) -> int | None:
    """The backend's context length in tokens, where it says (``Backend.context_length``), else None."""
    v = backend.context_length
    return v if isinstance(v, int) and v > 0 else None


def _fits(backend, request: JudgeRequest, limit: int) -> bool:
    """Whether ``request``'s prompt is under ``limit`` tokens (a backend may raise on an over-long one)."""
    try:
        return backend.count_tokens(request) < limit
    except BackendError:
        return False


def yes_probability(resp) -> float:
    """P(yes) / (P(yes) + P(no)) from the label probabilities, else the parsed text (1 / 0 / 0.5)."""
    probs = resp.label_probs
    if probs:
        y, n = float(probs.get("yes", 0.0)), float(probs.get("no", 0.0))
        if y + n > 0:
            return y / (y + n)
    text = (resp.raw_text or "").strip().lower()
    if text.startswith("yes"):
        return 1.0
    if text.startswith("no"):
        return 0.0
    return 0.5


def llm_prompt_classifier(
    rows: pd.DataFrame,
    train_df: pd.DataFrame,
    backend: Backend,
    cache: CallCache,
    decoding: Decoding,
    cfg: LLMBaselineConfig,
    *,
    n_total: int = 5,
    stats: CallStats | None = None,
) -> np.ndarray:
    """P(verdict agrees with the majority) for each row, asked of ``backend`` (cached calls)."""
    stats = stats if stats is not None else CallStats()
    if len(rows) == 0:
        return np.zeros(0)
    shots = pick_shots(train_df, cfg.n_shot, cfg.seed)
    ident = backend.identity()
    dec = Decoding(
        temperature=decoding.temperature,
        max_new_tokens=cfg.max_new_tokens,
        seed=decoding.seed,
        top_logprobs=decoding.top_logprobs,
        stop_at_label=True,
    )

    def request(messages: list[dict[str, str]]) -> JudgeRequest:
        return make_request(
            "gate_llm_baseline",
            ident,
            dec,
            messages=messages,
            labels=LABELS,
            parts={"task_version": TASK_VERSION},
        )

    limit = context_limit(backend)
    requests, beyond = [], 0
    for row in rows.itertuples(index=False):
        max_chars, use = int(cfg.max_query_chars), list(shots)
        while True:
            req = request(
                llm_messages(
                    row,
                    use,
                    n_total=n_total,
                    max_chars=max_chars,
                    shot_chars=int(cfg.max_shot_chars),
                    truncation=str(cfg.truncation),
                )
            )
            if limit is None or _fits(backend, req, limit - cfg.max_new_tokens):
                break
            # ours, beyond the paper's cuts: the prompt exceeds the backend's context
            if max_chars > cfg.min_query_chars:
                max_chars = max(int(cfg.min_query_chars), int(max_chars * 0.75))
            elif use:
                use = use[:-1]
            else:
                break  # does not fit even alone: the backend's error names the request
        beyond += max_chars < int(cfg.max_query_chars) or len(use) < len(shots)
        requests.append(req)
    if beyond:
        logger.warning(
            "gate llm baseline: %d of %d prompts cut beyond the paper's %d / %d characters (or shots "
            "dropped) to fit the backend's context of %s tokens",
            beyond,
            len(requests),
            cfg.max_query_chars,
            cfg.max_shot_chars,
            limit,
        )
    answers = run_calls(requests, backend, cache, dec, stats=stats, desc="gate llm baseline")
    return np.array([yes_probability(answers[r.key]) for r in requests], dtype=float)


def llm_subset(val: pd.DataFrame, max_rows: int | None, n_judges: int, seed: int) -> pd.Series:
    """Whole items, seeded, up to ``max_rows`` examples."""
    if not max_rows or len(val) <= max_rows:
        return pd.Series(True, index=val.index)
    items = sorted(val["item_key"].unique())
    # an item key can hold several backbones' judges, so the rows per item come from the data
    per_item = len(val) / len(items)
    k = min(len(items), max(1, int(max_rows // per_item)))
    chosen = set(random.Random(seed).sample(items, k))
    return val["item_key"].isin(chosen)


def run_llm_baseline(cfg, g, data, stats) -> dict[str, tuple]:
    """The LLM prompt classifier's P(yes) on the validation and test rows: ``{part: (probs, mask)}``."""
    from promptlottery.calls.compose import build_judge_runtime

    backend, cache, decoding = build_judge_runtime(cfg)
    out = {}
    try:
        for part, df in (("val", data.val), ("test", data.test)):
            mask = llm_subset(df, g.llm_baseline.max_rows, len(data.variants), g.llm_baseline.seed)
            probs = llm_prompt_classifier(
                df[mask],
                data.train,
                backend,
                cache,
                decoding,
                g.llm_baseline,
                n_total=len(data.variants),
                stats=stats,
            )
            out[part] = (probs, mask)
    finally:
        cache.close()
    return out
