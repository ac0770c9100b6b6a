"""Registry of dataset loaders by name (no if-chains over datasets)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

from promptlottery.data.schema import DatasetError, Item
from promptlottery.registry import Registry

Loader = Callable[..., list[Item]]
#: dataset name -> loader; importing promptlottery.data.loaders registers every built-in one
LOADERS: Registry[Loader] = Registry("dataset", modules=("promptlottery.data.loaders",), error=DatasetError)


def register_loader(name: str) -> Callable[[Loader], Loader]:
    """``@register_loader("name")`` on a ``load_<name>(data_dir, **options)`` function."""
    return LOADERS.register(name)


def _import_all() -> None:
    LOADERS.names()  # imports the modules that register the built-in loaders


def dataset_id(dataset) -> str:
    """The dataset config's own name (``dataset.id``), else its loader's (``dataset.name``): two
    configs of one loader (``persona_chat_usr`` and ``topical_chat_usr``) are two configurations."""
    return str(dataset.get("id") or dataset.get("name") or "")


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """``data_dir`` if given, else ``$PROMPTLOTTERY_DATA_DIR``, else ``../shared/data``."""
    if data_dir:
        return Path(data_dir)
    return Path(os.environ.get("PROMPTLOTTERY_DATA_DIR", "../shared/data"))


def load_items(
    name: str,
    *,
    data_dir: str | os.PathLike | None = None,
    limit: int | None = None,
    seed: int = 0,
    sample_by: str = "item",
    **options,
) -> list[Item]:
    """Load dataset ``name`` (a registered loader) and take a seeded sample of ``limit`` items.

    The sample is drawn with ``random.Random(seed)`` over the loader's order so it is the same
    on every machine; ``limit=None`` keeps everything.
    """
    _import_all()
    if name not in LOADERS:
        raise DatasetError(f"unknown dataset {name!r}; registered: {sorted(LOADERS)}")
    items = LOADERS.get(name)(resolve_data_dir(data_dir), **options)
    if not items:
        raise DatasetError(f"dataset {name!r} loaded no items")
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DatasetError(f"dataset {name!r}: duplicate item id {dup!r}")
    return sample_items(items, limit=limit, seed=seed, by=sample_by)


def sample_items(items: list[Item], *, limit: int | None, seed: int = 0, by: str = "item") -> list[Item]:
    """A seeded sample in the loader's order (all items when limit is None).

    ``by="item"`` draws ``limit`` items; ``by="group"`` draws ``limit`` groups (articles, questions,
    dialogues: ``item.meta["group"]``) and keeps every item of each, so every system is judged on the
    same inputs, as a ranking of systems needs. The groups are the first ``limit`` of one seeded
    permutation, so a larger limit keeps every group of a smaller one (a study grown from 5 contexts to 30
    is answered from the call cache for the first 5).
    """
    if by not in ("item", "group"):
        raise DatasetError(f"dataset.sample_by={by!r}: expected 'item' or 'group'")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DatasetError(
            f"dataset.limit={limit}: must be a positive number of {by}s, or null for all of them"
        )
    if by == "item":
        if limit is None or limit >= len(items):
            return items
        idx = sorted(random.Random(seed).sample(range(len(items)), limit))
        return [items[i] for i in idx]
    ungrouped = [it.id for it in items if it.meta.get("group") is None]
    if ungrouped:
        raise DatasetError(
            f"dataset.sample_by=group: dataset {items[0].dataset!r} gives no group for item {ungrouped[0]!r} "
            f"({len(ungrouped)} items); use dataset.sample_by=item"
        )
    groups = list(dict.fromkeys(it.meta["group"] for it in items))
    if limit is None or limit >= len(groups):
        return items
    order = list(range(len(groups)))
    random.Random(seed).shuffle(order)  # one seeded permutation: a larger limit keeps a smaller one's groups
    keep = {groups[i] for i in order[:limit]}
    return [it for it in items if it.meta["group"] in keep]
