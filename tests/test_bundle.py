"""Bundle: .gitignore-aware selection (git and fallback), manifest, content id, tar stream."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile

import pytest

from controller.bundle import MANIFEST_NAME, SHA256SUMS_NAME, build_bundle, select_files
from controller.errors import BadInputError
from controller.playbook import BundleConfig
from tests.deploy_support import make_project

EXTRA = {
    "ticker/data.log": b"ignored by *.log\n",
    "ticker/__pycache__/x.cpython-311.pyc": b"\0bytecode",
    "ticker/sub/mod.py": b"X = 1\n",
    "ticker/run.sh": b"#!/bin/sh\necho hi\n",
    "data/big.bin": b"\0" * 100,
    "other/not_in_bundle.py": b"",
}


@pytest.mark.parametrize("git", [True, False], ids=["git", "no-git"])
def test_selection_honours_gitignore(tmp_path, git):
    root = make_project(tmp_path / "p", git=git, extra_files=EXTRA)
    (root / "ticker" / "untracked.py").write_text("Y = 2\n")   # untracked but not ignored: ships
    files = select_files(root, BundleConfig(paths=("ticker",), exclude=("run.sh",)))
    assert files == ["ticker/__init__.py", "ticker/__main__.py", "ticker/sub/mod.py", "ticker/untracked.py"]


def test_content_id_tracks_bytes_and_exec_bit(tmp_path):
    root = make_project(tmp_path / "p", git=False, extra_files={"ticker/run.sh": b"#!/bin/sh\n"})
    cfg = BundleConfig(paths=("ticker",))
    a, b = build_bundle(root, cfg), build_bundle(root, cfg)
    assert a.content_id == b.content_id and len(a.content_id) == 16
    (root / "ticker" / "run.sh").chmod(0o755)
    c = build_bundle(root, cfg)
    assert c.content_id != a.content_id
    (root / "ticker" / "__init__.py").write_text("# changed\n")
    d = build_bundle(root, cfg)
    assert d.content_id not in (a.content_id, c.content_id)


def test_tar_stream_is_deterministic_and_verifies(tmp_path):
    root = make_project(tmp_path / "p", git=True, extra_files={"ticker/sub/mod.py": "é = 1\n".encode()})
    bundle = build_bundle(root, BundleConfig(paths=("ticker",)))
    one, two = io.BytesIO(), io.BytesIO()
    bundle.tar_to(one)
    os.utime(root / "ticker" / "__main__.py", (1, 1))     # mtimes must not matter
    build_bundle(root, BundleConfig(paths=("ticker",))).tar_to(two)
    assert one.getvalue() == two.getvalue()
    out = tmp_path / "x"
    out.mkdir()
    with tarfile.open(fileobj=io.BytesIO(one.getvalue())) as tar:
        names = tar.getnames()
        tar.extractall(out, filter="data")
    assert names[:2] == [MANIFEST_NAME, SHA256SUMS_NAME]
    check = subprocess.run(["sha256sum", "-c", SHA256SUMS_NAME], cwd=out, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == len(bundle.files) == 3


def test_missing_path_is_bad_input(tmp_path):
    root = make_project(tmp_path / "p", git=False)
    with pytest.raises(BadInputError, match="nope"):
        build_bundle(root, BundleConfig(paths=("nope",)))
