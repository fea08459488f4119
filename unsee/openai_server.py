"""A small OpenAI-compatible server for the local model (``python -m unsee.openai_server``).

``POST /v1/chat/completions`` (non-streaming; ``tools`` and ``tool_choice``
supported through constrained decoding) and ``GET /v1/models``. It lets
anything that speaks the OpenAI API — the LLM-judge detector, LangChain's
``ChatOpenAI``, other tools — use the local CPU model offline. One request at a
time (one model).

Used: ``messages`` (content a string, null or a list of text parts),
``max_tokens``/``max_completion_tokens``, ``temperature``, ``stop``, ``tools``,
``tool_choice`` and ``seed``: the local model seeds its sampler from (session,
step), so a request with a ``seed`` runs in session ``openai-seed-<seed>`` and
samples reproducibly; one without gets a fresh session. ``stream: true`` and
``n`` > 1 are refused (400); ``model``, ``top_p``, ``parallel_tool_calls``,
``stream_options``, ``response_format`` and the other fields are ignored.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from unsee.jsonhttp import JSONHandler


def to_langchain(messages: list[dict[str, Any]]) -> list:
    out = []
    for m in messages:
        role, content = m.get("role"), m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role == "system" or role == "developer":
            out.append(SystemMessage(content))
        elif role == "user":
            out.append(HumanMessage(content))
        elif role == "assistant":
            calls = [{"name": c["function"]["name"], "args": json.loads(c["function"].get("arguments") or "{}"),
                      "id": c.get("id"), "type": "tool_call"} for c in m.get("tool_calls") or []]
            out.append(AIMessage(content, tool_calls=calls))
        elif role == "tool":
            out.append(ToolMessage(content, tool_call_id=m.get("tool_call_id", "")))
    return out


def make_server(model: Any, host: str = "127.0.0.1", port: int = 8000, name: str = "smollm2-135m-instruct"):
    lock = threading.Lock()

    class Handler(JSONHandler):
        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            self._send(404, {"error": {"message": "not found"}})

        def do_POST(self):
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, {"error": {"message": "not found"}})
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                msgs = to_langchain(req["messages"])
                if req.get("stream") or int(req.get("n") or 1) != 1:
                    raise ValueError("stream and n > 1 are not supported")
                seed = req.get("seed")
                kwargs: dict[str, Any] = {
                    "session": f"openai-seed-{int(seed)}" if seed is not None else f"openai-{uuid.uuid4().hex[:8]}"}
                if req.get("max_tokens") or req.get("max_completion_tokens"):
                    kwargs["max_tokens"] = int(req.get("max_tokens") or req.get("max_completion_tokens"))
                if req.get("temperature") is not None:
                    kwargs["temperature"] = float(req["temperature"])
                if req.get("stop"):
                    kwargs["stop"] = [req["stop"]] if isinstance(req["stop"], str) else list(req["stop"])
                runnable = model
                if req.get("tools"):  # an unknown tool_choice or an unusable schema: GrammarError (a ValueError)
                    runnable = model.bind_tools(req["tools"], tool_choice=req.get("tool_choice"))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                return self._send(400, {"error": {"message": f"bad request: {e}"}})
            with lock:
                try:
                    ai = runnable.invoke(msgs, **kwargs)
                except Exception as e:  # a ValueError: e.g. the prompt exceeds the model's context
                    bad = isinstance(e, ValueError)
                    why = f"{'bad request' if bad else 'generation failed'}: {e}"
                    return self._send(400 if bad else 500, {"error": {"message": why}})
                finally:
                    model.drop(kwargs["session"])
            message: dict[str, Any] = {"role": "assistant", "content": ai.content or None}
            if ai.tool_calls:
                message["tool_calls"] = [{"id": c["id"], "type": "function",
                                          "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
                                         for c in ai.tool_calls]
            usage = ai.usage_metadata or {}
            return self._send(200, {
                "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": name,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if ai.tool_calls else
                             "length" if ai.response_metadata.get("finish_reason") == "length" else "stop"}],
                "usage": {"prompt_tokens": usage.get("input_tokens", 0),
                          "completion_tokens": usage.get("output_tokens", 0),
                          "total_tokens": usage.get("total_tokens", 0)},
            })

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--model-cache", default=None,
                    help="folder of the converted model (default: $UNSEE_MODEL_CACHE or ~/.unsee/models)")
    ap.add_argument("--model", default="cpu", help="cpu | exllamav2 | path")
    args = ap.parse_args(argv)
    from unsee.plugins.model import LocalChatModel

    model = LocalChatModel.from_spec(args.model, cache_dir=Path(args.model_cache) if args.model_cache else None,
                                     max_tokens=64)
    server = make_server(model, args.host, args.port)
    print(f"serving on http://{args.host}:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
