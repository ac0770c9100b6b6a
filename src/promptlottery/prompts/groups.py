"""Prompt groups: an original prompt P1 and its paraphrases, stored as YAML data files.

A group file (``prompts/groups/G<n>.yaml``) holds the judge family and its task type
(``family_type``: objective or subjective, as the paper sorts families), the scale, a text
``version`` (bumped whenever any wording changes, so cached judgments are invalidated), and
``variants``: each with a ``user`` template, an optional ``system`` template and seven wording
tags. Templates are Jinja2 rendered in a sandbox with StrictUndefined: an item's text is data,
never code.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path

import yaml
from jinja2 import TemplateSyntaxError

from promptlottery.data.schema import Item
from promptlottery.prompts.rendering import TEMPLATE_ENV, PromptError, check_template, render  # noqa: F401 - render: its home for importers
from promptlottery.prompts.scales import SCALES, Scale, get_scale
from promptlottery.tracking.jobdir import PathIdError, check_path_id

WORDING_DIMENSIONS = (
    "role_framing",
    "syntax",
    "criteria_layout",
    "length",
    "verb_choice",
    "brevity",
    "format_strictness",
)
#: a judge family's task type, as the paper sorts them (``family_type:`` in a group file; "other"
#: where a group file declares none)
FAMILY_TYPES = ("objective", "subjective")
GROUPS_DIR = Path(str(files("promptlottery.prompts").joinpath("groups")))


@dataclass(frozen=True)
class Variant:
    id: str
    user: str
    system: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    #: a control variant (``controls:`` in a group file): the direction its rewrite must move the
    #: verdict (CONTROL_DIRECTIONS) and the paraphrase it rewrites; None for a paraphrase
    control: str | None = None
    base: str | None = None


@dataclass(frozen=True)
class PromptGroup:
    id: str
    judge_family: str
    scale: Scale
    version: int
    variants: dict[str, Variant]
    description: str = ""
    held_out: bool = False
    family_type: str = "other"
    #: chat requests start the assistant turn with this text and the label is read right after it
    #: (``"[["`` for the ``[[A]]`` answer format of a pairwise group); None: the first answer token
    assistant_prefix: str | None = None
    #: an analytic rubric's criteria, ``((criterion, description), ...)`` in order: each judged in a
    #: call of its own (``judge.mode=analytic``), the template naming ``{{ criterion }}`` and
    #: ``{{ criterion_description }}``; empty for a group that judges the item whole
    criteria: tuple[tuple[str, str], ...] = ()
    #: per criterion, what a criterion entry gives besides its description: ``name`` (how the
    #: prompt and a batch reply name it, ``{{ criterion_name }}``; default: the criterion),
    #: ``context`` (an edited rubric's added context, ``{{ criterion_context }}``) and ``examples``
    #: (solved examples shown for it, ``{{ criterion_examples }}``)
    criteria_info: dict[str, dict[str, str]] = field(default_factory=dict)
    #: how an analytic group's criteria are asked: ``separate`` (a call per criterion) or ``batch``
    #: (all in one reply, ``{{ criteria }}`` listing them, each scored at its own position)
    criteria_call: str = "separate"
    #: the criteria are each item's own (``criteria: from_item``; ``Item.meta["criteria"]``, a
    #: ``criteria:`` mapping as a group file writes it): a decomposed rubric whose questions differ
    #: per item (InFoBench's); ``criteria`` is then empty
    criteria_from_item: bool = False
    #: the line a completion prompt's answer follows (``"Answer:"``, then the answer prefix); None:
    #: the prompt ends with the answer prefix as its own paragraph (the rubric study's layout)
    completion_answer: str | None = "Answer:"
    #: meaning-changing control variants (docs/judge_card.md), judged only when asked
    #: (``judge.controls=true``); never among ``variants``, so a paraphrase sweep is unchanged
    controls: dict[str, Variant] = field(default_factory=dict)

    def variant(self, variant_id: str) -> Variant:
        if variant_id in self.controls:
            return self.controls[variant_id]
        if variant_id not in self.variants:
            raise PromptError(
                f"prompt group {self.id}: no variant {variant_id!r}; valid: {sorted(self.variants)}"
                + (f"; controls: {sorted(self.controls)}" if self.controls else "")
            )
        return self.variants[variant_id]

    def text_hash(self, variant_id: str) -> str:
        v = self.variant(variant_id)
        return hashlib.sha256(f"{v.system or ''}\0{v.user}".encode()).hexdigest()[:16]


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a mapping with a key twice (PyYAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            key = str(self.construct_object(key_node, deep=deep))  # 1 and "1" name one variant
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} appears twice (lines {seen[key]} and {key_node.start_mark.line + 1})",
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def check_distinct(group: PromptGroup, *, where: str) -> None:
    """Refuse two variants with the same text: a lottery over identical wordings measures nothing
    (nor does a control with a paraphrase's text)."""
    texts: dict[tuple[str, str], str] = {}
    for vid, v in {**group.variants, **group.controls}.items():
        first = texts.setdefault(((v.system or "").strip(), v.user.strip()), vid)
        if first != vid:
            raise PromptError(f"{where}: variants {first} and {vid} have the same text")


@cache
def load_group(group_id: str, groups_dir: str | None = None) -> PromptGroup:
    path = Path(groups_dir or GROUPS_DIR) / f"{group_id}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in Path(groups_dir or GROUPS_DIR).glob("*.yaml"))
        raise PromptError(f"prompt group {group_id!r} not found at {path}; known: {known}")
    group = load_group_file(path)
    if group.id != group_id:
        raise PromptError(f"{path}: id {group.id!r} does not match file name")
    return group


#: what a ``criteria:`` entry may give as a mapping (a plain entry is its description)
CRITERION_KEYS = ("description", "name", "context", "examples")
CRITERIA_CALLS = ("separate", "batch")


def parse_criteria(raw) -> tuple[tuple[tuple[str, str], ...], dict[str, dict[str, str]]]:
    """A group file's (or an item's) ``criteria:`` mapping, in order: ``((criterion, description), ...)`` and each
    mapping entry's ``name`` / ``context`` / ``examples`` (criterion: description, or criterion:
    {description:, name:, context:, examples:})."""
    if raw is None:
        return (), {}
    if not isinstance(raw, dict) or not raw:
        raise TypeError("criteria must map each criterion to its description")
    pairs, info = [], {}
    for c, entry in raw.items():
        if isinstance(entry, dict):
            unknown = sorted(set(entry) - set(CRITERION_KEYS))
            if unknown:
                raise TypeError(f"criterion {c}: unknown keys {unknown} (known: {', '.join(CRITERION_KEYS)})")
            info[str(c)] = {k: str(entry[k]) for k in CRITERION_KEYS[1:] if entry.get(k) is not None}
            entry = entry.get("description")
        pairs.append((str(c), str(entry or "")))
    return tuple(pairs), {c: v for c, v in info.items() if v}


#: ``criteria: from_item``: each item gives its own (``PromptGroup.criteria_from_item``)
FROM_ITEM = "from_item"
#: the ``Item.meta`` key of an item's own criteria (a group's ``criteria: from_item``)
ITEM_CRITERIA = "criteria"


def criteria_of(group, item: Item) -> tuple[tuple[tuple[str, str], ...], dict[str, dict[str, str]]]:
    """``(criteria, criteria_info)`` that ``item`` is judged on: the group's, or the item's own
    (``criteria: from_item``)."""
    if not group.criteria_from_item:
        return group.criteria, group.criteria_info
    raw = item.meta.get(ITEM_CRITERIA)
    if not raw:
        raise PromptError(
            f"prompt group {group.id} reads each item's criteria (criteria: from_item) but item {item.id} "
            f"names none (Item.meta[{ITEM_CRITERIA!r}])"
        )
    return parse_criteria(raw)


def _criteria_call(raw, criteria, from_item: bool = False) -> str:
    call = str(raw or "separate")
    if call not in CRITERIA_CALLS:
        raise ValueError(f"criteria_call={call!r}; valid: {', '.join(CRITERIA_CALLS)}")
    if call != "separate" and not criteria and not from_item:
        raise ValueError(f"criteria_call={call} but the group names no criteria")
    return call


def load_group_file(path: str | Path) -> PromptGroup:
    """A prompt group from a YAML file anywhere (the schema of ``prompts/groups/G*.yaml``)."""
    path = Path(path)
    if not path.is_file():
        raise PromptError(f"judge.group_file: no file at {path}")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - a safe loader
        if not isinstance(raw, dict) or not raw.get("variants"):
            raise KeyError("variants")
        variants = {str(vid): _variant(str(vid), v, path) for vid, v in raw["variants"].items()}
        from_item = raw.get("criteria") == FROM_ITEM
        criteria, info = parse_criteria(None if from_item else raw.get("criteria"))
        controls = parse_controls(raw.get("controls"), variants)
        group = PromptGroup(
            id=str(raw["id"]),
            judge_family=raw["judge_family"],
            scale=get_scale(raw["scale"]),
            version=int(raw["version"]),
            variants=variants,
            description=raw.get("description", ""),
            held_out=bool(raw.get("held_out", False)),
            family_type=str(raw.get("family_type") or "other"),
            assistant_prefix=raw.get("assistant_prefix") or None,
            criteria=criteria,
            criteria_info=info,
            criteria_call=_criteria_call(raw.get("criteria_call"), criteria, from_item),
            criteria_from_item=from_item,
            completion_answer=raw.get("completion_answer", "Answer:"),
            controls=controls,
        )
    except PromptError:
        raise
    except (KeyError, TypeError, ValueError, yaml.YAMLError) as e:
        what = " ".join(str(e).split())  # PyYAML's messages span lines
        raise PromptError(f"{path}: malformed prompt group ({type(e).__name__}: {what})") from None
    try:  # ids name job dirs and files: none may leave its directory
        for vid in (group.id, *variants, *controls):
            check_path_id(
                vid, "prompt group id" if vid == group.id else f"prompt group {group.id}: variant id"
            )
    except PathIdError as e:
        raise PromptError(f"{path}: {e}") from None
    if group.family_type not in (*FAMILY_TYPES, "other"):
        raise PromptError(f"{path}: family_type={group.family_type!r}; valid: {', '.join(FAMILY_TYPES)}")
    for v in (*variants.values(), *controls.values()):
        for t in (v.user, v.system or ""):
            try:
                TEMPLATE_ENV.parse(t)
            except TemplateSyntaxError as e:
                raise PromptError(f"{path}: variant {v.id} line {e.lineno}: {e.message}") from None
            check_template(t, where=f"{path}: variant {v.id}")
    check_distinct(group, where=str(path))
    return group


#: the directions a control variant must move the verdict (metrics.controls.DIRECTIONS)
CONTROL_DIRECTIONS = ("stricter", "more_lenient", "reversed", "criterion_dropped")


def parse_controls(raw, variants: dict[str, Variant]) -> dict[str, Variant]:
    """A group file's ``controls:`` mapping: ``id: {base: P1, direction: stricter, user: ...,
    system: ...}``, each a rewrite of paraphrase ``base`` that must move the verdict ``direction``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"controls must be a mapping of control id to its entry, got {type(raw).__name__}")
    out = {}
    for cid, c in raw.items():
        cid = str(cid)
        if cid in variants:
            raise ValueError(f"control {cid} has the id of a paraphrase variant")
        if not isinstance(c, dict) or "user" not in c:
            raise ValueError(f"control {cid} needs a mapping with base, direction and user")
        if c.get("direction") not in CONTROL_DIRECTIONS:
            raise ValueError(
                f"control {cid}: direction={c.get('direction')!r}; valid: {', '.join(CONTROL_DIRECTIONS)}"
            )
        if c.get("base") not in variants:
            raise ValueError(
                f"control {cid}: base={c.get('base')!r} is not a variant ({', '.join(variants)})"
            )
        out[cid] = Variant(
            id=cid,
            user=c["user"],
            system=c.get("system"),
            tags=dict(c.get("tags") or {}),
            control=c["direction"],
            base=str(c["base"]),
        )
    return out


def _variant(vid: str, v, path: Path) -> Variant:
    """One variant of a group file; ``user:`` (and ``system:``) must be strings: one line naming both."""
    if not isinstance(v, dict) or "user" not in v:
        raise PromptError(
            f"{path}: variant {vid}: needs a `user:` template (got {type(v).__name__} {v!r:.60})"
        )
    for key in ("user", "system"):
        value = v.get(key)
        if value is not None and not isinstance(value, str):
            raise PromptError(
                f"{path}: variant {vid}: `{key}:` must be a string (a template), got {type(value).__name__} "
                f"{value!r:.60}; quote it or write it as a block (`{key}: |`)"
            )
    return Variant(id=vid, user=v["user"], system=v.get("system"), tags=dict(v.get("tags") or {}))


@cache
def builtin_family_types(groups_dir: str | None = None) -> dict[str, str]:
    """``{judge_family: family_type}`` as the built-in group files declare it, in group order (G1, G2,
    ..., G10); a family declared with two types is a PromptError naming the file."""
    out: dict[str, str] = {}
    paths = Path(groups_dir or GROUPS_DIR).glob("G*.yaml")
    for path in sorted(
        paths, key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.stem)]
    ):
        group = load_group_file(path)
        declared = out.setdefault(group.judge_family, group.family_type)
        if declared != group.family_type:
            raise PromptError(
                f"{path}: judge_family {group.judge_family} has family_type={group.family_type}, "
                f"another group declares {declared}"
            )
    return out


def group_from_template(path: str | Path, scale: str, *, judge_family: str = "custom") -> PromptGroup:
    """A one-variant group (``P1``) from a single Jinja2 template file and a scale name.

    The group id is the file's stem and its ``version`` a hash of the text, so editing the file
    invalidates cached judgments.
    """
    path = Path(path)
    if not path.is_file():
        raise PromptError(f"judge.template: no file at {path}")
    text = path.read_text(encoding="utf-8")
    check_template(text, where=str(path))
    try:
        TEMPLATE_ENV.parse(text)
        sc = get_scale(scale)
    except TemplateSyntaxError as e:
        raise PromptError(f"{path}: template syntax error at line {e.lineno}: {e.message}") from None
    except ValueError as e:
        raise PromptError(f"judge.scale: {e}") from None
    version = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return PromptGroup(
        id=path.stem,
        judge_family=judge_family,
        scale=sc,
        version=version,
        variants={"P1": Variant("P1", text)},
    )


def own_default_group(judge, default_group: str | None) -> bool:
    """``+experiment=own_judge`` without a group file or template, in a judge mode with a built-in
    group (``default_group``: ``JudgeMode.default_group``, e.g. G17): that group is judged."""
    return bool(
        default_group
        and judge.get("prompt_group") == "own"
        and not judge.get("group_file")
        and not judge.get("template")
    )


def resolve_group(judge, default_group: str | None = None) -> PromptGroup:
    """The judge config's prompt group: ``judge.group_file``, ``judge.template`` (+ ``judge.scale``) or
    ``judge.prompt_group`` (a built-in group id), in that order; your own judge without either file:
    its mode's built-in group ``default_group`` (``promptlottery.modes.default_group``) where it has one."""
    if own_default_group(judge, default_group):
        return load_group(default_group)
    group_file, template = judge.get("group_file"), judge.get("template")
    if group_file and template:
        raise PromptError("give judge.group_file or judge.template, not both")
    if group_file:
        return load_group_file(group_file)
    if template:
        if not judge.get("scale"):
            raise PromptError(f"judge.template={template} needs judge.scale=<one of {sorted(SCALES)}>")
        return group_from_template(template, judge.get("scale"), judge_family=judge.get("family") or "custom")
    return load_group(judge.prompt_group)


def list_groups(groups_dir: str | None = None) -> list[str]:
    return sorted((p.stem for p in Path(groups_dir or GROUPS_DIR).glob("G*.yaml")), key=lambda s: int(s[1:]))
