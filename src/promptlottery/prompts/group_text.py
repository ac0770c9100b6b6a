"""A prompt group written back as a group file, and the item variables its templates name."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from jinja2 import meta

from promptlottery.prompts.groups import FROM_ITEM
from promptlottery.prompts.rendering import TEMPLATE_ENV, PromptError

if TYPE_CHECKING:
    from promptlottery.prompts.groups import PromptGroup


def dump_group(group: PromptGroup, path: str | Path, variant_extra: dict | None = None, **extra) -> Path:
    """Write ``group`` in the group-file schema (``extra`` keys are added at the top level,
    ``variant_extra[vid]`` keys to a variant; the loader ignores both)."""
    variants = {}
    for vid, v in group.variants.items():
        variants[vid] = {
            k: val for k, val in (("tags", v.tags), ("system", v.system), ("user", v.user)) if val
        }
        variants[vid].update((variant_extra or {}).get(vid, {}))
    raw = {
        "id": group.id,
        "judge_family": group.judge_family,
        "scale": group.scale.name,
        "version": group.version,
        "description": group.description,
        **({"family_type": group.family_type} if group.family_type != "other" else {}),
        **({"assistant_prefix": group.assistant_prefix} if group.assistant_prefix else {}),
        **({"criteria": _dump_criteria(group)} if group.criteria else {}),
        **({"criteria": FROM_ITEM} if group.criteria_from_item else {}),
        **({"criteria_call": group.criteria_call} if group.criteria_call != "separate" else {}),
        **({"completion_answer": group.completion_answer} if group.completion_answer != "Answer:" else {}),
        **extra,
        "variants": variants,
        **({"controls": _dump_controls(group)} if group.controls else {}),
    }
    path = Path(path)
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")
    return path


def _dump_controls(group: PromptGroup) -> dict:
    return {
        cid: {
            "base": v.base,
            "direction": v.control,
            **({"system": v.system} if v.system else {}),
            "user": v.user,
        }
        for cid, v in group.controls.items()
    }


def _dump_criteria(group: PromptGroup) -> dict:
    """The ``criteria:`` mapping as written: a plain description, or a mapping where an entry has more."""
    info = group.criteria_info
    return {c: {"description": d, **info[c]} if c in info else d for c, d in group.criteria}


def text_variables(template: str) -> set[str]:
    """The variables one template references (raises TemplateSyntaxError on a malformed one)."""
    return meta.find_undeclared_variables(TEMPLATE_ENV.parse(template))


def template_variables(group: PromptGroup, variant_id: str | None = None) -> set[str]:
    """The variables the group's templates (or one variant's) reference."""
    names: set[str] = set()
    for vid, v in {**group.variants, **group.controls}.items():
        if variant_id is None or vid == variant_id:
            for t in (v.user, v.system or ""):
                names |= text_variables(t)
    return names


def check_variables(group: PromptGroup, available: set[str], *, where: str) -> None:
    """Raise before any model call when a template names a variable the items do not provide."""
    for vid in (*group.variants, *group.controls):
        if not template_variables(
            group, vid
        ):  # one identical prompt for every item (a path given as a template?)
            raise PromptError(
                f"{where} variant {vid}: the template uses no item variable, so every item gets the same "
                f"prompt; name at least one of {sorted(available)} ({{{{ response }}}})"
            )
        unknown = sorted(template_variables(group, vid) - set(available))
        if unknown:
            raise PromptError(
                f"{where} variant {vid}: unknown template variable(s) {unknown}; the items provide "
                f"{sorted(available)}"
            )
