"""The runner (grid -> cached calls -> parsed judgments), the judge stage and the judgments read back."""
