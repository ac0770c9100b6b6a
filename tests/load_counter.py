"""A fake judge that records each time it is built (one line per engine load in the file named by
``PL_LOAD_LOG``): how many engines a study's tasks load (tests/test_study_tasks.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from promptlottery.backends.fake import FakeBackend


class CountingFakeBackend(FakeBackend):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        with open(os.environ["PL_LOAD_LOG"], "a") as f:
            f.write(f"{os.getpid()}\n")


def fake_study_command(out: Path, *extra: str, counting: bool = False) -> list[str]:
    """``python -m run +study=cpu ... -m`` over PersonaChat engaging and EvoUNA NQ with the fake judge,
    3 responses each, into ``out/cache`` and ``out/out``; ``counting``: the judge records its loads
    (:class:`CountingFakeBackend`, its plan off: the plan builds a backend of its own)."""
    from tests.conftest import DATA_DIR

    count = ["study.plan_first=false", f"backbone.backend._target_={__name__}.CountingFakeBackend"]
    return [
        sys.executable,
        "-m",
        "run",
        "+study=cpu",
        "study.experiments=[pc_usr_engaging,evouna_nq_correctness]",
        "backbone=fake",
        *(count if counting else []),
        "dataset.limit=3",
        "dataset.sample_by=item",  # 3 responses each (USR and EVOUNA sample whole groups by default)
        "logger=none",
        f"paths.data_dir={DATA_DIR}",
        f"paths.cache_dir={out / 'cache'}",
        f"paths.output_dir={out / 'out'}",
        *extra,
        "-m",
    ]
