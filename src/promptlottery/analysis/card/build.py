"""The judge card: one page per judge x prompt group x dataset criterion, beside the lottery.

``python -m promptlottery.analysis.card.build SWEEP_DIR [SWEEP_DIR ...] [--out DIR] [--verdict argmax|weighted]``
reads the judging jobs under the sweep directories (a control-variant sweep beside the paraphrase
one: ``judge.controls=true``), and writes ``DIR/<card id>/card.md``, ``card.png`` and
``card.json`` plus ``DIR/cards.json`` (every card's headline; default ``DIR``: ``<first sweep
dir>/card``). Each section gives its number, its interval, its n and its source definition:

* the lottery: the share of items whose verdict changes between two paraphrases (the lottery's
  ``changed``) and each wording's Spearman correlation with the human mean;
* position bias (pairwise): the share of pairs judged differently in the two orders and the rate at
  which the first-shown answer wins (MT-Bench, Zheng et al. 2023, §3.3);
* length bias: :func:`~promptlottery.metrics.length_bias.length_slope` (pointwise) or AlpacaEval 2's
  length term and length-controlled win rate (pairwise);
* control sensitivity: :func:`~promptlottery.metrics.controls.control_sensitivity`;
* the alt-test: :func:`~promptlottery.metrics.alt_test.alt_test` per wording (items with >= 3
  raters);
* the human-corrected estimate: PPI++ (:func:`~promptlottery.metrics.human_corrected.ppi_mean`)
  from a human-labelled slice, its coverage of the all-human mean over many slices beside the
  human-only and judge-only intervals, and the system ranking's changes between wordings before
  and after correction.

Every number uses the verdict named in the card (``argmax``: the most probable label's score;
``weighted``: the logprob-weighted score rounded to a label; :func:`judging.table.add_verdicts`).
A judge run on the fake backend says "FAKE" in every output.
"""

from __future__ import annotations

import argparse
import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.analysis.card import sections as cs
from promptlottery.analysis.card import words as cw
from promptlottery.analysis.card.kind import card_kind
from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import add_verdicts, paraphrase_rows, variant_order
from promptlottery.prompts.groups import PromptGroup, load_group, load_group_file
from promptlottery.prompts.scales import get_scale

logger = logging.getLogger(__name__)

CARD_KEYS = ("dataset", "criterion", "prompt_group", "backbone", "judge_mode")


@dataclass(frozen=True)
class CardOptions:
    verdict: str = "argmax"
    level: float = 0.95  # bootstrap intervals
    ppi_level: float = 0.9  # the corrected estimate's interval (the coverage target)
    n_resamples: int = 1000
    slices: tuple[int, ...] = (25, 50, 100)
    n_draws: int = 500
    rank_share: float = 0.25  # the human-labelled share of each system's items for the rank study
    bt_share: float = 0.5  # the human-labelled share of the pairs for the corrected Bradley-Terry fit
    epsilon: float | None = None  # None: per dataset (card_sections.EPSILON_BY_DATASET)
    seed: int = 0


def _group_of(rows: pd.DataFrame) -> PromptGroup | None:
    files = rows["group_file"].dropna().unique() if "group_file" in rows.columns else []
    files = [f for f in files if isinstance(f, str) and f]
    try:
        return load_group_file(files[0]) if files else load_group(str(rows["prompt_group"].iloc[0]))
    except Exception as exc:  # noqa: BLE001 - a group judged from a file no longer there: no controls
        logger.warning(
            "card: prompt group %s not loadable (%s); no control variants", rows["prompt_group"].iloc[0], exc
        )
        return None


def _run_config(rows: pd.DataFrame) -> dict:
    for d in rows["run_dir"].dropna().unique():
        p = Path(d) / "results.json"
        if p.is_file():
            return json.loads(p.read_text(encoding="utf-8")).get("config", {})
    return {}


def is_fake(rows: pd.DataFrame) -> bool:
    ident = " ".join(str(x) for x in rows.get("backend_identity", pd.Series(dtype=str)).dropna().unique())
    return bool(
        '"backend": "fake"' in ident or "'backend': 'fake'" in ident or (rows["backbone"] == "fake").any()
    )


def card_id(key: dict) -> str:
    return "__".join(str(key[k]) for k in CARD_KEYS).replace("/", "-")


def build_card(rows: pd.DataFrame, opts: CardOptions) -> dict:
    """The card of one judge x prompt group x dataset criterion (``rows``: its judgments with verdicts)."""
    key = {k: str(rows[k].iloc[0]) for k in CARD_KEYS}
    kind = card_kind(key["judge_mode"])
    group = _group_of(rows)
    controls = dict(group.controls) if group is not None else {}
    scale = get_scale(str(rows["scale"].iloc[0]))
    cfg = _run_config(rows)
    human_range = tuple(
        float(x) for x in (cfg.get("dataset", {}) or {}).get("human_range") or (np.nan, np.nan)
    )
    para_all = paraphrase_rows(rows, key=kind.key)
    para = para_all[~para_all["variant"].isin(controls)]
    ctrl = para_all[para_all["variant"].isin(controls)]
    wordings = variant_order(para["variant"].unique())
    card = {
        "key": key,
        "id": card_id(key),
        "fake": is_fake(rows),
        "verdict": opts.verdict,
        "scale": scale.name,
        "wordings": wordings,
        "controls_judged": sorted(ctrl["variant"].unique().tolist()),
        "n_items": int(para["item_id"].nunique()),
        "human_range": list(human_range),
    }
    texts, texts_note = cs.item_texts(cfg, para["item_id"].unique())
    kind.fill(
        card,
        para,
        ctrl,
        wordings=wordings,
        controls=controls,
        texts=texts,
        texts_note=texts_note,
        scale=scale,
        human_range=human_range,
        opts=opts,
    )
    card["verdict_text"] = cw.verdict_paragraph(card)
    card["headline"] = cw.headline(card)
    return card


def build_cards(runs, opts: CardOptions = CardOptions()) -> list[dict]:
    problems: list = []
    df = add_verdicts(load_judgments(runs, allow_partial=True, problems=problems), opts.verdict)
    notes = {k: v for p in problems for k, v in p.items()}  # config id -> what a partial grid lacks
    cards = []
    for _, rows in df.groupby(list(CARD_KEYS), sort=True, dropna=False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            card = build_card(rows, opts)
        card["partial"] = [f"{k}: {v}" for k, v in notes.items() if k in set(rows["config_id"])]
        cards.append(card)
    return cards


def write_cards(cards: list[dict], out: Path) -> list[Path]:
    """Each card's ``<id>/card.json``, ``card.md`` and ``card.png`` and the index ``cards.json`` under
    ``out``, through the one writer (:class:`~promptlottery.tracking.staging.staged_outputs`): written
    aside, then moved into place together, so a run killed mid-write leaves the earlier cards whole.
    No results.json (the folder sits in a sweep dir, where one would read as a judging job's)."""
    from promptlottery.analysis.card import render as card_render
    from promptlottery.tracking.staging import staged_outputs

    out = Path(out)
    with staged_outputs(out, results=False) as staging:
        for card in cards:
            d = staging / card["id"]
            d.mkdir(parents=True, exist_ok=True)
            (d / "card.json").write_text(json.dumps(card, indent=1, default=_json), encoding="utf-8")
            (d / "card.md").write_text(card_render.markdown(card), encoding="utf-8")
            card_render.figure(card, d / "card.png")
        index = [
            {
                "id": c["id"],
                "fake": c["fake"],
                "headline": c["headline"],
                "page": str(out / c["id"] / "card.md"),
            }
            for c in cards
        ]
        (staging / "cards.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return [out / c["id"] / "card.md" for c in cards]


def _json(x):
    if isinstance(x, np.generic):  # numpy floats, ints and bools
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def headlines(card_dir: str | Path) -> list[str]:
    """The headlines of the cards written under ``card_dir`` (``cards.json``); [] where none exists."""
    p = Path(card_dir) / "cards.json"
    if not p.is_file():
        return []
    return [c["headline"] for c in json.loads(p.read_text(encoding="utf-8"))]


def main(argv: list[str] | None = None) -> int:
    from promptlottery.errors import UserError

    ap = argparse.ArgumentParser(
        prog="python -m promptlottery.analysis.card.build", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "runs", nargs="+", help="sweep directories (paraphrases, and controls with judge.controls=true)"
    )
    ap.add_argument("--out", default=None, help="output directory (default: <first sweep dir>/card)")
    ap.add_argument("--verdict", default="argmax", choices=("argmax", "weighted"))
    ap.add_argument(
        "--n-draws", type=int, default=500, help="slices drawn per size in the coverage simulation"
    )
    ap.add_argument("--n-resamples", type=int, default=1000)
    ap.add_argument(
        "--epsilon", type=float, default=None, help="the alt-test's epsilon (default: per dataset)"
    )
    args = ap.parse_args(argv)
    for r in args.runs:
        if not Path(r).exists():
            print(f"error: no sweep directory {r}", file=__import__("sys").stderr)
            return 2
    opts = CardOptions(
        verdict=args.verdict, n_draws=args.n_draws, n_resamples=args.n_resamples, epsilon=args.epsilon
    )
    try:
        cards = build_cards(args.runs, opts)
    except UserError as exc:
        print(f"error: {exc}", file=__import__("sys").stderr)
        return 2
    out = Path(args.out) if args.out else Path(args.runs[0]) / "card"
    for page in write_cards(cards, out):
        print(page)
    for c in cards:
        print(c["headline"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
