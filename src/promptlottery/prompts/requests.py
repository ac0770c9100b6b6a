"""Render a prompt variant for an item into chat messages or a completion-style prompt."""

from __future__ import annotations

from collections.abc import Iterable

from promptlottery.data.schema import Item
from promptlottery.prompts.groups import PromptError, PromptGroup, render
from promptlottery.prompts.scales import Scale


def item_variables(item: Item) -> dict[str, str]:
    return dict(item.inputs)


def to_scale_label(value: float, human_range: tuple[float, float], scale: Scale) -> str:
    """Map a human score on ``human_range`` linearly onto ``scale`` and take the nearest label."""
    lo, hi = human_range
    s_lo, s_hi = min(scale.scores), max(scale.scores)
    x = s_lo + (value - lo) / (hi - lo) * (s_hi - s_lo) if hi > lo else value
    return scale.nearest_label(x)


def render_chat(group: PromptGroup, variant_id: str, item: Item) -> list[dict[str, str]]:
    v = group.variant(variant_id)
    where = f"prompt group {group.id} variant {variant_id}, item {item.id}"
    messages = []
    if v.system:
        messages.append({"role": "system", "content": render(v.system, item_variables(item), where=where)})
    messages.append({"role": "user", "content": render(v.user, item_variables(item), where=where)})
    return messages


def render_completion(
    group: PromptGroup,
    variant_id: str,
    item: Item,
    examples: list[tuple[Item, str]] = (),
    *,
    answer_prefix: str | None = "Answer:",
) -> str:
    """Completion-style prompt for base models: instructions, solved examples, then the item and the
    line its answer follows (``answer_prefix``; None: none, the item's text ends the prompt)."""
    v = group.variant(variant_id)
    where = f"prompt group {group.id} variant {variant_id}, item {item.id}"
    parts = [render(v.system, item_variables(item), where=where)] if v.system else []
    if examples and answer_prefix is None:
        raise PromptError(
            f"{where}: solved examples need an answer line; the group has completion_answer: null"
        )
    for ex, label in examples:
        parts.append(f"{render(v.user, item_variables(ex), where=where)}\n{answer_prefix} {label}")
    user = render(v.user, item_variables(item), where=where)
    parts.append(user if answer_prefix is None else f"{user}\n{answer_prefix}")
    return "\n\n".join(parts)


def query_text(messages: list[dict] | None, prompt: str | None) -> str:
    """The rendered judge query as one string: a completion prompt as is, chat turns prefixed with
    their role. The judging runner stores it with each judgment (column ``query``); the gate reads it.

    >>> query_text([{"role": "system", "content": "Be fair."}, {"role": "user", "content": "Rate."}], None)
    '[system] Be fair.\\n\\n[user] Rate.'
    """
    if prompt is not None:
        return str(prompt)
    return "\n\n".join(f"[{m.get('role', 'user')}] {m.get('content', '')}" for m in messages or [])


def check_rendering(
    group: PromptGroup, variant_id: str, shown: Iterable[Item], prompt_format: str, *, source: str | None
) -> None:
    """Every shown item's prompt renders (in the bounded sandbox, :func:`~promptlottery.prompts.groups.render`);
    the first failure is one :class:`PromptError` naming the file ``source`` the template is in."""
    for seen in shown:
        try:
            if prompt_format == "completion":
                render_completion(group, variant_id, seen, [], answer_prefix=group.completion_answer)
            else:
                render_chat(group, variant_id, seen)
        except PromptError as e:
            raise PromptError(f"{source}: {e}" if source and str(source) not in str(e) else str(e)) from None
