"""Many wordings without a paraphraser: a group's instructions crossed with its answer formats.

A group of K wordings splits (:func:`promptlottery.prompts.template_parts.split_template`) into its
instruction text (with the system prompt and the layout) and its answer-format sentence (the last
sentence naming a scale label). Crossing them gives K x K wordings: ``PaFb`` is variant ``Pa`` with
the answer-format sentence of ``Pb``; the diagonal keeps the original ids (``P1`` ... ``PK``), so a
reference wording stays what it was. No model is called, so the wordings are as cheap as they are
limited: each one is a combination of sentences a person wrote, not a new paraphrase (the lexical
overlap with P1 is high by construction, so the paraphrase generator's overlap check (c) does not
apply; checks (a) variables and (b) scale do, and the similarity to P1 is recorded).

The tags of ``PaFb`` are those of ``Pa`` with ``format_strictness`` of ``Pb``, plus ``instruction``
(``Pa``) and ``format`` (``Pb``): the wording covariates of :mod:`promptlottery.analysis.budget.wording_model`.

``roles=True`` adds a third factor, the role line (the paper's role framing): every crossed wording whose
instruction has a system prompt also appears without it (``PaFbN``, tag ``role_framing: none``,
``role: dropped``; every other wording's ``role`` tag is ``kept``). G12 has one such instruction (P2),
so its crossed group grows from 25 to 30 wordings.
"""

from __future__ import annotations

from promptlottery.prompts.groups import PromptError, PromptGroup, Variant
from promptlottery.prompts.paraphrase_checks import check_same_variables, check_scale
from promptlottery.prompts.template_parts import FORMAT, split_template

__all__ = ["crossed_group"]


def _format_part(group: PromptGroup, vid: str) -> tuple[list, int]:
    parts = split_template(group.variants[vid].user, group.scale, where=f"{group.id} {vid}")
    where = [k for k, p in enumerate(parts) if p.kind == FORMAT]
    if not where:
        raise PromptError(f"prompt group {group.id} variant {vid}: no answer-format sentence to cross")
    return parts, where[-1]


def crossed_group(
    group: PromptGroup, *, group_id: str | None = None, roles: bool = False
) -> tuple[PromptGroup, dict]:
    """The K x K crossed group of ``group`` (with ``roles``: and each wording with a system prompt
    again without it) and, per new variant, its checks (a) and (b) against P-ref.

    Raises :class:`PromptError` naming the variant when a variant has no answer-format sentence or a
    crossed wording loses a variable or a scale label (a crossed group is never silently short).
    """
    ids = list(group.variants)
    split = {vid: _format_part(group, vid) for vid in ids}
    ref = group.variants[ids[0]].user
    variants, checks = {}, {}
    for a in ids:
        parts, k = split[a]
        for b in ids:
            fmt = split[b][0][split[b][1]].text
            user = "".join(fmt if j == k else p.text for j, p in enumerate(parts))
            new_id = a if a == b else f"{a}F{b[1:] if b.startswith('P') else b}"
            src = group.variants[a]
            tags = {**src.tags, "instruction": a, "format": b}
            if "format_strictness" in group.variants[b].tags:
                tags["format_strictness"] = group.variants[b].tags["format_strictness"]
            c = {"variables": check_same_variables(ref, user), "scale": check_scale(ref, user, group.scale)}
            bad = [name for name, r in c.items() if not r["passed"]]
            if bad:
                raise PromptError(f"crossed wording {new_id} ({a} x format of {b}) fails check(s) {bad}: {c}")
            variants[new_id] = Variant(new_id, user, src.system, {**tags, "role": "kept"} if roles else tags)
            checks[new_id] = c
            if roles and src.system:
                bare = f"{a}F{b[1:] if b.startswith('P') else b}N"
                variants[bare] = Variant(
                    bare, user, None, {**tags, "role_framing": "none", "role": "dropped"}
                )
                checks[bare] = c
    out = PromptGroup(
        group_id or f"{group.id}x", group.judge_family, group.scale, group.version, variants,
        description=f"{group.description} ({group.id}'s {len(ids)} instructions x its {len(ids)} answer formats"
        + (", each role line kept and dropped)" if roles else ")"),
        held_out=group.held_out, family_type=group.family_type, assistant_prefix=group.assistant_prefix,
    )  # fmt: skip
    return out, checks
