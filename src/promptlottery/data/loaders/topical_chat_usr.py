"""USR annotations (Mehri & Eskenazi, ACL 2020): Topical-Chat and PersonaChat responses, per annotator.

``subset="tc"`` reads ``topical_chat_usr/tc_usr_data.json`` (60 contexts x 6 responses = 360);
``subset="pc"`` reads ``pc_usr_data.json`` (60 x 5 = 300). Each response has 3 per-annotator
scores per criterion (``human_kind="per_rater"``):

=================  =================  =====
USR name           criterion here     range
=================  =================  =====
Understandable     understandable     0-1
Natural            natural            1-3
Maintains Context  maintains_context  1-3
Engaging           engaging           1-3  (the USR paper calls it "Interesting"; UniEval "engagingness")
Uses Knowledge     uses_knowledge     0-1
Overall            overall            1-5
=================  =================  =====

Inputs: ``context`` = the dialogue history, one turn per line; the file has no speaker names, so
turns are labelled "Speaker A"/"Speaker B" alternating such that the judged response is always
Speaker B's (``meta["response_speaker"]``). ``knowledge`` = the fact (Topical-Chat) or the persona
(PersonaChat). ``system`` = the response's model ("Original Ground Truth", "Argmax Decoding", ...).
The means of these per-annotator scores equal UniEval's ``topical_chat.json`` (checked in tests).
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import (
    RESPONSE_SPEAKER,
    field,
    load_json_list,
    numbers,
    render_turns,
)
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

FILES = {"tc": "tc_usr_data.json", "pc": "pc_usr_data.json"}
#: USR field -> (criterion, lo, hi)
CRITERIA = {
    "Understandable": ("understandable", 0.0, 1.0),
    "Natural": ("natural", 1.0, 3.0),
    "Maintains Context": ("maintains_context", 1.0, 3.0),
    "Engaging": ("engaging", 1.0, 3.0),
    "Uses Knowledge": ("uses_knowledge", 0.0, 1.0),
    "Overall": ("overall", 1.0, 5.0),
}


@register_loader("topical_chat_usr")
def load_usr(data_dir: Path, *, subset: str = "tc") -> list[Item]:
    if subset not in FILES:
        raise DatasetError(f"topical_chat_usr: unknown subset {subset!r}; valid: {sorted(FILES)}")
    path = Path(data_dir) / "topical_chat_usr" / FILES[subset]
    items = []
    for ci, ctx in enumerate(load_json_list(path, "topical_chat_usr")):
        where = f"{path}[{ci}]"
        turns = [t.strip() for t in field(ctx, "context", where).split("\n") if t.strip()]
        knowledge = field(ctx, "fact", where).strip()
        annotators = field(ctx, "annotators", where, list)
        for ri, resp in enumerate(field(ctx, "responses", where, list)):
            rwhere = f"{where}[responses][{ri}]"
            human = {
                name: numbers(field(resp, key, rwhere, None), rwhere, key, lo, hi, n=len(annotators))
                for key, (name, lo, hi) in CRITERIA.items()
            }
            items.append(
                Item(
                    id=f"usr-{subset}-c{ci}-r{ri}",
                    dataset="topical_chat_usr",
                    system=field(resp, "model", rwhere),
                    inputs={
                        "context": render_turns(turns),
                        "response": field(resp, "response", rwhere).strip(),
                        "knowledge": knowledge,
                    },
                    human=human,
                    human_kind="per_rater",
                    meta={
                        "subset": subset,
                        "context_index": ci,
                        "group": f"{subset}-c{ci}",  # the context: dataset.sample_by=group keeps its systems
                        "annotators": list(annotators),
                        "response_speaker": RESPONSE_SPEAKER,
                    },
                )
            )
    return items
