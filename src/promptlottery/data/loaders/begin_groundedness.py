"""BEGIN (Dziri et al., TACL 2022): is a knowledge-grounded dialogue response attributable to the knowledge?

TSV files (header ``model_name, data_source, knowledge, message, response, begin_label``), one per
sub-folder and split: ``wow`` (dev 430 + test 3607), ``topicalchat`` (dev 383), ``cmu-dog`` (dev
416); 4836 in all (the topicalchat / cmu-dog test files are not in the data folder).

``subset`` picks a sub-folder (``wow``, ``topicalchat``, ``cmu-dog``; ``None``/``"all"`` = all),
``split`` picks ``dev`` or ``test`` (``None`` = every split present).
``human["attributable"]`` = 1 for "Fully attributable", 0 for "Not fully attributable" and for
"Generic" (``human_kind="single"``); the 3-way label is ``meta["begin_label"]``.

Inputs: ``evidence`` = the knowledge snippet, ``response`` = the generated response, ``context`` =
the previous turn ("Speaker A: <message>"; the response is Speaker B's), ``knowledge`` = the snippet
too (for dialogue-quality templates). ``system`` = the generating model (gpt2, t5, ctrl, doha).
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import RESPONSE_SPEAKER, iter_tsv_lines, render_turns
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

COLUMNS = ("model_name", "data_source", "knowledge", "message", "response", "begin_label")
FILES = {
    "wow": {"dev": "wow/begin_dev_wow.tsv", "test": "wow/begin_test_wow.tsv"},
    "topicalchat": {"dev": "topicalchat/begin_dev_tc.tsv"},
    "cmu-dog": {"dev": "cmu-dog/begin_dev_cmu.tsv"},
}
LABELS = {"Fully attributable": 1.0, "Not fully attributable": 0.0, "Generic": 0.0}


@register_loader("begin_groundedness")
def load_begin(data_dir: Path, *, subset: str | None = None, split: str | None = None) -> list[Item]:
    if subset in (None, "all"):
        subsets = list(FILES)
    elif subset in FILES:
        subsets = [subset]
    else:
        raise DatasetError(f"begin_groundedness: unknown subset {subset!r}; valid: {sorted(FILES)} or 'all'")
    if split not in (None, "dev", "test"):
        raise DatasetError(f"begin_groundedness: unknown split {split!r}; valid: 'dev', 'test'")
    items = []
    for sub in subsets:
        for sp, rel in FILES[sub].items():
            if split is not None and sp != split:
                continue
            path = Path(data_dir) / "begin_groundedness" / rel
            for lineno, row in iter_tsv_lines(path, "begin_groundedness", COLUMNS):
                where = f"{path}:{lineno}"
                label = row["begin_label"].strip()
                if label not in LABELS:
                    raise DatasetError(f"{where}: begin_label {label!r} is not one of {list(LABELS)}")
                for col in ("knowledge", "response", "model_name"):
                    if not row[col].strip():
                        raise DatasetError(f"{where}: empty {col}")
                items.append(
                    Item(
                        id=f"begin-{sub}-{sp}-{lineno}",
                        dataset="begin_groundedness",
                        system=row["model_name"].strip(),
                        inputs={
                            "evidence": row["knowledge"].strip(),
                            "knowledge": row["knowledge"].strip(),
                            "response": row["response"].strip(),
                            "context": render_turns([row["message"].strip()])
                            if row["message"].strip()
                            else "",
                        },
                        human={"attributable": LABELS[label]},
                        human_kind="single",
                        meta={
                            "begin_label": label,
                            "subset": sub,
                            "split": sp,
                            "data_source": row["data_source"],
                            "line": lineno,
                            "response_speaker": RESPONSE_SPEAKER,
                        },
                    )
                )
    if split is not None and not items:
        raise DatasetError(f"begin_groundedness: subset {subset!r} has no {split!r} split here")
    return items
