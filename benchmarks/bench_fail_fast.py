"""How fast an unreachable service is refused with a typed error.

Three refusals, each the best of ``--rounds``: a PostgreSQL store whose socket
does not exist (``StoreUnavailable``), an OpenAI-compatible endpoint nobody
listens on (``EndpointUnreachable``), and ``unsee export --otlp-endpoint`` to a
port nobody listens on (exit 3, one line). The tests check that each is the
typed error; this measures that it comes at once rather than after a retry
loop. Target: each under 3 s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import socket
import tempfile
import time
from pathlib import Path

TARGET_S = 3.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _store(root: Path) -> None:
    from unsee import Unsee
    from unsee.middleware.errors import StoreUnavailable

    try:
        Unsee(home=root / "h", store=f"postgresql://nobody:secret@/db?host={root}/no-such-socket")
    except StoreUnavailable:
        return
    raise AssertionError("an unreachable store was not refused")


def _endpoint(root: Path) -> None:
    from unsee.eval.endpoint import EndpointUnreachable, openai_chat_model

    try:
        openai_chat_model(f"http://127.0.0.1:{_free_port()}/v1")
    except EndpointUnreachable:
        return
    raise AssertionError("an unreachable endpoint was not refused")


def _recorded_home(root: Path) -> Path:
    """A home holding one recorded session ``s`` (a scripted chat agent, one turn)."""
    home = root / "export-home"
    if home.exists():
        return home
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from unsee import Unsee
    from unsee.plugins.model import ScriptedChatModel

    model = ScriptedChatModel(policy=lambda msgs, tools: AIMessage(content="ok"))
    with contextlib.closing(Unsee(home=home)) as u:
        agent = create_agent(model, tools=[], middleware=[u.middleware()], checkpointer=InMemorySaver())
        agent.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": "s"}})
    return home


def _export(root: Path) -> None:
    from unsee.cli import main as cli

    home = _recorded_home(root)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli(["--home", str(home), "export", "s", "--otlp-endpoint",
                        f"http://127.0.0.1:{_free_port()}"])
        except SystemExit as exc:
            code = exc.code
    if code != 3 or "unreachable" not in err.getvalue():
        raise AssertionError(f"unsee export to an unreachable endpoint: exit {code}, {err.getvalue()!r}")


CASES = {"store": _store, "endpoint": _endpoint, "export": _export}


def measure(root: Path, rounds: int = 3) -> dict[str, float]:
    """Best seconds per refusal over ``rounds``."""
    best: dict[str, float] = {}
    for name, case in CASES.items():
        if name == "export":
            _recorded_home(root)  # (recording is not what is measured)
        for _ in range(rounds):
            t0 = time.perf_counter()
            case(root)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="unsee-bench-fail-") as d:
        best = measure(Path(d), args.rounds)
    for name, seconds in best.items():
        print(f"{name}: refused in {seconds:.3f} s, best of {args.rounds} "
              f"(target < {TARGET_S:g} s: {'PASS' if seconds < TARGET_S else 'FAIL'})")


if __name__ == "__main__":
    main()
