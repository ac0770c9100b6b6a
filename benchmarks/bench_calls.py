"""The call engine at its bound: judging calls/s against a loopback OpenAI-compatible stub that answers
after a fixed delay D (tests/openai_stub.py, its own process), at C calls in flight.

    .venv/bin/python benchmarks/bench_calls.py [--rounds 2] [--concurrency 16,64,256] [--delays-ms 0,100]
        [--inspect-python /path/to/venv/bin/python] [--no-ceilings] [--no-loop-row] [--no-aiohttp-row]

For each (C, D): calls/s through ``run_calls`` (the vLLM-server backend with its default transport, the
lean one at the http:// stub, a real SQLite call cache, every answer parsed and stored, on asyncio's event
loop; a second row runs the same engine with ``http_transport=aiohttp``, ``--no-aiohttp-row`` leaves it
out; where uvloop is installed a third ``event_loop=uvloop``, ``--no-loop-row`` leaves it out), the
client's CPU seconds per call (this process: the stub's CPU is not counted), and the ratio to the bound min(C / D, the client's CPU limit), the CPU limit being
1 / (CPU seconds per call) measured in the same run. The measured ceilings, against the same stub in
the same run (benchmarks/bare_clients.py, each its own process): a bare aiohttp client (N requests, a
semaphore of C, nothing else: what any aiohttp client can reach on this machine) and a raw asyncio
client (C keep-alive connections, nothing but the bytes: what the stub and the loopback allow); the
engine's rows give their ratio to the bare aiohttp and the raw clients too, and every row the stub's
own CPU per call.
Configurations are interleaved over ``--rounds`` and the median is printed; one untimed warm-up run
first (imports, the first connections). ``--inspect-python`` names a Python with inspect_ai installed:
its ``eval`` against the same stub (max_connections = C) gives the comparison row; without it the row
says why it is missing. Also a fully cached re-run. Prints key=value lines as it goes, then the load
average and a Markdown table to paste into docs/benchmarks.md (``--save FILE`` keeps every run's
numbers, ``--table FILE`` prints their table again).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from promptlottery.backends.base import Decoding, JudgeRequest
from promptlottery.backends.openai_compat import VLLMServerBackend
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import CallStats, run_calls

HERE = Path(__file__).resolve().parent
STUB = HERE.parent / "tests" / "openai_stub.py"
LABELS = ("1", "2", "3", "4", "5")
# about the size of a G12 STS-B judge prompt
PROMPT = (
    "Evaluate how similar the two sentences are in meaning on a scale from 1 (unrelated) to 5 "
    "(equivalent). Reply with the number only.\n\nSentence 1: {a}\nSentence 2: {b}\n\nScore:"
)


def start_stub(delay_ms: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(STUB), "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    if not line.startswith("port="):
        proc.kill()
        raise SystemExit(f"bench_calls: the stub did not start: {line!r}")
    return proc, f"http://127.0.0.1:{line.split('=')[1]}/v1"


def cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def load() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"
    except OSError:
        return "unknown"


def requests(n: int, tag: str) -> list[JudgeRequest]:
    return [
        JudgeRequest(
            key=f"{tag}-{i:07d}",
            labels=LABELS,
            messages=[
                {"role": "user", "content": PROMPT.format(a=f"A man plays a guitar {i}.", b=f"A person {i}.")}
            ],
        )
        for i in range(n)
    ]


def n_calls(c: int, delay_ms: float, seconds: float) -> int:
    """Enough calls for about ``seconds`` at the bound (at least 1,000, at most about 8,000), a whole
    number of windows of C (so the last window is full: 8,000 calls at C = 256 would end with a
    window of 64, and cap the ratio at 97.7%)."""
    rate = c / (delay_ms / 1000) if delay_ms else 1500.0
    n = min(8000, max(1000, rate * seconds))
    return c * max(1, round(n / c))


def run_queue_wait_s() -> float:
    """Seconds this process's threads spent runnable but waiting for a CPU (Linux schedstat; 0 elsewhere):
    on a shared machine, the time the client was held back by other processes."""
    total = 0
    for stat in Path("/proc/self/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def uvloop_installed() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def ours(
    url: str, c: int, n: int, tag: str, tmp: Path, event_loop: str = "asyncio", transport="auto"
) -> dict:
    backend = VLLMServerBackend(
        "stub-judge", base_url=url, api_key_env="", max_concurrency=c, event_loop=event_loop,
        http_transport=transport,
    )  # fmt: skip
    reqs = requests(n, tag)
    cache = CallCache(tmp / f"{tag}.sqlite")
    t0, c0, w0 = time.perf_counter(), time.process_time(), run_queue_wait_s()
    out = run_calls(reqs, backend, cache, Decoding(), stats=CallStats(), desc=tag, max_retries=0)
    wall, cpu, wait = time.perf_counter() - t0, time.process_time() - c0, run_queue_wait_s() - w0
    assert len(out) == n and len(cache) == n, (len(out), len(cache))
    t1 = time.perf_counter()
    again = run_calls(reqs, backend, cache, Decoding(), stats=CallStats(), desc=tag)
    cached_s = time.perf_counter() - t1
    assert len(again) == n
    loop = type(backend._client.loop).__module__.split(".")[0]  # "uvloop" or "asyncio"
    close = getattr(backend, "close", None)
    if close:
        close()
    cache.close()
    return {
        "loop": loop,
        "transport": backend.transport,
        "calls_s": n / wall,
        "cpu_per_call_ms": 1000 * cpu / n,
        "wait_per_call_ms": 1000 * wait / n,
        "cached_s": cached_s,
        "n": n,
    }


INSPECT = r"""
import json, sys, time
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate
url, c, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
prompt = sys.argv[5]
task = Task(dataset=[Sample(input=prompt.format(a=f"A man plays a guitar {i}.", b=f"A person {i}."), target="4")
                     for i in range(n)], solver=generate())
t0 = time.perf_counter()
log = inspect_eval(task, model="openai-api/stub/stub-judge", model_base_url=url, max_connections=c,
                   max_samples=c, display="none", log_dir=sys.argv[4],
                   temperature=0.0, max_tokens=8, logprobs=True, top_logprobs=20)[0]
wall = time.perf_counter() - t0
print(json.dumps({"calls_s": n / wall, "status": log.status, "n": n}))
"""


def inspect_row(python: str, url: str, c: int, n: int, tmp: Path) -> dict | None:
    env = {
        **os.environ,
        "STUB_API_KEY": "stub-key",
        "INSPECT_LOG_LEVEL": "warning",
    }  # pragma: allowlist secret
    proc = subprocess.run(
        [python, "-c", INSPECT, url, str(c), str(n), str(tmp / f"inspect-{c}"), PROMPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        print(
            f"inspect_ai failed rc={proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}",
            file=sys.stderr,
        )
        return None
    return json.loads(lines[-1])


def ceiling(kind: str, url: str, c: int, n: int) -> dict | None:
    """One of benchmarks/bare_clients.py's clients against the stub at ``url`` (its own process)."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "bare_clients.py"), kind, url, str(c), str(n)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        print(
            f"{kind} client failed rc={proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}",
            file=sys.stderr,
        )
        return None
    return json.loads(lines[-1])


#: the ceiling clients: their key in the results, the table's name for them
CEILINGS = {"aiohttp": "bare aiohttp client (ceiling)", "raw": "raw asyncio client (the stub's ceiling)"}
#: the engine on uvloop's loop (event_loop=uvloop), beside its default (asyncio's): the loop's share
UVLOOP_ROW = "promptlottery-uvloop"
#: the engine through aiohttp (http_transport=aiohttp), beside its default (the lean transport at the stub)
AIOHTTP_ROW = "promptlottery-aiohttp"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", default="16,64,256")
    ap.add_argument("--delays-ms", default="0,100")
    ap.add_argument("--seconds", type=float, default=5.0, help="calls per configuration: about this long")
    ap.add_argument("--inspect-python", default=os.environ.get("INSPECT_PYTHON"))
    ap.add_argument("--inspect-calls", type=int, default=1000)
    ap.add_argument("--no-ceilings", action="store_true", help="leave out the bare aiohttp and raw clients")
    ap.add_argument("--no-loop-row", action="store_true", help="leave out the engine on uvloop")
    ap.add_argument("--no-aiohttp-row", action="store_true", help="leave out the engine through aiohttp")
    ap.add_argument("--save", type=Path, help="also write every run's numbers here (JSON), for --table")
    ap.add_argument("--table", type=Path, help="print the table of a --save file, run nothing")
    args = ap.parse_args()
    cs = [int(x) for x in args.concurrency.split(",")]
    ds = [float(x) for x in args.delays_ms.split(",")]
    if args.table:
        saved = json.loads(args.table.read_text())
        results = {(r["engine"], r["C"], r["D_ms"]): r["runs"] for r in saved["results"]}
        cs = sorted({c for _, c, _ in results})
        ds = sorted({d for _, _, d in results})
        has = any(e == "inspect_ai" for e, _, _ in results)
        print(table(results, cs, ds, has, any(e in CEILINGS for e, _, _ in results), saved["load"]))
        return
    stubs = {d: start_stub(d) for d in ds}
    results: dict[tuple[str, int, float], list[dict]] = {}
    has_inspect = bool(args.inspect_python) and Path(args.inspect_python).exists()
    loop_row = uvloop_installed() and not args.no_loop_row
    loads = [load()]
    print(f"load_average_start={loads[0]}", flush=True)

    def timed(engine: str, c: int, d: float, run, *args) -> dict | None:
        """``run(*args)``'s result, with the stub's CPU seconds per call while it ran."""
        pid = stubs[d][0].pid
        s0 = cpu_s(pid)
        r = run(*args)
        s1 = cpu_s(pid)
        if r is None:
            return None
        r["stub_cpu_per_call_ms"] = 1000 * (s1 - s0) / r["n"] if s0 is not None and s1 is not None else None
        results.setdefault((engine, c, d), []).append(r)
        return r

    try:
        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td)
            ours(stubs[ds[0]][1], min(cs), 200, "warm-up", tmp)  # imports and first connections, untimed
            for rnd in range(args.rounds):
                for d in ds:
                    for c in cs:
                        n = n_calls(c, d, args.seconds)
                        url = stubs[d][1]
                        r = timed("promptlottery", c, d, ours, url, c, n, f"r{rnd}-c{c}-d{int(d)}", tmp)
                        print(f"round={rnd} engine=promptlottery loop={r['loop']} C={c} D_ms={d:g} n={n} calls_s={r['calls_s']:.1f} "
                              f"cpu_ms_per_call={r['cpu_per_call_ms']:.3f} cached_rerun_s={r['cached_s']:.2f}", flush=True)  # fmt: skip
                        if loop_row:  # the same engine on uvloop, right after: the loop's share
                            t = timed(
                                UVLOOP_ROW, c, d, ours, url, c, n, f"r{rnd}-c{c}-d{int(d)}-u", tmp, "uvloop"
                            )
                            print(f"round={rnd} engine={UVLOOP_ROW} C={c} D_ms={d:g} n={n} calls_s={t['calls_s']:.1f} "
                                  f"cpu_ms_per_call={t['cpu_per_call_ms']:.3f}", flush=True)  # fmt: skip
                        if not args.no_aiohttp_row:  # the same engine through aiohttp: the transport's share
                            t = timed(AIOHTTP_ROW, c, d, ours, url, c, n, f"r{rnd}-c{c}-d{int(d)}-a", tmp,
                                      "asyncio", "aiohttp")  # fmt: skip
                            print(f"round={rnd} engine={AIOHTTP_ROW} C={c} D_ms={d:g} n={n} calls_s={t['calls_s']:.1f} "
                                  f"cpu_ms_per_call={t['cpu_per_call_ms']:.3f}", flush=True)  # fmt: skip
                        for kind in () if args.no_ceilings else CEILINGS:
                            t = timed(kind, c, d, ceiling, kind, url, c, n)
                            if t:
                                print(f"round={rnd} engine={kind} C={c} D_ms={d:g} n={n} calls_s={t['calls_s']:.1f} "
                                      f"cpu_ms_per_call={t['cpu_per_call_ms']:.3f}", flush=True)  # fmt: skip
                        if has_inspect and d > 0:
                            m = min(n, args.inspect_calls)
                            t = timed("inspect_ai", c, d, inspect_row, args.inspect_python, url, c, m, tmp)
                            if t:
                                print(f"round={rnd} engine=inspect_ai C={c} D_ms={d:g} n={m} calls_s={t['calls_s']:.1f}", flush=True)  # fmt: skip
                loads.append(load())
    finally:
        for proc, _ in stubs.values():
            proc.kill()
    print(f"load_average_end={loads[-1]}", flush=True)
    if args.save:
        rows = [{"engine": e, "C": c, "D_ms": d, "runs": v} for (e, c, d), v in results.items()]
        args.save.write_text(json.dumps({"load": loads, "results": rows}, indent=1))
    print(table(results, cs, ds, has_inspect, not args.no_ceilings, loads))


def table(results, cs, ds, has_inspect: bool, ceilings: bool, loads: list[str]) -> str:
    med = {
        k: {f: statistics.median(r[f] for r in v) if all(isinstance(r.get(f), int | float) for r in v) else None
            for f in v[0]}
        for k, v in results.items()
    }  # fmt: skip

    def cpu_limit(engine: str, c: int, d: float) -> float | None:
        """The client's own CPU limit: 1 / (its CPU seconds per call), from its D = 0 run at the same C
        (calls/s on one core of its own; on a shared machine the waiting column says how long its
        threads waited for a CPU instead)."""
        m = med.get((engine, c, 0.0)) or med.get(("promptlottery", c, 0.0)) or med[("promptlottery", c, d)]
        return 1000 / m["cpu_per_call_ms"] if m.get("cpu_per_call_ms") else None

    def bound(engine: str, c: int, d: float) -> tuple[float, str]:
        cd = c / (d / 1000) if d else float("inf")
        lim = cpu_limit(engine, c, d) or float("inf")
        return min(cd, lim), "C/D" if cd <= lim else "CPU"

    def ms(x) -> str:
        return "" if x is None else f"{x:.3f} ms"

    rows = [
        f"load average {loads[0]} at the start, {loads[-1]} at the end",
        "",
        "| engine | D | C | calls/s | bound: min(C/D, client CPU limit) | ratio to bound "
        "| ratio to the bare aiohttp client | ratio to the raw asyncio client | client CPU per call | its threads waiting for a CPU, per call "
        "| stub CPU per call |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    engines = ["promptlottery", *[e for e in (AIOHTTP_ROW, UVLOOP_ROW) if any(k[0] == e for k in results)],
               *(CEILINGS if ceilings else ())]  # fmt: skip

    def name_of(engine: str, c: int, d: float) -> str:
        """The table's name for a row: the engine's with its event loop (saved runs before it had none)."""
        first = (results.get((engine, c, d)) or [{}])[0]
        how = ", ".join(
            f"{x} {k}" for k, x in (("transport", first.get("transport")), ("loop", first.get("loop"))) if x
        )
        return CEILINGS.get(engine) or (f"promptlottery ({how})" if how else engine)

    for d in ds:
        for c in cs:
            for engine in engines:
                m = med.get((engine, c, d))
                name = name_of(engine, c, d)
                if m is None:
                    rows.append(f"| {name} | {d:g} ms | {c} | failed (see stderr) | | | | | | | |")
                    continue
                b, which = bound(engine, c, d)
                vs_bare, vs_raw = (
                    f"{m['calls_s'] / x['calls_s']:.0%}" if engine not in CEILINGS and x else ""
                    for x in (med.get(("aiohttp", c, d)), med.get(("raw", c, d)))
                )
                rows.append(
                    f"| {name} | {d:g} ms | {c} | {m['calls_s']:.0f} | {b:.0f} ({which}) | {m['calls_s'] / b:.0%} "
                    f"| {vs_bare} | {vs_raw} | {ms(m.get('cpu_per_call_ms'))} | {ms(m.get('wait_per_call_ms'))} "
                    f"| {ms(m.get('stub_cpu_per_call_ms'))} |"
                )
    for d in ds:
        if not d:
            continue
        for c in cs:
            if not has_inspect:
                why = "inspect_ai not installed (--inspect-python / INSPECT_PYTHON names its Python)"
                rows.append(f"| inspect_ai | {d:g} ms | {c} | missing: {why} | | | | | | | |")
                break
            m = med.get(("inspect_ai", c, d))
            if not m:
                rows.append(f"| inspect_ai | {d:g} ms | {c} | failed (see stderr) | | | | | | | |")
                continue
            b = min(c / (d / 1000), cpu_limit("promptlottery", c, d) or float("inf"))
            bare = med.get(("aiohttp", c, d))
            vs_bare = f"{m['calls_s'] / bare['calls_s']:.0%}" if bare else ""
            rows.append(f"| inspect_ai | {d:g} ms | {c} | {m['calls_s']:.0f} | {b:.0f} | {m['calls_s'] / b:.0%} "
                        f"| {vs_bare} | | | | {ms(m.get('stub_cpu_per_call_ms'))} |")  # fmt: skip
    ours_runs = [r for (e, _, _), v in results.items() if e == "promptlottery" for r in v]
    cached = statistics.median(r["cached_s"] * 1000 / r["n"] for r in ours_runs)
    rows.append(f"\nfully cached re-run: {cached:.3f} ms per call (median over configurations)")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
