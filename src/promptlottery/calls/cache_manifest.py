"""The SQLite call cache's manifest: which file held how many answers, kept outside that file.

A cache file emptied (0 bytes), removed or renamed takes its answers and their count with it, so
nothing in a new sweep dir could say that its calls are paid again. The manifest,
``<cache file>.manifest.json`` beside it (``calls.sqlite.manifest.json``), records the file's id (a
random id the store writes into the file's ``meta`` table when it creates it) and how many answers
it held when a job last opened or closed it. A job that opens a file whose id is not the manifest's
(a new file: the old one was emptied, removed or renamed) learns what it *replaced*: the old count,
carried in the manifest from then on, until the new file holds as many answers again or the user
removes the manifest (the loss was meant). The judge stage says how many of its calls are made again
(:func:`promptlottery.judging.before_calls.check_lost_cache`).

A manifest is a lower bound: a job killed before it closed the cache leaves the count of its open.
A PostgreSQL cache has none (a dropped table is the server's to report); the job records beside a
job (``results.json``) cover both stores.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from promptlottery.atomic import atomic_write_text

logger = logging.getLogger(__name__)


SUFFIX = ".manifest.json"


def manifest_path(db: str | Path) -> Path:
    db = Path(db)
    return db.with_name(db.name + SUFFIX)


def read_manifest(db: str | Path) -> dict[str, Any] | None:
    """The manifest beside ``db`` (None: none, or one this code cannot read, which is then ignored)."""
    path = manifest_path(db)
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        logger.warning("call cache manifest %s ignored: unreadable (%s)", path, exc)
        return None
    return m if isinstance(m, dict) and isinstance(m.get("answers"), int) else None


def replaced(manifest: dict[str, Any] | None, file_id: str | None, count: int) -> dict[str, Any] | None:
    """What the cache file with ``file_id`` and ``count`` answers replaced: ``{"answers", "file_id",
    "written"}`` of the file the manifest described, or None (same file, nothing lost, or caught up).

    >>> old = {"file_id": "a", "answers": 120, "written": "t0"}
    >>> replaced(old, "b", 0)
    {'answers': 120, 'file_id': 'a', 'written': 't0'}
    >>> replaced(old, "a", 0) is None  # the same file, emptied of rows by hand: its own count says so
    True
    >>> replaced({"file_id": "b", "answers": 24, "replaced": replaced(old, "b", 0)}, "b", 24)["answers"]
    120
    >>> replaced({"file_id": "b", "answers": 120, "replaced": replaced(old, "b", 0)}, "b", 120) is None
    True
    """
    if manifest is None:
        return None
    lost = manifest.get("replaced")
    if manifest.get("file_id") != file_id:
        mine = {k: manifest.get(k) for k in ("answers", "file_id", "written")}
        lost = mine if not lost or mine["answers"] >= int(lost.get("answers") or 0) else lost
    if not lost or int(lost.get("answers") or 0) <= count:
        return None
    return lost


def write_manifest(
    db: str | Path, file_id: str, answers: int, *, lost: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Record ``db``'s id and count, and what it replaced while it holds fewer answers than that did;
    returns the replaced file's record, or None once caught up. A failure to write is only logged:
    the manifest never stops a job that could use its cache."""
    lost = lost if lost and int(lost.get("answers") or 0) > answers else None
    record: dict[str, Any] = {
        "file": Path(db).name,
        "file_id": file_id,
        "answers": int(answers),
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if lost:
        record["replaced"] = lost
    try:
        atomic_write_text(manifest_path(db), json.dumps(record, indent=2) + "\n")
    except OSError as exc:
        logger.warning("call cache manifest %s not written: %s", manifest_path(db), exc)
    return lost
