"""`make bench`: every benchmark in one run, each printing key=value lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# bench_backends needs .venv-vllm for its vLLM parts and says so itself when it is missing
ORDER = ["bench_metrics.py", "bench_engine.py", "bench_backends.py"]


def main() -> int:
    failed = []
    for name in ORDER + sorted(p.name for p in HERE.glob("bench_*.py") if p.name not in ORDER):
        path = HERE / name
        if not path.exists():
            print(f"bench={name} status=missing")
            continue
        print(f"# {name}", flush=True)
        rc = subprocess.call([sys.executable, str(path)], cwd=HERE.parent)
        if rc:
            failed.append(name)
    print(f"benchmarks_failed={failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
