"""Prompt groups: an original prompt P1 and its paraphrases, stored as YAML data files.

A group file (``prompts/groups/G<n>.yaml``) holds the judge family, the scale, a text
``version`` (bumped whenever any wording changes, so cached judgments are invalidated), and
``variants``: each with a ``user`` template, an optional ``system`` template and seven wording
tags. Templates are Jinja2 rendered in a sandbox with StrictUndefined: an item's text is data,
never code.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path

import yaml
from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

from promptlottery.prompts.scales import Scale, get_scale

WORDING_DIMENSIONS = (
    "role_framing",
    "syntax",
    "criteria_layout",
    "length",
    "verb_choice",
    "brevity",
    "format_strictness",
)
GROUPS_DIR = Path(str(files("promptlottery.prompts").joinpath("groups")))
_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)


class PromptError(ValueError):
    """A prompt group file is malformed or a template cannot be rendered for an item."""


@dataclass(frozen=True)
class Variant:
    id: str
    user: str
    system: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PromptGroup:
    id: str
    judge_family: str
    scale: Scale
    version: int
    variants: dict[str, Variant]
    description: str = ""
    held_out: bool = False

    def variant(self, variant_id: str) -> Variant:
        if variant_id not in self.variants:
            raise PromptError(
                f"prompt group {self.id}: no variant {variant_id!r}; valid: {sorted(self.variants)}"
            )
        return self.variants[variant_id]

    def text_hash(self, variant_id: str) -> str:
        v = self.variant(variant_id)
        return hashlib.sha256(f"{v.system or ''}\0{v.user}".encode()).hexdigest()[:16]


def render(template: str, variables: dict[str, str], *, where: str) -> str:
    try:
        return _ENV.from_string(template).render(**variables).strip()
    except UndefinedError as e:
        raise PromptError(f"{where}: template placeholder missing from the item: {e.message}") from None
    except TemplateSyntaxError as e:
        raise PromptError(f"{where}: template syntax error at line {e.lineno}: {e.message}") from None


@cache
def load_group(group_id: str, groups_dir: str | None = None) -> PromptGroup:
    path = Path(groups_dir or GROUPS_DIR) / f"{group_id}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in Path(groups_dir or GROUPS_DIR).glob("*.yaml"))
        raise PromptError(f"prompt group {group_id!r} not found at {path}; known: {known}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        variants = {
            vid: Variant(id=vid, user=v["user"], system=v.get("system"), tags=dict(v.get("tags", {})))
            for vid, v in raw["variants"].items()
        }
        group = PromptGroup(
            id=raw["id"],
            judge_family=raw["judge_family"],
            scale=get_scale(raw["scale"]),
            version=int(raw["version"]),
            variants=variants,
            description=raw.get("description", ""),
            held_out=bool(raw.get("held_out", False)),
        )
    except (KeyError, TypeError, yaml.YAMLError) as e:
        raise PromptError(f"{path}: malformed prompt group ({type(e).__name__}: {e})") from None
    if group.id != group_id:
        raise PromptError(f"{path}: id {group.id!r} does not match file name")
    for v in variants.values():
        for t in (v.user, v.system or ""):
            try:
                _ENV.parse(t)
            except TemplateSyntaxError as e:
                raise PromptError(f"{path}: variant {v.id} line {e.lineno}: {e.message}") from None
    return group


def list_groups(groups_dir: str | None = None) -> list[str]:
    return sorted((p.stem for p in Path(groups_dir or GROUPS_DIR).glob("G*.yaml")), key=lambda s: int(s[1:]))
