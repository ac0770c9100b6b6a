"""Write the rubric study's outputs on rubric set 1 (the synthetic ASAP set-1 fixture of
tests/test_rubric_study.py, the tests' oracle and hash judges, fake backends) that
tests/test_rubric_fixture.py pins byte for byte.

    PYTHONPATH=src .venv/bin/python scripts/rubric_fixture.py tests/fixtures/rubric_set1
    PYTHONPATH=src .venv/bin/python scripts/rubric_fixture.py tests/fixtures/rubric_infobench infobench

The second writes InFoBench's (tests/test_rubric_fixture.py's infobench_job: criteria per item).

The pinned files: ``rubric_tables.md``, ``cells.csv``, ``significance.csv``, ``tables/*``, and
``calls.csv`` (one row per judged item x criterion x condition x backbone: its cache key, answer
prefix and scores, so the study's cache keys are pinned with its tables). Rebuild them only on
purpose (a change named in its commit): a refactor that claims the tables unchanged must pass the
test against the files written before it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from tests.test_rubric_fixture import infobench_job, pinned_outputs, rubric_set1_job  # noqa: E402

JOBS = {"set1": rubric_set1_job, "infobench": infobench_job}


def main(out: Path, study: str = "set1") -> None:
    with tempfile.TemporaryDirectory() as d:
        files = pinned_outputs(JOBS[study](Path(d)))
    shutil.rmtree(out, ignore_errors=True)
    for rel, data in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    print(f"{len(files)} files -> {out}")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] and sys.argv[2] not in JOBS:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]).resolve(), *sys.argv[2:])
