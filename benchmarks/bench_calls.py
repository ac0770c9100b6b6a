"""The call engine at its bound: judging calls/s against a loopback OpenAI-compatible stub that answers
after a fixed delay D (benchmarks/openai_stub.py, its own process), at C calls in flight.

    .venv/bin/python benchmarks/bench_calls.py [--rounds 2] [--concurrency 16,64,256] [--delays-ms 0,100]
        [--inspect-python /path/to/venv/bin/python]

For each (C, D): calls/s through ``run_calls`` (the vLLM-server backend, a real SQLite call cache, every
answer parsed and stored), the client's CPU seconds per call (this process: the stub's CPU is not
counted), and the ratio to the bound min(C / D, the client's CPU limit), the CPU limit being
1 / (CPU seconds per call) measured in the same run. Configurations are interleaved over ``--rounds``
and the median is printed. ``--inspect-python`` names a Python with inspect_ai installed: its
``eval`` against the same stub (max_connections = C) gives the comparison row; without it the row
says why it is missing. Also a fully cached re-run. Prints a Markdown table and key=value lines.
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
LABELS = ("1", "2", "3", "4", "5")
# about the size of a G12 STS-B judge prompt
PROMPT = (
    "Evaluate how similar the two sentences are in meaning on a scale from 1 (unrelated) to 5 "
    "(equivalent). Reply with the number only.\n\nSentence 1: {a}\nSentence 2: {b}\n\nScore:"
)


def start_stub(delay_ms: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "openai_stub.py"), "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    if not line.startswith("port="):
        proc.kill()
        raise SystemExit(f"bench_calls: the stub did not start: {line!r}")
    return proc, f"http://127.0.0.1:{line.split('=')[1]}/v1"


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
    """Enough calls for about ``seconds`` at the bound (at least 1,000, at most 8,000)."""
    rate = c / (delay_ms / 1000) if delay_ms else 1500.0
    return int(min(8000, max(1000, rate * seconds)))


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


def ours(url: str, c: int, n: int, tag: str, tmp: Path) -> dict:
    backend = VLLMServerBackend("stub-judge", base_url=url, api_key_env="", max_concurrency=c)
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
    close = getattr(backend, "close", None)
    if close:
        close()
    cache.close()
    return {
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", default="16,64,256")
    ap.add_argument("--delays-ms", default="0,100")
    ap.add_argument("--seconds", type=float, default=5.0, help="calls per configuration: about this long")
    ap.add_argument("--inspect-python", default=os.environ.get("INSPECT_PYTHON"))
    ap.add_argument("--inspect-calls", type=int, default=1000)
    args = ap.parse_args()
    cs = [int(x) for x in args.concurrency.split(",")]
    ds = [float(x) for x in args.delays_ms.split(",")]
    stubs = {d: start_stub(d) for d in ds}
    results: dict[tuple[int, float], list[dict]] = {}
    theirs: dict[tuple[int, float], list[dict]] = {}
    has_inspect = bool(args.inspect_python) and Path(args.inspect_python).exists()
    try:
        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td)
            for rnd in range(args.rounds):
                for d in ds:
                    for c in cs:
                        n = n_calls(c, d, args.seconds)
                        r = ours(stubs[d][1], c, n, f"r{rnd}-c{c}-d{int(d)}", tmp)
                        results.setdefault((c, d), []).append(r)
                        print(f"round={rnd} engine=promptlottery C={c} D_ms={d:g} n={n} calls_s={r['calls_s']:.1f} "
                              f"cpu_ms_per_call={r['cpu_per_call_ms']:.3f} cached_rerun_s={r['cached_s']:.2f}", flush=True)  # fmt: skip
                        if has_inspect and d > 0:
                            m = min(n, args.inspect_calls)
                            t = inspect_row(args.inspect_python, stubs[d][1], c, m, tmp)
                            if t:
                                theirs.setdefault((c, d), []).append(t)
                                print(f"round={rnd} engine=inspect_ai C={c} D_ms={d:g} n={m} calls_s={t['calls_s']:.1f}", flush=True)  # fmt: skip
    finally:
        for proc, _ in stubs.values():
            proc.kill()
    print(table(results, theirs, cs, ds, has_inspect, args.inspect_python))


def table(results, theirs, cs, ds, has_inspect: bool, inspect_python) -> str:
    fields = ("calls_s", "cpu_per_call_ms", "wait_per_call_ms", "cached_s")
    med = {k: {f: statistics.median(r[f] for r in v) for f in fields} for k, v in results.items()}

    def cpu_limit(c: int, d: float) -> float:
        """The client's own CPU limit: 1 / (its CPU seconds per call), from the D = 0 run at the same C
        (calls/s on one core of its own; on a shared machine the last column says how long its threads
        waited for a CPU instead)."""
        m = med.get((c, 0.0), med[(c, d)])
        return 1000 / m["cpu_per_call_ms"]

    rows = [
        "| engine | D | C | calls/s | bound: min(C/D, client CPU limit) | ratio to bound | client CPU per call "
        "| its threads waiting for a CPU, per call |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in ds:
        for c in cs:
            m, lim = med[(c, d)], cpu_limit(c, d)
            cd = c / (d / 1000) if d else float("inf")
            bound = min(cd, lim)
            rows.append(
                f"| promptlottery | {d:g} ms | {c} | {m['calls_s']:.0f} | {bound:.0f} ({'C/D' if cd <= lim else 'CPU'}) "
                f"| {m['calls_s'] / bound:.0%} | {m['cpu_per_call_ms']:.3f} ms | {m['wait_per_call_ms']:.3f} ms |"
            )
    for d in ds:
        if not d:
            continue
        for c in cs:
            if not has_inspect:
                why = "inspect_ai not installed (--inspect-python / INSPECT_PYTHON names its Python)"
                rows.append(f"| inspect_ai | {d:g} ms | {c} | missing: {why} | | | | |")
                break
            got = theirs.get((c, d))
            if not got:
                rows.append(f"| inspect_ai | {d:g} ms | {c} | failed (see stderr) | | | | |")
                continue
            cps = statistics.median(t["calls_s"] for t in got)
            bound = min(c / (d / 1000), cpu_limit(c, d))
            rows.append(f"| inspect_ai | {d:g} ms | {c} | {cps:.0f} | {bound:.0f} | {cps / bound:.0%} | | |")
    cached = statistics.median(r["cached_s"] * 1000 / r["n"] for v in results.values() for r in v)
    rows.append(f"\nfully cached re-run: {cached:.3f} ms per call (median over configurations)")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
