"""One job, one output directory: unique directory names, a claim on the directory, atomic writes.

* ``${unique:}`` (an OmegaConf resolver, registered by ``promptlottery.config``) gives each process
  its own suffix (process id + 4 random hex digits), so two runs started in the same microsecond
  still get two directories (``conf/hydra/default.yaml``).
* :func:`claim_output_dir` is called before a job writes anything: it refuses a directory that a
  running job holds (an exclusive ``flock`` on ``.job.lock``) or that holds the outputs of a job
  with another configuration (``.job.json`` records the owner's config hash). The same
  configuration re-run into its own directory (a resume) is allowed; its stale ``results.json``
  and ``judgments.parquet`` are removed first, so a crash of the re-run leaves no old ``ok``.
* its files are written by :func:`promptlottery.atomic.atomic_write`: a reader sees the old file or
  the new one, never half of one.
* Ids that form paths (a prompt group's and its variants' ids, the parts of a sweep's job dir name,
  ``${path_id:...}``) are checked by :func:`check_path_id`: no separators, no ``..``, nothing outside
  ``[A-Za-z0-9_.-]``. A job dir is checked by :func:`check_job_dir` before anything is written into it
  (by :class:`NoFollowFileHandler`, Hydra's ``run.log`` handler, which Hydra opens before it writes
  ``.hydra/``; and again by the claim): it holds no symbolic link, and it is neither inside the
  ``promptlottery`` package nor the repository root.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import re
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any

from promptlottery.atomic import atomic_write_text
from promptlottery.errors import UserError

#: files a job writes whose presence means "this directory holds a job's outputs"
OUTPUT_FILES = ("results.json", "judgments.parquet")
_SUFFIX = f"{os.getpid()}-{secrets.token_hex(2)}"
_HELD: dict[str, Any] = {}  # path -> open lock file, kept for the life of the process


class OutputDirError(UserError, RuntimeError):
    """The output directory belongs to another job, holds a planted link or is a forbidden place."""


class PathIdError(UserError, ValueError):
    """An id that forms part of a path could leave its directory."""


_PATH_ID = re.compile(r"[A-Za-z0-9_.-]+")
#: the package's own directory, and the checkout that holds it (``src/promptlottery``): no outputs there
PACKAGE_DIR = Path(__file__).resolve().parents[1]
SOURCE_ROOT = PACKAGE_DIR.parents[1] if PACKAGE_DIR.parent.name == "src" else None


def check_path_id(value: object, what: str) -> str:
    """``value`` as a string, or :class:`PathIdError` if it could escape the directory it names a part of
    (a separator, ``..``, anything outside ``[A-Za-z0-9_.-]``, or empty)."""
    text = str(value)
    if not _PATH_ID.fullmatch(text) or ".." in text:
        raise PathIdError(
            f"{what} {text!r} cannot be part of a path: use only letters, digits, '_', '-' and '.' (no '..')"
        )
    return text


#: the source tree's folders under a checkout: no outputs there either
SOURCE_FOLDERS = ("src", "tests", "conf")


def link_in_path(path: str | Path) -> Path | None:
    """The first symbolic link among ``path`` and its parents, leaving out the filesystem's top
    level (``/data``) and the parents of the working directory and of the home directory (a system's
    own layout); None where there is none."""
    p = Path(path).absolute()
    trusted = {Path("/")}
    for base in (Path.cwd(), Path.home()):
        trusted |= {base, *base.parents}
    for d in (p, *p.parents):
        if d in trusted or d.parent == Path("/"):
            continue
        if d.is_symlink():
            return d
    return None


def check_output_root(
    path: str | Path, what: str, root: str | Path | None = None, *, follow_ok: bool = False
) -> None:
    """Refuse, in one line naming ``what`` (the option) and the path, an output or cache dir that
    is or lies under a symbolic link, lies inside the package or the checkout's ``src/``, ``tests/``
    or ``conf/``, is the repository root, or cannot be written (its nearest existing parent is
    read-only or not writable). Checked before Hydra makes any dir (``stages.check_composition``).
    ``follow_ok``: a dir that may lie under a link (the call cache's, often on a bigger disk: its
    file itself is never opened through one, ``calls.cache_store``)."""
    out = Path(path).absolute()
    link = None if follow_ok else link_in_path(out)
    if link is not None:
        raise OutputDirError(
            f"{what}={path}: {link} is a symbolic link: outputs are never written through a link; "
            "give a real directory"
        )
    real = out.resolve()
    roots = [r.resolve() for r in (Path(root) if root else None, SOURCE_ROOT) if r is not None]
    if real == PACKAGE_DIR or PACKAGE_DIR in real.parents:
        raise OutputDirError(
            f"{what}={path} is inside the promptlottery package ({PACKAGE_DIR}); write outputs elsewhere"
        )
    for r in roots:
        if real == r:
            raise OutputDirError(f"{what}={path} is the repository root; give the job its own dir")
        for folder in SOURCE_FOLDERS:
            if real == r / folder or (r / folder) in real.parents:
                raise OutputDirError(
                    f"{what}={path} is inside the source tree ({r / folder}); write outputs elsewhere "
                    "(outputs/ is the default)"
                )
    existing = next(d for d in (real, *real.parents) if d.exists())
    if not existing.is_dir():
        raise OutputDirError(f"{what}={path}: {existing} is a file, not a directory")
    read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    if read_only or not os.access(existing, os.W_OK | os.X_OK):
        why = "on a read-only file system" if read_only else "not writable by this user"
        raise OutputDirError(f"{what}={path}: {existing} is {why}; give a directory you can write")


def check_job_dir(output_dir: str | Path, root: str | Path | None = None, *, entries: bool = True) -> None:
    """Refuse a job dir inside the package or the checkout's source folders, at the repository root
    (``root`` and the package's checkout), that is or lies under a symbolic link
    (:func:`link_in_path`), or holding a symbolic link (in it or in its ``.hydra/``), in one line
    naming the path. ``entries=False``: the dir and its place only (a job that claims nothing writes
    each file through a temporary file and a rename, which replaces a link planted in it)."""
    out = Path(output_dir).absolute()
    link = link_in_path(out)
    if link is not None:
        raise OutputDirError(
            f"output dir {out}: {link} is a symbolic link: a job's files are never opened through a link; "
            "remove it or give a real directory"
        )
    real = out.resolve()
    if real == PACKAGE_DIR or PACKAGE_DIR in real.parents:
        raise OutputDirError(
            f"output dir {out} is inside the promptlottery package ({PACKAGE_DIR}); write outputs elsewhere"
        )
    roots = {r.resolve() for r in (Path(root) if root else None, SOURCE_ROOT) if r is not None}
    if real in roots:
        raise OutputDirError(
            f"output dir {out} is the repository root; give the job its own dir (paths.output_dir)"
        )
    for r in roots:
        for folder in SOURCE_FOLDERS:
            if real == r / folder or (r / folder) in real.parents:
                raise OutputDirError(
                    f"output dir {out} is inside the source tree ({r / folder}); write outputs elsewhere"
                )
    hydra_dir = out / ".hydra"
    if not entries:
        return
    for d in (out, hydra_dir) if hydra_dir.is_dir() and not hydra_dir.is_symlink() else (out,):
        for entry in sorted(d.iterdir()) if d.is_dir() else ():
            if entry.is_symlink():
                raise OutputDirError(
                    f"{entry} is a symbolic link: a job's files are never opened through a link; remove it"
                )


class NoFollowFileHandler(logging.FileHandler):
    """Hydra's ``run.log`` handler (``conf/hydra/default.yaml``): checks the job dir (:func:`check_job_dir`)
    before Hydra writes into it, and opens the log with ``O_NOFOLLOW``."""

    def __init__(self, filename: str, mode: str = "a", encoding: str | None = None, delay: bool = False):
        try:
            check_job_dir(Path(filename).parent)
        except OutputDirError as exc:
            # Hydra builds this handler inside logging.config, which would bury the refusal under two
            # tracebacks; nothing of the job has run or been written yet, so stop here in one line
            # (a sweep stops too: its dir was tampered with)
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        super().__init__(filename, mode, encoding, delay)

    def _open(self):
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)  # noqa: SIM115


def unique_suffix() -> str:
    """This process's suffix for run / sweep directory names: ``<pid>-<4 hex digits>``."""
    return _SUFFIX


#: top-level options added after the first release, with the default that changes nothing
NEUTRAL_DEFAULTS = {"repeat_source": "none", "study": None}
#: the same for options inside a group (``judge.design=full`` is the grid every earlier job judged)
NEUTRAL_NESTED = {
    "judge": {
        "design": "full",
        "budget": 1.0,
        "anchor": None,
        "full_share": 0.0,
        "design_seed": 0,
    }
}
#: modules above this layer (named, not imported: ``neutral_options()`` of each is read on use) that
#: add options neutral at their defaults: the judge modes' own options (``JudgeMode.options``), so a
#: mode's new option never changes the hash of a job judged before it, nor of another mode's job
NEUTRAL_FROM = ("promptlottery.modes",)


def neutral_nested() -> dict[str, dict[str, Any]]:
    """:data:`NEUTRAL_NESTED` with the options the modules of :data:`NEUTRAL_FROM` declare neutral."""
    out = {group: dict(opts) for group, opts in NEUTRAL_NESTED.items()}
    for module in NEUTRAL_FROM:
        for group, opts in importlib.import_module(module).neutral_options().items():
            out.setdefault(group, {}).update(opts)
    return out


#: options inside a group that change answers only under some designs: out of the hash under the others
#: (a full or sparse job with ``judge.confidence=0.9`` is the job it was without it)
DESIGN_ONLY = {"judge": {"stop_rule": ("adaptive",), "confidence": ("adaptive",)}}
#: options of how a run treats its cache, not of what the job is: never in the hash (a re-run with
#: paths.cache_on_mismatch=recompute resumes its own dir; dirs from before these options still match)
HANDLING_OPTIONS = {
    "paths": ("cache_on_mismatch", "allow_paid_recompute", "cache_timeout_s"),
    # a label (the dataset config's id) and a planning figure (a backbone's throughput): neither
    # changes a call, so a job dir of the study from before them is still the same job
    "dataset": ("id",),
    "backbone": ("throughput",),
}
#: top-level options that never change an answer, out of the hash: a spend cap says how many calls a run
#: may pay for, so a sweep stopped at its cap resumes in its dir with the cap raised (calls.spend)
RUN_HANDLING = ("max_cost_usd", "max_tokens")


def config_hash(config: dict) -> str:
    """sha256 of a job's resolved config, without the parts that do not define the job."""
    from promptlottery.tracking.secrets import redact

    # redacted, so a results.json's (redacted) config hashes the same as the job's own; an option added
    # later, at the default that keeps the old behaviour, leaves the hash as it was (a sweep dir of an
    # earlier version can still be resumed)
    config = _without_planning(config)
    neutral = neutral_nested()
    keep = redact(
        {
            k: (
                {
                    n: x
                    for n, x in v.items()
                    if n not in HANDLING_OPTIONS.get(k, ())
                    and not (n in neutral.get(k, {}) and x == neutral[k][n])
                    and not (n in DESIGN_ONLY.get(k, {}) and v.get("design") not in DESIGN_ONLY[k][n])
                }
                if isinstance(v, dict) and (k in HANDLING_OPTIONS or k in neutral)
                else v
            )
            for k, v in config.items()
            if k not in ("hydra", "logger", *RUN_HANDLING)
            and not (k in NEUTRAL_DEFAULTS and v == NEUTRAL_DEFAULTS[k])
        }
    )
    blob = json.dumps(keep, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _without_planning(config: dict) -> dict:
    """``config`` without the throughput of the backbones its candidate systems answer with
    (``predict.systems.<name>.backbone.throughput``): a planning figure, like ``backbone.throughput``."""
    systems = (
        (config.get("predict") or {}).get("systems") if isinstance(config.get("predict"), dict) else None
    )
    if not isinstance(systems, dict):
        return config
    trimmed = {
        name: {**spec, "backbone": {k: v for k, v in spec["backbone"].items() if k != "throughput"}}
        if isinstance(spec, dict) and isinstance(spec.get("backbone"), dict)
        else spec
        for name, spec in systems.items()
    }
    return {**config, "predict": {**config["predict"], "systems": trimmed}}


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def claim_output_dir(output_dir: str | Path, config: dict, *, fresh: bool = True) -> dict:
    """Take ``output_dir`` for this job or raise :class:`OutputDirError` saying whose it is.

    ``fresh`` removes the stale outputs of an earlier run of the same configuration. Returns the
    manifest written to ``.job.json``.
    """
    out = Path(output_dir)
    check_job_dir(out, (config.get("paths") or {}).get("root_dir"))
    out.mkdir(parents=True, exist_ok=True)
    key = str(out.resolve())
    mine = config_hash(config)
    if key in _HELD:  # already claimed by this process (a stage that calls another stage)
        return _HELD[key]["manifest"]
    lock = _lock(out / ".job.lock")
    manifest_path = out / ".job.json"
    old = _read_json(manifest_path)
    if old is not None and old.get("config_hash") != mine:
        lock.close()
        raise OutputDirError(
            f"output dir {out} holds another job's outputs (started {old.get('started')}, pid {old.get('pid')} "
            f"on {old.get('host')}, another config); give this job its own hydra.run.dir / hydra.sweep.dir"
        )
    if old is None and any((out / f).exists() for f in OUTPUT_FILES) and not _same_job_results(out, mine):
        lock.close()
        raise OutputDirError(
            f"output dir {out} holds outputs of a job that did not record its config (.job.json); "
            "give this job its own hydra.run.dir / hydra.sweep.dir"
        )
    previous = _read_json(out / "results.json")  # what this job's last run recorded (its calls)
    if fresh:
        for f in OUTPUT_FILES:
            (out / f).unlink(missing_ok=True)
    manifest = {
        "config_hash": mine,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    atomic_write_text(manifest_path, json.dumps(manifest, indent=2) + "\n")
    _HELD[key] = {"lock": lock, "manifest": manifest, "previous": previous}
    return manifest


def previous_record(output_dir: str | Path) -> dict | None:
    """The ``results.json`` an earlier run of this job left in ``output_dir``, as the claim found it
    before removing it (None: no claim, or nothing there)."""
    held = _HELD.get(str(Path(output_dir).resolve()))
    return held.get("previous") if held else None


def sibling_records(output_dir: str | Path) -> list[dict]:
    """The ``results.json`` records of the other job dirs beside ``output_dir`` (a sweep's other jobs)."""
    out = Path(output_dir).resolve()
    found = (_read_json(p) for p in sorted(out.parent.glob("*/results.json")) if p.parent != out)
    return [rec for rec in found if isinstance(rec, dict)]


def release_output_dir(output_dir: str | Path) -> None:
    held = _HELD.pop(str(Path(output_dir).resolve()), None)
    if held is not None:
        held["lock"].close()


def _lock(path: Path):
    import fcntl

    # held open until the job ends; never through a link planted at the lock's path
    f = open(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644), "a+")  # noqa: SIM115
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise OutputDirError(
            f"output dir {path.parent} is in use by another running job; give this job its own "
            "hydra.run.dir / hydra.sweep.dir"
        ) from None
    except OSError:  # a filesystem without flock (some NFS mounts): the manifest check still holds
        pass
    return f


def _same_job_results(out: Path, mine: str) -> bool:
    """A dir written before job claims existed: its results.json's config is this job's."""
    rec = _read_json(out / "results.json")
    return bool(rec and isinstance(rec.get("config"), dict) and config_hash(rec["config"]) == mine)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
