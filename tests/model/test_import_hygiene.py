"""The local model runtime imports with torch, transformers and tokenizers alone.

A lent GPU machine has its own Python and torch, and neither LangChain,
LangGraph, OpenTelemetry nor pydantic (issue 18): the runtime, its backends and
the conversion must import there. A child process refuses those packages and
imports the runtime's modules; a module that pulls one in at import time fails
here first.
"""

from __future__ import annotations

import subprocess
import sys

#: packages a GPU machine may lack; the runtime must not need them to import
ABSENT = ("langchain", "langchain_core", "langgraph", "opentelemetry", "pydantic", "docker", "openai", "xgrammar",
          "psycopg", "typer", "rich")
#: what a GPU check imports (prompting, chat_model and routing are the LangChain adapters: not these)
RUNTIME = ("exllama_backend", "cpu_backend", "loader", "runtime", "sampling", "sampling_params", "decoding",
           "sessions", "convert", "errors", "smoke", "numerics")

CHILD = """
import importlib.abc, sys
ABSENT = set({absent!r})
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ImportError(f"refused on purpose: {{name}}")
        return None
sys.meta_path.insert(0, Refuse())
import importlib
for m in {runtime!r}:
    importlib.import_module("unsee.plugins.model." + m)
print(sorted({{m.split(".")[0] for m in sys.modules}} & ABSENT))
"""


def test_the_runtime_imports_without_the_agent_stack():
    code = CHILD.format(absent=ABSENT, runtime=RUNTIME)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == "[]"
