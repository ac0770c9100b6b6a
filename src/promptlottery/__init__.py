"""promptlottery: how much an LLM-as-a-judge verdict depends on the prompt's wording."""

__version__ = "0.1.0"
SCHEMA_VERSION = 1
