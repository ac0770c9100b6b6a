"""FED (Mehri & Eskenazi, SIGDIAL 2020): 375 turn-level and 125 dialogue-level items, 5 raters each.

File ``fed/fed_data.json``: a JSON list; turn-level entries have ``response``, dialogue-level ones
do not. ``level="turn"`` criteria: interesting, engaging, specific, relevant, correct,
semantically_appropriate, understandable, fluent, overall; ``level="dialogue"``: coherent,
error_recovery, consistent, diverse, depth, likeable, understanding, flexible, informative,
inquisitive, overall. Scales as released: understandable and consistent 0-1, overall 0-4, all
others 0-2 (higher is better). ``human`` holds the 5 per-rater values; a rater's free-text
"N/A (...)" answer becomes ``None`` in the list (``Item.human_score`` skips it) and the text is
kept in ``meta["na_answers"]``.

Inputs: ``context`` = the conversation with the file's own speaker names ("User:" / "System:", one
turn per line); turn level: ``response`` = the judged System turn without its "System: " prefix;
dialogue level: the whole dialogue is judged, so ``context`` and ``conversation`` hold it and
``response`` is "". ``knowledge`` is "" (FED has none). ``system`` = Meena, Mitsuku or Human.
Item ids are ``fed-turn-<i>`` / ``fed-dialogue-<i>`` with ``i`` the index in the JSON list.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, load_json_list, number, snake
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

TURN = {
    "Interesting": 2, "Engaging": 2, "Specific": 2, "Relevant": 2, "Correct": 2,
    "Semantically appropriate": 2, "Understandable": 1, "Fluent": 2, "Overall": 4,
}  # fmt: skip
DIALOGUE = {
    "Coherent": 2, "Error recovery": 2, "Consistent": 1, "Diverse": 2, "Depth": 2, "Likeable": 2,
    "Understanding": 2, "Flexible": 2, "Informative": 2, "Inquisitive": 2, "Overall": 4,
}  # fmt: skip
N_RATERS = 5


@register_loader("fed")
def load_fed(data_dir: Path, *, level: str = "turn") -> list[Item]:
    if level not in ("turn", "dialogue"):
        raise DatasetError(f"fed: unknown level {level!r}; valid: 'turn', 'dialogue'")
    path = Path(data_dir) / "fed" / "fed_data.json"
    items = []
    for i, row in enumerate(load_json_list(path, "fed")):
        where = f"{path}[{i}]"
        context = field(row, "context", where)
        is_turn = "response" in row
        if is_turn != (level == "turn"):
            continue
        scales = TURN if is_turn else DIALOGUE
        ann = field(row, "annotations", where, dict)
        unknown = sorted(set(ann) - set(scales))
        if unknown:
            raise DatasetError(f"{where}: unknown {level}-level criteria {unknown}")
        human: dict[str, list] = {}
        na: dict[str, list[str]] = {}
        for key, hi in scales.items():
            values = field(ann, key, where, list)
            if len(values) != N_RATERS:
                raise DatasetError(f"{where}: {key} has {len(values)} ratings, expected {N_RATERS}")
            out = []
            for v in values:
                if isinstance(v, str) and v.startswith("N/A"):
                    out.append(None)
                    na.setdefault(snake(key), []).append(v)
                else:
                    out.append(number(v, where, key, 0.0, float(hi)))
            human[snake(key)] = out
        if is_turn:
            response = field(row, "response", where)
            speaker, sep, text = response.partition(": ")
            if not sep or speaker not in ("System", "User"):
                speaker, text = "", response
            inputs = {"context": context, "response": text.strip(), "knowledge": ""}
        else:
            speaker = ""
            inputs = {"context": context, "conversation": context, "response": "", "knowledge": ""}
        items.append(
            Item(
                id=f"fed-{level}-{i}",
                dataset="fed",
                system=field(row, "system", where),
                inputs=inputs,
                human=human,
                human_kind="per_rater",
                meta={"level": level, "index": i, "response_speaker": speaker, "na_answers": na},
            )
        )
    return items
