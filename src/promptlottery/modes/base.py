"""What a judge mode is: the one object that knows how a mode's items are judged and recorded.

A :class:`JudgeMode` owns everything that differs between ways of judging (a rating of one response,
a preference between two, a pick among k, ...): the scale kind and item fields it needs and its input checks,
how an item is presented (its :class:`Presentation` s: once, or in both orders), the named parts a
presentation adds to the cache key, the scale its answers are scored on, the label a judge that
knew the human answer gives, and the columns its judgments add. The runner, the grid, the dry run
and the config checks ask the mode of ``judge.mode`` (:func:`promptlottery.modes.get_mode`) and
never name one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from promptlottery.data.schema import Item
from promptlottery.modes.registry import MODES, ModeError
from promptlottery.prompts.scales import Scale

__all__ = ["JudgeMode", "ModeError", "Presentation"]


@dataclass(frozen=True)
class Presentation:
    """One way an item is shown to the judge: the item as seen, the presentation order (a label of
    the mode's own order vocabulary, :attr:`JudgeMode.orders`; None: an item shown once), the part of
    the item judged (the criterion of a mode judging criteria one by one;
    None where the item is judged whole) and the text the answer starts with where it is the
    presentation's own (a batch of criteria: the reply so far; None: the mode's
    :meth:`JudgeMode.assistant_prefix`)."""

    item: Item
    order: str | None = None
    part: str | None = None
    prefix: str | None = None


class JudgeMode:
    """One judge mode (registered in :data:`promptlottery.modes.MODES` under :attr:`name`)."""

    #: the ``judge.mode`` value and the ``judge_mode`` column of its judgments
    name: ClassVar[str]
    #: the :attr:`Scale.kind` of the prompt groups this mode judges with
    scale_kind: ClassVar[str]
    #: ``judge.mode`` when the config names none (one registered mode declares itself the default)
    default: ClassVar[bool] = False
    #: the item inputs (``dataset.fields`` roles of a table) the mode reads besides the group's own
    fields: ClassVar[tuple[str, ...]] = ()
    #: what its items are called in a message (``"pairs"``)
    item_noun: ClassVar[str] = "items"
    #: the built-in group of your own judge (``+experiment=own_judge``) without a group file
    default_group: ClassVar[str | None] = None
    #: its judgments give one scale label per item and judge: the grid's label-matrix configurations
    #: (else the grid keeps them apart, per configuration, as :meth:`JudgmentGrid.rows`)
    label_matrix: ClassVar[bool] = False
    #: ``judge.design=sparse`` is built for it; its cells are (wording, pair order), not wordings
    sparse: ClassVar[bool] = False
    sparse_by_order: ClassVar[bool] = False
    #: the presentation orders a by-order design (``sparse_by_order``) crosses with the wordings: a
    #: cell is ``"<wording>:<order>"`` (the mode's order vocabulary is declared here only)
    orders: ClassVar[tuple[str, ...]] = ()
    #: ``judge.design=adaptive`` is built for it
    adaptive: ClassVar[bool] = False
    #: what reads its rows in the analysis, each ``"module:attribute"`` (imported there: the analysis
    #: sits above the modes): its report sections (``Section`` classes; a mode without a label matrix
    #: needs one, else it is refused before any call) and its budget analysis of a full grid and of a
    #: sparse grid (``run(opts, grid, job, mode)``; None: missing, refused in one line)
    sections: ClassVar[tuple[str, ...]] = ()
    budget_full: ClassVar[str | None] = None
    budget_sparse: ClassVar[str | None] = None
    #: its judge card (``"module:attribute"``: a class whose instances give ``key``, the paraphrase
    #: rows' key; ``verdict_note``; ``fill(card, para, ctrl, **parts)``); None: the label matrix's card
    #: (a label-matrix mode), else the card stage refuses the mode's rows in one line
    card: ClassVar[str | None] = None
    #: it judges a prompt group's criteria (``PromptGroup.criteria``) one by one; a mode that does
    #: not refuses a group that names criteria
    by_criterion: ClassVar[bool] = False

    #: the mode's own ``judge.*`` options and their defaults (``{"identical_pairs": "warn"}``): the
    #: config schema (``promptlottery.config.JudgeConfig``) has each as a field of its default's type,
    #: :meth:`check_options` checks them, and a job at an option's default hashes as a job from before
    #: the option (``tracking.jobdir``: every mode's options are neutral at their defaults)
    options: ClassVar[dict[str, Any]] = {}

    def option(self, judge: Mapping[str, Any] | None, name: str) -> Any:
        """The value of the mode's own option ``name`` in the config node ``judge`` (None, or the
        option not set: its default in :attr:`options`)."""
        default = self.options[name]
        return default if judge is None else judge.get(name, default)

    def check_options(self, judge) -> None:
        """The mode's own ``judge.*`` options (:attr:`options`, read from the config node ``judge``),
        each checked in the one style of :mod:`promptlottery.checks`; the config check asks every
        mode, whatever the mode."""

    def vote(self, rows):
        """Each row's vote in a by-order design's cell (a Series), as the analysis reads it; None: the
        label matrix's argmax label (a mode that is not by order)."""
        return None

    def check(
        self,
        scale: Scale,
        *,
        group: str,
        items: list[Item],
        where: str,
        options: Mapping[str, Any] | None = None,
        criteria: tuple = (),
    ) -> None:
        """The prompt group's scale and criteria (:meth:`check_group`) and the items
        (:meth:`check_items`) suit this mode; else a one-line :class:`ModeError`."""
        self.check_group(scale, group=group, criteria=criteria)
        self.check_items(scale, group=group, items=items, where=where, options=options, criteria=criteria)

    def check_group(self, scale: Scale, *, group: str, criteria: tuple = ()) -> None:
        """The group's criteria and scale suit the mode, in every mode's order: criteria named for a
        mode that judges an item whole, a scale of another kind (:meth:`wrong_scale`), no criteria
        for a mode that judges them one by one. ``group`` names the group (and its file). A mode whose
        rows neither the lottery (a label matrix) nor a section of its own reads is refused first."""
        if not self.label_matrix and not self.sections:
            raise ModeError(
                f"judge.mode={self.name} has no report section to read its judgments (JudgeMode.sections "
                "is empty): give the mode a Section before judging with it"
            )
        if criteria and not self.by_criterion:
            modes = [name for name, m in MODES.items() if m.by_criterion]
            raise ModeError(
                f"{group} names criteria {[c for c, _ in criteria]} but judge.mode={self.name} judges an item "
                f"whole; set judge.mode={' or '.join(modes) or '(none judges criteria)'}"
            )
        if scale.kind != self.scale_kind:
            raise ModeError(self.wrong_scale(scale, group))
        if self.by_criterion and not criteria:
            raise ModeError(
                f"judge.mode={self.name} but {group} names no criteria; give it `criteria:` (each "
                "criterion: its description) and a template naming {{ criterion }}"
            )

    def wrong_scale(self, scale: Scale, group: str) -> str:
        """The one line refusing ``group``, whose scale is not of :attr:`scale_kind`."""
        return f"judge.mode={self.name} but {group} has the {scale.kind} scale {scale.name}"

    def check_items(
        self,
        scale: Scale,
        *,
        group: str,
        items: list[Item],
        where: str,
        options: Mapping[str, Any] | None = None,
        criteria: tuple = (),
    ) -> None:
        """The items (of the dataset ``where``) suit this mode and the checked group (default: any);
        ``options``: the config node ``judge`` (the mode's own :attr:`options`; None: their defaults)."""

    def presentations(self, item: Item, *, group, position_swap: bool = True) -> list[Presentation]:
        """How ``item`` is shown with prompt group ``group``, each presentation a call of its own
        (in this order)."""
        raise NotImplementedError

    def rounds(self, group, items=()) -> int:
        """How many rounds the presentations of ``items`` are asked in: 1 (all at once), or more where
        a round's requests read the answers of the rounds before it (:meth:`round_presentations`)."""
        return 1

    def round_presentations(
        self, item: Item, *, group, k: int, earlier: tuple[str, ...] | None
    ) -> list[Presentation]:
        """Round ``k``'s presentations of ``item`` after the greedy answers ``earlier`` of its
        rounds ``0..k-1`` (None: placeholders, for counting calls without calling); a mode of one
        round presents the item whole in round 0."""
        return self.presentations(item, group=group) if k == 0 else []

    def assistant_prefix(self, group) -> str | None:
        """The text the judge's answer starts with (None: the group's is not used by this mode)."""
        return None

    def key_parts(self, p: Presentation, prefix: str | None) -> dict[str, Any]:
        """Named parts of the cache key that a presentation adds (none: the ordinary key)."""
        return {}

    def scoring_scale(self, scale: Scale, order: str | None) -> Scale:
        """The scale the answer to presentation ``order`` is scored on."""
        return scale

    def known_label(
        self, item: Item, criterion: str, scale: Scale, p: Presentation, human_range
    ) -> str | None:
        """The label a judge that knew the human answer gives to presentation ``p``."""
        raise NotImplementedError

    def human_raters(self, raw: Any) -> str | None:
        """The ``human_raters`` column: the raters' labels as JSON (None for one label)."""
        raise NotImplementedError

    def columns(self, item: Item, order: str | None, scale: Scale, scored, label_probs, raw: Any) -> dict:
        """The columns a judgment of ``item`` (as presented) adds after the common ones, or whose
        values it gives in their place (none for the plain rating)."""
        return {}
