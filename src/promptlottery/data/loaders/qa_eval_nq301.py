"""NQ-301 (Kamalloo et al., ACL 2023): 1490 human-judged answers to 301 NQ-open questions.

File ``qa_eval_nq301/NQ301_human.tsv`` (id, Question, Model answer, Acceptable?, annotator1..3):
one row per DISTINCT answer to a question (answers from the 12 systems are pooled and
de-duplicated by the authors). ``human["correct"]`` is the list of the annotators' Yes=1 / No=0
(2 values, a third where annotator3 broke a tie; ``human_kind="per_rater"``); the released final
label ``Acceptable?`` (= the majority) is ``meta["acceptable"]``.

Gold answers (``reference``, joined with " | ") come from ``model_outputs/*.jsonl`` by question
text. The human file names no system: ``meta["systems"]`` lists the systems whose prediction in
``model_outputs`` equals the answer (NFKC, case and whitespace folded) and ``system`` is set only
when exactly one system produced it (about 875 answers; ~500 are shared by several systems and
~115 match no released output, e.g. lower-cased variants).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from promptlottery.data.loaders._io import field, iter_jsonl, iter_tsv_lines, require_file
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

COLUMNS = ("id", "Question", "Model answer", "Acceptable?", "annotator1", "annotator2", "annotator3")
LABELS = {"Yes": 1.0, "No": 0.0}


def _norm(s: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", s).lower().split())


def _model_outputs(folder: Path) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[str]]]:
    """system -> question -> predictions; question -> gold answers."""
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise DatasetError(f"qa_eval_nq301: no model output files in {folder}")
    # NQ301_<sys>.jsonl and NQ_<sys>.jsonl hold the same predictions for the 301 questions: keep one
    chosen: dict[str, Path] = {}
    for f in files:
        prefix, _, system = f.stem.partition("_")
        if prefix == "NQ301" or system not in chosen:
            chosen[system] = f
    preds: dict[str, dict[str, list[str]]] = {}
    gold: dict[str, list[str]] = {}
    for system, f in sorted(chosen.items()):
        d = preds.setdefault(system, {})
        for lineno, row in iter_jsonl(f, "qa_eval_nq301"):
            where = f"{f}:{lineno}"
            q = field(row, "question", where)
            p = field(row, "prediction", where, (str, list))
            d[q] = [p] if isinstance(p, str) else [str(x) for x in p]
            gold.setdefault(q, [str(a) for a in field(row, "answer", where, list)])
    return preds, gold


@register_loader("qa_eval_nq301")
def load_nq301(data_dir: Path) -> list[Item]:
    folder = Path(data_dir) / "qa_eval_nq301"
    path = require_file(folder / "NQ301_human.tsv", "qa_eval_nq301")
    preds, gold = _model_outputs(folder / "model_outputs")
    items = []
    for lineno, row in iter_tsv_lines(path, "qa_eval_nq301", COLUMNS):
        where = f"{path}:{lineno}"
        qid, question, answer = row["id"], row["Question"], row["Model answer"]
        if not qid.strip() or not question.strip():
            raise DatasetError(f"{where}: empty id or question")
        if row["Acceptable?"] not in LABELS:
            raise DatasetError(f"{where}: Acceptable? is {row['Acceptable?']!r}, expected Yes or No")
        votes = []
        for col in COLUMNS[4:]:
            v = row[col].strip()
            if v:
                if v not in LABELS:
                    raise DatasetError(f"{where}: {col} is {v!r}, expected Yes, No or empty")
                votes.append(LABELS[v])
        if not votes:
            raise DatasetError(f"{where}: no annotator label")
        if question not in gold:
            raise DatasetError(f"{where}: question {question!r} has no gold answers in model_outputs/")
        na = _norm(answer)
        systems = sorted(s for s, d in preds.items() if any(_norm(p) == na for p in d.get(question, [])))
        items.append(
            Item(
                id=f"nq301-{qid}-{lineno}",
                dataset="qa_eval_nq301",
                system=systems[0] if len(systems) == 1 else None,
                inputs={"question": question, "reference": " | ".join(gold[question]), "response": answer},
                human={"correct": votes},
                human_kind="per_rater",
                meta={
                    "question_id": qid,
                    "acceptable": LABELS[row["Acceptable?"]],
                    "systems": systems,
                    "line": lineno,
                },
            )
        )
    return items
