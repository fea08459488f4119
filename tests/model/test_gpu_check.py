"""The parts of scripts/gpu_check.py that need no GPU and no network: the wheel list, the
split GGUF, the source digest, the build lock, the report."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gc():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gpu_check", None)


def test_the_carried_wheels_are_what_step_b_needs_less_the_image(gc):
    """[b] is the closure of B_ROOTS (this environment's metadata, Python 3.12 markers) less the
    image's packages: a dependency added to unsee or to the agent stack shows up here
    (`python scripts/gpu_check.py lock` rewrites the list)."""
    import importlib.metadata as md

    pins = dict(r.split("==") for r in gc.read_wheel_list()["b"])  # pinned: prepare downloads these
    installed = {}
    for name in pins:
        try:
            installed[name] = md.version(name)
        except md.PackageNotFoundError:
            installed[name] = None
    moved = {n: (v, installed[n]) for n, v in pins.items() if installed[n] != v}
    if moved:  # a fresh install resolved newer versions than the list was made from
        pytest.skip(f"installed versions differ from gpu-wheels.txt ({moved}): run `python scripts/gpu_check.py lock`")
    assert set(pins) == set(gc.wheel_closure())


def test_the_carried_wheels_leave_the_machines_own_stack_alone(gc):
    image = gc.image_packages()
    assert {"torch", "transformers", "tokenizers", "safetensors", "pytest", "ninja", "numpy"} <= image
    carried = {gc.canonical(r.split("==")[0]) for section in ("a", "b") for r in gc.read_wheel_list()[section]}
    assert not carried & {"torch", "transformers", "tokenizers", "safetensors", "numpy", "triton"}
    assert "exllamav2" in carried and "pydantic" in carried and "xgrammar" in carried


def test_wheel_list_errors_name_the_line(gc, tmp_path):
    bad = tmp_path / "w.txt"
    bad.write_text("# c\nfoo==1\n")
    with pytest.raises(gc.CheckError, match=r"w.txt:2: a requirement before any \[section\]"):
        gc.read_wheel_list(bad)
    good = tmp_path / "g.txt"
    good.write_text("[a]\nx==1  # why\n[image]\np q\nr\n")
    assert gc.read_wheel_list(good) == {"a": ["x==1"], "image": ["p", "q", "r"]}


def test_split_and_join_round_trip(gc, tmp_path):
    src = tmp_path / "blob"
    data = bytes(range(256)) * 1000
    src.write_bytes(data)
    parts = gc.split_file(src, [(tmp_path / "a" / "p1", 100_000), (tmp_path / "b" / "p2", None)])
    assert [p["size"] for p in parts] == [100_000, len(data) - 100_000]
    sha = hashlib.sha256(data).hexdigest()
    pairs = [(tmp_path / "a" / "p1", parts[0]), (tmp_path / "b" / "p2", parts[1])]
    out = gc.join_parts(pairs, tmp_path / "joined", sha256=sha)
    assert out.read_bytes() == data


@pytest.mark.parametrize("fault, message", [
    ("missing", "is missing"),
    ("altered", "not the part prepare wrote"),
    ("truncated", "not the part prepare wrote"),
])
def test_join_refuses_a_bad_part_and_leaves_no_file(gc, tmp_path, fault, message):
    src = tmp_path / "blob"
    src.write_bytes(b"x" * 5000 + b"y" * 5000)
    parts = gc.split_file(src, [(tmp_path / "p1", 5000), (tmp_path / "p2", None)])
    p2 = tmp_path / "p2"
    if fault == "missing":
        p2.unlink()
    elif fault == "altered":
        p2.write_bytes(b"z" * 5000)
    else:
        p2.write_bytes(b"y" * 4000)
    with pytest.raises(gc.CheckError, match=message):
        gc.join_parts([(tmp_path / "p1", parts[0]), (p2, parts[1])], tmp_path / "joined",
                      sha256=hashlib.sha256(src.read_bytes()).hexdigest())
    assert not (tmp_path / "joined").exists()


def test_split_refuses_parts_shorter_than_the_file(gc, tmp_path):
    src = tmp_path / "blob"
    src.write_bytes(b"abc" * 10)
    with pytest.raises(gc.CheckError, match="longer than its parts"):
        gc.split_file(src, [(tmp_path / "p1", 10)])


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for d in ("unsee", "plugins", "middleware", "sandbox"):
        shutil.copytree(ROOT / d, root / d, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_source_digest_follows_the_package_files(gc, tmp_path):
    root = _tree(tmp_path)
    first = gc.source_digest(root)
    assert gc.source_digest(root) == first
    (root / "plugins" / "model" / "__pycache__").mkdir(exist_ok=True)
    (root / "plugins" / "model" / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert gc.source_digest(root) == first  # caches are not sources
    smoke = root / "plugins" / "model" / "smoke.py"
    smoke.write_text(smoke.read_text() + "\n# edited\n")
    assert gc.source_digest(root) != first


def test_a_stale_build_lock_is_found(gc, tmp_path):
    assert gc.stale_lock(tmp_path) is None
    (tmp_path / "exllamav2_ext").mkdir()
    (tmp_path / "exllamav2_ext" / "lock").touch()
    assert gc.stale_lock(tmp_path) == tmp_path / "exllamav2_ext" / "lock"


def test_a_step_without_its_prepared_folder_stops_with_a_line(gc, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gc, "GPU", tmp_path / ".gpu")
    assert gc.main(["a", "--dry-run", "--out", str(tmp_path / "out")]) == 1
    report = json.loads((tmp_path / "out" / "gpu-check-a.json").read_text())
    assert report["failed"] and report["items"][-1]["name"] == "stopped"
    assert "run `bash scripts/gpu-check.sh prepare`" in report["items"][-1]["note"]
    assert "FAIL stopped" in capsys.readouterr().out


def test_a_folder_prepared_from_another_tree_is_refused(gc, tmp_path, monkeypatch):
    gpu = tmp_path / ".gpu"
    (gpu / "a").mkdir(parents=True)
    (gpu / "a" / "manifest.json").write_text(json.dumps({"files": {}, "source_digest": "0" * 64}))
    monkeypatch.setattr(gc, "GPU", gpu)
    with pytest.raises(gc.CheckError, match="prepared from another tree"):
        gc.load_manifest("a")


def test_the_report_is_written_as_it_goes(gc, tmp_path):
    r = gc.Report("a", tmp_path, dry_run=True)
    r.add("environment", None, {"torch": "x"})
    r.add("causal prefill", True, {"rel": 1e-6})
    doc = json.loads((tmp_path / "gpu-check-a.json").read_text())
    assert not doc["failed"] and [i["name"] for i in doc["items"]] == ["environment", "causal prefill"]
    r.add("extension build", False, note="nvcc: error")
    assert json.loads((tmp_path / "gpu-check-a.json").read_text())["failed"]
    md = (tmp_path / "gpu-check-a.md").read_text()
    assert md.startswith("# gpu-check a (dry run)") and "- FAIL extension build (nvcc: error)" in md


def test_a_build_past_its_timeout_is_killed_with_its_children(gc, tmp_path):
    """ninja runs each compile in a process group of its own, in the child's session: the
    timeout ends them all."""
    import os
    import time as _time

    pidfile = tmp_path / "grandchild"
    code = (f"import subprocess, sys; p = subprocess.Popen(['sleep', '60'], process_group=0); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); p.wait()")
    with open(tmp_path / "log", "w") as log:
        rc = gc.run_bounded([sys.executable, "-c", code], env=dict(os.environ), log=log, timeout=2, cwd=tmp_path)
    assert rc == "timeout"  # (the child sleeps 60 s: only the timeout ends it)
    grandchild = int(pidfile.read_text())
    for _ in range(50):  # reaped by init once killed
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        _time.sleep(0.1)
    else:
        pytest.fail("the grandchild outlived the timeout")
    with open(tmp_path / "log2", "w") as log:
        assert gc.run_bounded([sys.executable, "-c", "raise SystemExit(3)"], env=dict(os.environ), log=log,
                              timeout=30, cwd=tmp_path) == 3


def test_wheels_installed_before_are_left_alone(gc, tmp_path, monkeypatch):
    """Reinstalling exllamav2 would give its sources new times: ninja would build it again."""
    import zipfile

    gpu = tmp_path / ".gpu"
    (gpu / "a" / "wheels").mkdir(parents=True)
    wheel = gpu / "a" / "wheels" / "tiny_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("tiny_pkg/__init__.py", "X = 1\n")
        z.writestr("tiny_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tiny-pkg\nVersion: 1.0\n")
        z.writestr("tiny_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("tiny_pkg-1.0.dist-info/RECORD", "")
    monkeypatch.setattr(gc, "GPU", gpu)
    site = tmp_path / "site"
    assert gc.install_wheels("a", site) == [wheel.name]
    init = site / "tiny_pkg" / "__init__.py"
    stamp = init.stat().st_mtime_ns
    assert gc.install_wheels("a", site) == []
    assert init.stat().st_mtime_ns == stamp


def test_the_cuda_toolkit_and_cublas_headers_are_found(gc, tmp_path, monkeypatch):
    """torch guesses /usr/local for /usr/local/bin/nvcc; the build needs the folder with the
    headers, and cuBLAS's from pip's nvidia package where the toolkit has none."""
    monkeypatch.delenv("CUDA_HOME", raising=False)
    bare, full = tmp_path / "local", tmp_path / "cuda-13.0"
    (bare / "bin").mkdir(parents=True)
    (full / "include").mkdir(parents=True)
    (full / "include" / "cuda_runtime.h").touch()
    assert gc.cuda_home([str(bare), str(full)]) == str(full)
    assert gc.cuda_home([str(bare)]) is None
    monkeypatch.setenv("CUDA_HOME", "/somewhere")
    assert gc.cuda_home([str(full)]) == "/somewhere"
    site = tmp_path / "site"
    (site / "nvidia" / "cu13" / "include").mkdir(parents=True)
    (site / "nvidia" / "cu13" / "include" / "cublas_v2.h").touch()
    assert gc.cublas_include(str(full), [str(site)]) == str(site / "nvidia" / "cu13" / "include")
    (full / "include" / "cublas_v2.h").touch()
    assert gc.cublas_include(str(full), [str(site)]) is None
