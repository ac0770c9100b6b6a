"""A fake judge that records each time it is built (one line per engine load in the file named by
``PL_LOAD_LOG``): how many engines a study's tasks load (tests/test_study_tasks.py)."""

from __future__ import annotations

import os

from promptlottery.backends.fake import FakeBackend


class CountingFakeBackend(FakeBackend):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        with open(os.environ["PL_LOAD_LOG"], "a") as f:
            f.write(f"{os.getpid()}\n")
