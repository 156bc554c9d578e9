"""Bundle: .gitignore-aware selection (git and fallback), manifest, content id, tar stream."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile

import pytest

from controller.errors import BadInputError
from controller.playbook import BundleConfig
from controller.ship.bundle import MANIFEST_NAME, SHA256SUMS_NAME, build_bundle, select_files
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


GITIGNORE_TREE = {
    ".gitignore": b"*.log\n!keep.log\n/build/\n**/tmp_*\n",
    "ticker/keep.log": b"re-included by the root's !keep.log\n",
    "ticker/noise.log": b"ignored\n",
    "ticker/sub/.gitignore": b"gen_*.py\n!gen_keep.py\n*.log\n",
    "ticker/sub/gen_a.py": b"",
    "ticker/sub/gen_keep.py": b"",
    "ticker/sub/keep.log": b"the nested *.log wins over the root's !keep.log\n",
    "ticker/sub/deep/tmp_x.py": b"",
    "ticker/build/x.py": b"not the anchored /build/: ships\n",
    "build/y.py": b"",
    "ticker/cache/.gitignore": b"*\n!.gitignore\n",
    "ticker/cache/blob.bin": b"",
}


def test_tree_without_git_selects_what_git_itself_selects(tmp_path):
    """The non-git reading of .gitignore (pathspec) against real git on the same tree:
    negations, nested .gitignore files, `**`, anchored and directory patterns. Before, the
    fallback dropped every `!` line and read only the top-level file."""
    plain = make_project(tmp_path / "plain", git=False, extra_files=GITIGNORE_TREE)
    (plain / ".gitignore").write_bytes(GITIGNORE_TREE[".gitignore"])
    tracked = make_project(tmp_path / "git", git=False, extra_files=GITIGNORE_TREE)
    (tracked / ".gitignore").write_bytes(GITIGNORE_TREE[".gitignore"])
    subprocess.run(["git", "init", "-q", str(tracked)], check=True)
    cfg = BundleConfig(paths=("ticker", "build"))
    by_git = select_files(tracked, cfg)
    assert "ticker/keep.log" in by_git and "ticker/sub/gen_keep.py" in by_git      # git's own answer
    assert select_files(plain, cfg) == by_git
