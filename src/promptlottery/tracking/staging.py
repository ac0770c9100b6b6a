"""Outputs written aside and moved into place; results.json vouches for every file by its sha256.

A stage that writes many files (the lottery analysis: tables, figures, report.md) first removes its
``results.json``, writes everything into a fresh staging directory inside its output directory
(:func:`staging_dir`), then :func:`publish` digests every staged file and moves each entry into
place (a folder replaces the old folder whole), and the stage writes ``results.json`` last with the
digests under ``outputs``. :class:`staged_outputs` is that sequence, the one way every stage
(lottery and study, budget, compare, rubric, validation, gate, human campaign / import / export /
analyse) and the command-line tools that write pages (the judge cards, ``compare --out``) write their
outputs; tests/test_stage_outputs.py fails on a file write anywhere else that it does not name.
Killed at any point, the directory has no results.json saying ``ok``, or one whose digests match
every file it names. A reader (:func:`check_outputs`) refuses a directory
whose results.json is missing, not ``ok``, names no digests, or whose files differ from them.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from promptlottery.errors import UserError
from promptlottery.tracking.jobdir import file_sha256

STAGING = ".staging"


class OutputsError(UserError, ValueError):
    """An output directory whose files results.json does not vouch for."""


def staging_dir(output_dir: str | Path) -> Path:
    """A fresh, empty staging directory inside ``output_dir`` (an earlier one is removed)."""
    out = Path(output_dir)
    shutil.rmtree(out / STAGING, ignore_errors=True)
    (out / STAGING).mkdir(parents=True)
    return out / STAGING


def digests(folder: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``folder``, sorted."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {p.relative_to(folder).as_posix(): file_sha256(p) for p in files}


class no_debris:
    """Around writing into ``staging`` and publishing it: an ``OSError`` (a full disk, a read-only or
    vanished dir) removes the staging dir and becomes one line, :class:`OutputsError`, saying what
    happened and what to do; what ``output_dir`` held before is left in place."""

    def __init__(self, staging: str | Path, output_dir: str | Path):
        self.staging, self.output_dir = Path(staging), Path(output_dir)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or not isinstance(exc, OSError):
            return False
        shutil.rmtree(self.staging, ignore_errors=True)
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise OutputsError(
            f"the outputs could not be written into {self.output_dir} ({why}); nothing there was replaced "
            "and nothing half-written is left: free space (or make it writable) and re-run"
        ) from None


def publish(staging: str | Path, output_dir: str | Path) -> dict[str, str]:
    """Move every entry of ``staging`` into ``output_dir`` (replacing what is there) and remove
    ``staging``; returns the digests of the files moved (:func:`digests`)."""
    staging, out = Path(staging), Path(output_dir)
    found = digests(staging)
    for entry in sorted(staging.iterdir()):
        target = out / entry.name
        if target.is_dir() and not target.is_symlink():
            old = out / f".{entry.name}.old-{secrets.token_hex(3)}"
            os.replace(target, old)
            os.replace(entry, target)
            shutil.rmtree(old)
        else:
            os.replace(entry, target)
    staging.rmdir()
    return found


class staged_outputs:
    """The one writer of a stage's outputs: ``with staged_outputs(output_dir) as staging:`` writes every
    file under ``staging`` (a fresh :func:`staging_dir`); leaving the block moves them all into
    ``output_dir`` (:func:`publish`) and keeps their digests in ``.outputs``. Entering removes
    ``results.json`` (the stage writes it last, after publishing); ``results=False`` leaves it alone,
    for a command-line tool whose folder has no results.json of its own (the judge cards beside a
    sweep, ``compare --out``: a results.json there would make the folder look like a job to the
    loaders, and ``--out`` may name a folder that holds another's). An error inside the block removes
    the staging dir and leaves ``output_dir``'s files as they were; an ``OSError`` becomes one line
    (:class:`no_debris`). So a stage killed mid-write leaves no half-written file among its outputs."""

    def __init__(self, output_dir: str | Path, *, results: bool = True):
        self.output_dir = Path(output_dir)
        self.results = results
        self.outputs: dict[str, str] = {}

    def __enter__(self) -> Path:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        if self.results:
            (self.output_dir / "results.json").unlink(missing_ok=True)
        self.staging = staging_dir(self.output_dir)
        self._guard = no_debris(self.staging, self.output_dir)
        return self.staging

    def __exit__(self, kind, exc, tb):
        if exc is None:
            with self._guard:
                self.outputs = publish(self.staging, self.output_dir)
            return False
        shutil.rmtree(self.staging, ignore_errors=True)
        return self._guard.__exit__(kind, exc, tb)


def check_outputs(output_dir: str | Path, *, reader: str) -> dict:
    """``output_dir``'s results.json when it says ``ok`` and every file it names has its digest;
    :class:`OutputsError` (one line, naming the directory and the first problem) otherwise."""
    import json

    out = Path(output_dir)
    path = out / "results.json"
    why = f"{reader} reads only a finished analysis: re-run it"
    if not path.is_file():
        raise OutputsError(f"{out}: no results.json (the analysis did not finish or never ran); {why}")
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OutputsError(f"{path}: unreadable results.json ({exc}); {why}") from None
    if not isinstance(rec, dict) or rec.get("status") != "ok":
        status = rec.get("status") if isinstance(rec, dict) else None
        error = f" ({rec['error']})" if isinstance(rec, dict) and rec.get("error") else ""
        raise OutputsError(f"{path}: status={status!r}{error}; {why}")
    want = rec.get("outputs")
    if not isinstance(want, dict) or not want:
        raise OutputsError(f"{path}: names no digest of its files (written before they were recorded); {why}")
    for name, sha in want.items():
        f = out / name
        if not f.is_file():
            raise OutputsError(f"{f}: missing, but results.json names it; {why}")
        if file_sha256(f) != sha:
            raise OutputsError(
                f"{f}: not the file results.json describes (changed or from another run); {why}"
            )
    return rec
