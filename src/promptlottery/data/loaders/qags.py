"""QAGS (Wang et al., ACL 2020): factual consistency of CNN/DM and XSum summaries, MTurk votes.

``subset="cnndm"`` reads ``qags/mturk_cnndm.jsonl`` (235 summaries, 714 sentences), ``"xsum"``
``mturk_xsum.jsonl`` (239 one-sentence summaries). Each summary SENTENCE has 3 worker yes/no votes
(different workers per sentence), so there are no per-rater labels per summary. Aggregation, as
in the QAGS paper and UniEval's ``qags_*.json`` (identical values, checked in tests): a sentence is
consistent if at least 2 of its 3 workers said yes (majority), and ``human["consistent"]`` is the
fraction of the summary's sentences that are consistent (0-1; XSum: 0 or 1). ``human_kind="mean"``.
The per-sentence votes are in ``meta["sentences"]``; ``meta["vote_share"]`` is the plain fraction of
yes votes over all the summary's votes.

Inputs: ``source`` and ``evidence`` = the article, ``response`` = the summary (sentences joined by a
space), ``context`` = "". No reference summary or system id (single system: ``system=None``).
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, iter_jsonl
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

VOTES = {"yes": 1, "no": 0}


@register_loader("qags")
def load_qags(data_dir: Path, *, subset: str = "cnndm") -> list[Item]:
    if subset not in ("cnndm", "xsum"):
        raise DatasetError(f"qags: unknown subset {subset!r}; valid: 'cnndm', 'xsum'")
    path = Path(data_dir) / "qags" / f"mturk_{subset}.jsonl"
    items = []
    for lineno, row in iter_jsonl(path, "qags"):
        where = f"{path}:{lineno}"
        article = field(row, "article", where)
        sentences = field(row, "summary_sentences", where, list)
        if not sentences:
            raise DatasetError(f"{where}: summary_sentences is empty")
        texts, per_sentence, consistent, n_yes, n_votes = [], [], 0, 0, 0
        for s, sent in enumerate(sentences):
            swhere = f"{where} sentence {s}"
            responses = field(sent, "responses", swhere, list)
            if not responses:
                raise DatasetError(f"{swhere}: no worker responses")
            votes = []
            for r in responses:
                v = field(r, "response", swhere)
                if v not in VOTES:
                    raise DatasetError(f"{swhere}: response {v!r} is not 'yes' or 'no'")
                votes.append(VOTES[v])
            texts.append(field(sent, "sentence", swhere).strip())
            per_sentence.append(votes)
            consistent += sum(votes) * 2 > len(votes)
            n_yes += sum(votes)
            n_votes += len(votes)
        items.append(
            Item(
                id=f"qags-{subset}-{lineno}",
                dataset="qags",
                system=None,
                inputs={"source": article, "evidence": article, "response": " ".join(texts), "context": ""},
                human={"consistent": consistent / len(sentences)},
                human_kind="mean",
                meta={
                    "subset": subset,
                    "line": lineno,
                    "sentences": per_sentence,
                    "vote_share": n_yes / n_votes,
                },
            )
        )
    return items
