"""Importing this package registers every loader."""

from promptlottery.data.loaders import stsb  # noqa: F401
