"""The errors whose message says everything: a bad input, shown as one line without a traceback.

Each package raises its own subclass (``ConfigError`` here; ``DatasetError``, ``CacheError``,
``JudgingError``, ``AnalysisError``, ``OutputDirError`` next to the code that raises them); the job
entry (:func:`promptlottery.stages.main`) prints a :class:`UserError` of a single run
as ``error: <message>`` and exits with status 2. This module imports nothing, so every layer can
use it.
"""

from __future__ import annotations


class UserError(Exception):
    """A bad input or a refused operation whose message names the file, row or option."""


class ConfigError(UserError, ValueError):
    """A config value outside its valid range, or a key the structured config does not define."""
