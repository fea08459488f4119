"""Sandbox benchmarks (medians over a few runs).

- docker snapshot (``commit``) and restore (fresh container from the snapshot)
  of a container that wrote ~10 MB. Targets: <= 250 ms / <= 450 ms.
- docker exec latency (``true``; and with the timeout wrapper).
- local backend snapshot/restore of a 10 MB workspace (copytree).
- python backend snapshot of a 10k-entry object (deepcopy).
- ledger: one external call (pending -> fired -> done, fsync'd).

Docker rows are skipped (with the reason) when no daemon is reachable.
Run: ``python -m benchmarks.bench_sandbox`` (or ``python -m benchmarks``).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Callable

TEN_MB = 10 * 1024 * 1024


def _median_ms(fn: Callable[[], object], runs: int, setup: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(runs):
        if setup:
            setup()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def bench_docker(rows: list[tuple[str, str, str]]) -> None:
    from unsee.sandbox.docker_env import DockerEnvironment, daemon_unavailable_reason, docker_client
    from unsee.sandbox.image import BUSYBOX_IMAGE, DEFAULT_IMAGE, build_image

    why = daemon_unavailable_reason()
    if why:
        rows.append(("docker", "skipped", why))
        return
    client = docker_client()
    image = DEFAULT_IMAGE
    try:
        client.images.get(image)
    except Exception:
        image = build_image("busybox") or BUSYBOX_IMAGE
    env = DockerEnvironment(image, flatten_every=1000)
    try:
        env.exec(f"head -c {TEN_MB} /dev/urandom > blob0").check()
        snaps = []
        counter = iter(range(1, 1000))

        def write_more():
            env.exec(f"head -c 65536 /dev/urandom > small{next(counter)}").check()

        snap_ms = _median_ms(lambda: snaps.append(env.snapshot()), 5, setup=write_more)
        rows.append((f"docker snapshot, 10 MB written ({image})", f"{snap_ms:.0f} ms", "target <= 250 ms"))
        i = iter(range(100))
        restore_ms = _median_ms(lambda: env.restore(snaps[next(i) % len(snaps)]), 5)
        rows.append(("docker restore (fresh container)", f"{restore_ms:.0f} ms", "target <= 450 ms"))
        ok = env.exec("test -s blob0").ok
        rows.append(("docker restore exact (10 MB file present)", str(ok), ""))
        exec_ms = _median_ms(lambda: env.exec(["true"]), 20)
        rows.append(("docker exec `true`", f"{exec_ms:.0f} ms", ""))
        exec_t_ms = _median_ms(lambda: env.exec("true", timeout=30), 10)
        rows.append(("docker exec with timeout wrapper", f"{exec_t_ms:.0f} ms", ""))
        shadow_ms = _median_ms(lambda: env.shadow().close(), 3)
        rows.append(("docker shadow() + close()", f"{shadow_ms:.0f} ms", ""))
    finally:
        env.close()


def bench_local(rows: list[tuple[str, str, str]]) -> None:
    from unsee.sandbox.local import LocalEnvironment

    with LocalEnvironment() as env:
        for k in range(10):
            env.write_file(f"data/part{k}.bin", os.urandom(TEN_MB // 10))
        snaps = []
        snap_ms = _median_ms(lambda: snaps.append(env.snapshot()), 5)
        rows.append(("local snapshot, 10 MB workspace", f"{snap_ms:.0f} ms", ""))
        restore_ms = _median_ms(lambda: env.restore(snaps[0]), 5)
        rows.append(("local restore, 10 MB workspace", f"{restore_ms:.0f} ms", ""))
        exec_ms = _median_ms(lambda: env.exec(["true"]), 20)
        rows.append(("local exec `true`", f"{exec_ms:.1f} ms", ""))


def bench_python(rows: list[tuple[str, str, str]]) -> None:
    from unsee.sandbox.pyobject import PythonObjectEnvironment

    obj = {"inbox": [{"id": i, "subject": f"mail {i}", "body": "x" * 100} for i in range(10_000)]}
    with PythonObjectEnvironment(obj) as env:
        snaps = []
        snap_ms = _median_ms(lambda: snaps.append(env.snapshot()), 5)
        rows.append(("python snapshot, 10k-entry object", f"{snap_ms:.0f} ms", ""))
        restore_ms = _median_ms(lambda: env.restore(snaps[0]), 5)
        rows.append(("python restore, 10k-entry object", f"{restore_ms:.0f} ms", ""))


def bench_ledger(rows: list[tuple[str, str, str]]) -> None:
    from unsee.sandbox.ledger import Ledger

    with tempfile.TemporaryDirectory() as d, Ledger(os.path.join(d, "ledger.sqlite")) as led:
        i = iter(range(10_000))
        fire_ms = _median_ms(lambda: led.run("s", "send", {"n": next(i)}, lambda: "ok"), 50)
        rows.append(("ledger external call (fired, fsync)", f"{fire_ms:.2f} ms", ""))
        j = iter(range(10_000))  # the same calls again: answered from the ledger
        dedup_ms = _median_ms(lambda: led.run("s", "send", {"n": next(j)}, lambda: "ok", occurrence=0), 50)
        rows.append(("ledger deduplicated call", f"{dedup_ms:.2f} ms", ""))


def main() -> None:
    rows: list[tuple[str, str, str]] = []
    for part in (bench_docker, bench_local, bench_python, bench_ledger):
        try:
            part(rows)
        except Exception as exc:  # report and go on
            rows.append((part.__name__, "FAILED", f"{type(exc).__name__}: {exc}"))
    w = max(len(r[0]) for r in rows)
    print(f"{'measure':<{w}}  {'median':>10}  note")
    print("-" * (w + 30))
    for name, value, note in rows:
        print(f"{name:<{w}}  {value:>10}  {note}")


if __name__ == "__main__":
    main()
