"""Byte-level scans of files, trees and blobs."""

from __future__ import annotations

import hashlib
import os
import socket
import sys

import pytest

from unsee.plugins.erasure.forms import count_forms, target_forms
from unsee.plugins.erasure.scan import scan_bytes, scan_file, scan_tree, sha256_file, sqlite_files

FORMS = target_forms("4417-2231")


@pytest.mark.parametrize("chunk", [1, 5, 9, 17, 4096, 1 << 20])
def test_scan_file_finds_copies_across_chunk_boundaries_once(tmp_path, chunk):
    data = b"".join(b"x" * n + b"4417-2231" for n in range(30)) + "4417-2231".encode("utf-16-le")
    path = tmp_path / "blob"
    path.write_bytes(data)
    hit = scan_file(path, FORMS, chunk_size=chunk)
    assert hit.copies == 31
    assert hit.forms == count_forms(data, FORMS) == {**dict.fromkeys(hit.forms, 0), "utf-8": 30, "utf-16-le": 1}
    assert hit.path == path


def test_scan_bytes_labels_the_blob():
    hit = scan_bytes("layer.tar/app/log.txt", b"pay 4417 2231 now", FORMS)
    assert (str(hit.path), hit.copies, hit.forms["no-separators"]) == ("layer.tar/app/log.txt", 1, 1)


def test_scan_tree(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "hit.txt").write_bytes(b"4417-2231\n4417-2231")
    (tmp_path / "a" / "clean.txt").write_bytes(b"nothing here")
    (tmp_path / "b.json").write_bytes(b'{"card": "4417 2231"}')
    result = scan_tree(tmp_path, FORMS)
    assert result.files_scanned == 3
    assert {p.path.name: p.copies for p in result.hits} == {"hit.txt": 2, "b.json": 1}
    assert result.copies == 3 and result.unreadable == []


def test_scan_tree_of_one_file_and_of_nothing(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"4417-2231")
    assert scan_tree(f, FORMS).copies == 1
    with pytest.raises(FileNotFoundError):
        scan_tree(tmp_path / "missing", FORMS)


def test_scan_tree_symlinks(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"4417-2231")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link-file").symlink_to(outside / "secret")
    (root / "link-dir").symlink_to(outside)
    (root / "loop").symlink_to(root)
    (root / "dangling").symlink_to(tmp_path / "gone")
    assert scan_tree(root, FORMS).files_scanned == 0
    followed = scan_tree(root, FORMS, follow_symlinks=True)
    assert followed.copies == 1 and followed.files_scanned == 1  # one file reached by two links, counted once
    assert followed.unreadable == []


@pytest.mark.skipif(sys.platform == "win32", reason="posix special files")
def test_scan_tree_skips_fifos_and_sockets(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "sock"))
        (tmp_path / "f").write_bytes(b"4417-2231")
        result = scan_tree(tmp_path, FORMS)
    finally:
        sock.close()
    assert result.files_scanned == 1 and result.copies == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_scan_tree_reports_unreadable_files(tmp_path):
    locked = tmp_path / "locked"
    locked.write_bytes(b"4417-2231")
    locked.chmod(0)
    (tmp_path / "open").write_bytes(b"4417-2231")
    try:
        result = scan_tree(tmp_path, FORMS)
    finally:
        locked.chmod(0o600)
    assert result.unreadable == [locked]
    assert result.copies == 1


def test_sqlite_files(tmp_path):
    db = tmp_path / "x.db"
    assert sqlite_files(db) == []
    db.write_bytes(b"")
    (tmp_path / "x.db-wal").write_bytes(b"")
    (tmp_path / "x.db-journal").write_bytes(b"")
    assert sqlite_files(db) == [db, tmp_path / "x.db-wal", tmp_path / "x.db-journal"]


def test_sha256_file(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"abc" * 1_000_000)
    assert sha256_file(f) == hashlib.sha256(b"abc" * 1_000_000).hexdigest()


def test_scan_tree_lists_a_file_that_fails_to_read(tmp_path, monkeypatch):
    from unsee.plugins.erasure import scan

    (tmp_path / "bad").write_bytes(b"4417-2231")
    (tmp_path / "good").write_bytes(b"4417-2231")
    real = scan.scan_file

    def flaky(path, forms, **kw):
        if path.name == "bad":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, forms, **kw)

    monkeypatch.setattr(scan, "scan_file", flaky)
    result = scan_tree(tmp_path, FORMS)
    assert result.unreadable == [tmp_path / "bad"] and result.copies == 1 and result.files_scanned == 1


def test_a_begun_isolated_scan_answers_what_scan_isolated_does(tmp_path):
    from unsee.plugins.erasure.isolated import scan_isolated, start_scan

    db = tmp_path / "x.sqlite"
    db.write_bytes(b"head 4417-2231 and 4417 2231 tail" * 3)
    pending = start_scan([str(db), str(tmp_path / "missing.db")], "4417-2231")
    assert pending() == scan_isolated([str(db)], "4417-2231")
    assert start_scan([], "4417-2231")() == {}


def test_prefetched_scans_are_settled_by_add_files(tmp_path):
    from unsee.plugins.erasure.forms import target_forms
    from unsee.plugins.erasure.routes import Route, RouteAudit, Scope, prefetch_byte_scans

    db = tmp_path / "x.sqlite"
    db.write_bytes(b"4417-2231 " * 4)

    class Files(Route):
        name, holds, method = "test.files", "a file", "none"

        def files(self, scope=None):
            return [db]

        def audit(self, scope):
            out = self._audit()
            out.add_files(self.files(), scope)
            return out

        def erase(self, scope):
            return []

    scope = Scope("s", "4417-2231", target_forms("4417-2231"))
    prefetch_byte_scans(scope, [Files()])
    assert scope.pending_scans  # the child reads while this process goes on
    assert Files().audit(scope).byte_copies == {str(db): 4} and not scope.pending_scans
    prefetch_byte_scans(scope, [Files()])
    prefetch_byte_scans(scope, [Files()])  # an unsettled scan is reaped, not leaked
    assert len(scope.pending_scans) == 1
    scope.settle()
    assert scope.byte_scans == {str(db): scope.byte_scans[str(db)]} and scope.byte_scans[str(db)]["copies"] == 4
