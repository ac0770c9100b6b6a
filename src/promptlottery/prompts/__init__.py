"""Prompt groups, variants, scales and rendering."""

from promptlottery.prompts.groups import PromptError, PromptGroup, Variant, list_groups, load_group, render
from promptlottery.prompts.scales import SCALES, Scale, get_scale

__all__ = [
    "SCALES",
    "PromptError",
    "PromptGroup",
    "Scale",
    "Variant",
    "get_scale",
    "list_groups",
    "load_group",
    "render",
]
