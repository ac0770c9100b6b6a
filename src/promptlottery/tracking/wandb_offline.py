"""What a W&B offline run holds, read back without the W&B server: its config, its summary scalars
and its charts, as a researcher would see them once the run is synced (issue 45: W&B as the place
runs are compared).

wandb 0.31 writes an offline run as ``<dir>/wandb/offline-run-<time>-<id>/run-<id>.wandb``, a record
log in LevelDB's format (a 7-byte header ``:W&B`` + magic + version, then 32 KiB blocks of chunks,
each with a 7-byte header: CRC, length, FULL / FIRST / MIDDLE / LAST) of ``wandb.proto`` records; the
SDK no longer ships a Python reader (``wandb.sdk.internal.datastore`` is gone: the Go core writes
it), so :func:`wandb_log_records` reads it here with the SDK's own protobuf classes. A chart made
with ``wandb.plot.line`` is a ``table-file`` in the history plus a ``Vega2`` panel
(``panelDefId wandb/line/v0``) under the config's ``_wandb.visualize.<name>``; a PNG is an
``image-file``. :func:`describe_run` lists all three; :func:`run_problems` says what a comparison
surface lacks (``scripts/wandb_offline_check.py`` prints both).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

__all__ = [
    "describe_run",
    "find_offline_runs",
    "format_listing",
    "read_wandb_log",
    "run_problems",
    "wandb_log_records",
]

_BLOCK = 32768
_HEADER = 7  # ":W&B" + 0xBEE1 + version; each chunk: crc32 (4), length (2), kind (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
#: values of a composed config that mean the defaults, not what ran (conf/config.yaml's choices)
DEFAULT_MARKERS = ("smollm2", "${")


def wandb_log_records(path: str | Path) -> list:
    """The records (``wandb_internal_pb2.Record``) of one ``run-*.wandb`` log; a torn last record
    (a run still being written) is skipped."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B run log (no ':W&B' header)")
    pos, buf, out = _HEADER, b"", []
    while pos + 7 <= len(data):
        if _BLOCK - pos % _BLOCK < 7:  # a block's trailer too short for a chunk header: padding
            pos += _BLOCK - pos % _BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == _FIRST:
            buf = chunk
        elif kind == _MIDDLE:
            buf += chunk
        elif kind in (_FULL, _LAST):
            raw, buf = (chunk if kind == _FULL else buf + chunk), b""
            record = pb.Record()
            try:
                record.ParseFromString(raw)
            except Exception:  # noqa: BLE001 - a torn last record (run still open): skip it
                continue
            out.append(record)
    return out


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def read_wandb_log(path: str | Path) -> tuple[dict, dict]:
    """Config and summary from a ``run-*.wandb`` log: config keys joined with ``.`` (W&B's nested
    ``_wandb.visualize.<name>``), summary keys with ``/`` (as the run logged them)."""
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for r in wandb_log_records(path):
        kind = r.WhichOneof("record_type")
        if kind in ("run", "config"):
            updates = r.run.config.update if kind == "run" else r.config.update
            config.update({(u.key or ".".join(u.nested_key)): _value(u.value_json) for u in updates})
        elif kind == "summary":
            summary.update(
                {(u.key or "/".join(u.nested_key)): _value(u.value_json) for u in r.summary.update}
            )
    return config, summary


def find_offline_runs(path: str | Path) -> list[Path]:
    """The offline runs at ``path``: the run folder itself, or those under ``<path>/wandb/`` or
    ``<path>/`` (``offline-run-*``), oldest first."""
    p = Path(path)
    if p.name.startswith("offline-run-") and any(p.glob("run-*.wandb")):
        return [p]
    return sorted([*p.glob("wandb/offline-run-*"), *p.glob("offline-run-*")])


def _run_info(records: list) -> dict[str, Any]:
    for r in records:
        if r.WhichOneof("record_type") == "run":
            run = r.run
            return {
                "id": run.run_id,
                "name": run.display_name,
                "group": run.run_group,
                "job_type": run.job_type,
            }
    return {}


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict) or not d:
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def describe_run(run_dir: str | Path) -> dict[str, Any]:
    """One offline run as a researcher sees it: ``run`` (id, name, group, job type), ``config``
    (flattened, W&B's own keys left out), ``scalars`` (the summary's numbers, media left out),
    ``line_plots`` (``{name: {x, y, stroke, title, rows}}``: native ``wandb.plot.line`` charts),
    ``images``, ``tables`` and ``history_rows``."""
    run_dir = Path(run_dir)
    logs = sorted(run_dir.glob("run-*.wandb"))
    if not logs:
        raise FileNotFoundError(f"{run_dir}: no run-*.wandb log (not a W&B offline run folder)")
    records = wandb_log_records(logs[0])
    config, summary = read_wandb_log(logs[0])
    media = {k.rsplit("/", 1)[0]: v for k, v in summary.items() if k.endswith("/_type")}
    scalars = {
        k: v
        for k, v in summary.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
        if not k.startswith("_") and k.rsplit("/", 1)[0] not in media
    }
    lines = {}
    for key, panel in config.items():
        if not key.startswith("_wandb.visualize.") or not isinstance(panel, dict):
            continue
        pc = panel.get("panel_config") or {}
        if pc.get("panelDefId") != "wandb/line/v0":
            continue
        name = key[len("_wandb.visualize.") :]
        fields = pc.get("fieldSettings") or {}
        lines[name] = {
            "x": fields.get("x"),
            "y": fields.get("y"),
            "stroke": fields.get("stroke"),
            "title": (pc.get("stringSettings") or {}).get("title"),
            "rows": summary.get(f"{name}_table/nrows"),
        }
    own = {k: v for k, v in config.items() if not k.startswith("_wandb")}
    return {
        "run": _run_info(records),
        "config": _flat(own),
        "scalars": dict(sorted(scalars.items())),
        "line_plots": dict(sorted(lines.items())),
        "images": sorted(k for k, v in media.items() if v == "image-file"),
        "tables": sorted(k for k, v in media.items() if v == "table-file" and not k.endswith("_table")),
        "history_rows": sum(r.WhichOneof("record_type") == "history" for r in records),
    }


def run_problems(listing: dict[str, Any], *, expect_lines: tuple[str, ...] = ()) -> list[str]:
    """What keeps a run from being a comparison surface, one line each: no summary scalar, a config
    value that is the composition's default or unresolved (:data:`DEFAULT_MARKERS`), an estimate
    without its interval or the reverse, no native line plot, or an expected one missing."""
    out = []
    if not listing["scalars"]:
        out.append("no summary scalar: the run table and parallel coordinates have nothing to sort")
    for key, value in listing["config"].items():
        if any(m in str(value) for m in DEFAULT_MARKERS):
            out.append(f"config {key}={str(value)[:80]!r}: the composition's default or unresolved")
    scalars = listing["scalars"]
    for key in scalars:
        if key.endswith(("_lo", "_hi")) and key[:-3] not in scalars:
            out.append(f"scalar {key}: an interval without its estimate {key[:-3]}")
    if not listing["line_plots"]:
        out.append("no native line plot (wandb.plot.line): the curves are files only")
    for name in expect_lines:
        if name not in listing["line_plots"]:
            out.append(f"line plot {name}: missing (have: {', '.join(listing['line_plots']) or 'none'})")
    return out


def format_listing(listing: dict[str, Any], *, max_config: int = 60) -> str:
    """The listing as text: the run, its config keys, its scalars (an estimate with its interval on
    one line, ``x [x_lo, x_hi]``), its line plots, images and tables."""
    run, scalars = listing["run"], listing["scalars"]
    lines = [
        f"run {run.get('id')} name={run.get('name')} group={run.get('group')} job_type={run.get('job_type')} "
        f"history_rows={listing['history_rows']}",
        f"config ({len(listing['config'])} keys):",
    ]
    for key, value in list(listing["config"].items())[:max_config]:
        lines.append(f"  {key} = {json.dumps(value, default=str)[:100]}")
    if len(listing["config"]) > max_config:
        lines.append(f"  ... {len(listing['config']) - max_config} more")
    estimates = [k for k in scalars if not (k.endswith(("_lo", "_hi")) and k[:-3] in scalars)]
    lines.append(f"summary scalars ({len(scalars)}; {len(estimates)} estimates):")
    for key in estimates:
        lo, hi = scalars.get(f"{key}_lo"), scalars.get(f"{key}_hi")
        ci = f" [{lo:.4g}, {hi:.4g}]" if lo is not None and hi is not None else ""
        lines.append(f"  {key} = {scalars[key]:.4g}{ci}")
    lines.append(f"native line plots ({len(listing['line_plots'])}):")
    for name, p in listing["line_plots"].items():
        lines.append(
            f"  {name}: x={p['x']} y={p['y']} stroke={p['stroke']} rows={p['rows']} title={p['title']!r}"
        )
    lines.append(f"images ({len(listing['images'])}): {', '.join(listing['images'])}")
    lines.append(f"tables ({len(listing['tables'])}): {', '.join(listing['tables'])}")
    return "\n".join(lines)
