"""Dataset loaders: each reads one dataset into :class:`Item` rows, registered by name."""

from promptlottery.data.registry import LOADERS, load_items, register_loader
from promptlottery.data.schema import DatasetError, Item

__all__ = ["LOADERS", "DatasetError", "Item", "load_items", "register_loader"]
