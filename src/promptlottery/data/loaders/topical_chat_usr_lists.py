"""USR Topical-Chat as lists: one item per dialogue context with k of its responses, for a listwise judge.

The USR file (:mod:`.topical_chat_usr`) has 60 Topical-Chat contexts, each with 6 responses (one
per system), each scored by 3 annotators. This loader makes one item per context with the
responses of ``systems`` (default: the first three of the file, "Original Ground Truth",
"Argmax Decoding", "Nucleus Decoding (p = 0.3)"), in that order as ``response_1`` ...
``response_k``. ``human[criterion]`` is the list of the k responses' mean annotator scores
(``human_kind="per_response"``); ``meta["systems"]`` names the k systems. The dialogue history is
cut to its last ``turns`` turns (default 4) and the knowledge fact is left out, so that a prompt
stays short for a CPU judge.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders.topical_chat_usr import FILES, load_usr
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

SYSTEMS = ("Original Ground Truth", "Argmax Decoding", "Nucleus Decoding (p = 0.3)")


@register_loader("topical_chat_usr_lists")
def load_usr_lists(
    data_dir: Path, *, subset: str = "tc", systems: tuple[str, ...] | list[str] = SYSTEMS, turns: int = 4
) -> list[Item]:
    path = _checked_path(data_dir, subset)
    systems = _checked_options(path, systems, turns)
    by_context: dict[int, dict[str, Item]] = {}
    for it in load_usr(data_dir, subset=subset):
        by_context.setdefault(it.meta["context_index"], {})[it.system] = it
    known = sorted({s for row in by_context.values() for s in row})
    unknown = [s for s in systems if s not in known]
    if unknown:
        raise DatasetError(
            f"{path}: dataset.options.systems names {unknown}, which no response of the file has; "
            f"its systems: {known}"
        )
    for ci, row in sorted(by_context.items()):
        missing = [s for s in systems if s not in row]
        if missing:
            raise DatasetError(
                f"{path}[{ci}]: context {ci} has no response of {missing} (dataset.options.systems); "
                f"its systems: {sorted(row)}"
            )
    items = []
    for ci, row in sorted(by_context.items()):
        chosen = [row[s] for s in systems]
        first = chosen[0]
        context = "\n".join(first.inputs["context"].split("\n")[-turns:])
        items.append(
            Item(
                id=f"usr-{subset}-c{ci}-k{len(systems)}",
                dataset="topical_chat_usr_lists",
                inputs={
                    "context": context,
                    **{f"response_{i}": it.inputs["response"] for i, it in enumerate(chosen, start=1)},
                },
                human={crit: [it.human_score(crit) for it in chosen] for crit in first.human},
                human_kind="per_response",
                meta={"subset": subset, "context_index": ci, "systems": list(systems)},
            )
        )
    return items


def _checked_path(data_dir: Path, subset: str) -> Path:
    """The USR file of ``subset``; an unknown subset is one line naming the option and the folder."""
    if subset not in FILES:
        raise DatasetError(
            f"{Path(data_dir) / 'topical_chat_usr'}: dataset.options.subset={subset!r} is not a USR subset; "
            f"valid: {sorted(FILES)}"
        )
    return Path(data_dir) / "topical_chat_usr" / FILES[subset]


def _checked_options(path: Path, systems, turns) -> tuple[str, ...]:
    """``systems`` as a tuple, checked with ``turns`` before the file is read: each error one line
    naming the file and the option."""
    try:
        names = () if isinstance(systems, str) else tuple(str(s) for s in systems)
    except TypeError:  # not a list
        names = ()
    if len(names) < 3 or len(set(names)) != len(names):
        raise DatasetError(
            f"{path}: dataset.options.systems={systems!r} must list 3 or more distinct systems of the file"
        )
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise DatasetError(
            f"{path}: dataset.options.turns={turns!r} must be a positive integer (the dialogue turns kept)"
        )
    return names
