"""The code that a deploy ships: selected files, a manifest of sha256 per file, a content id.

The content id is the hash of the manifest, so two bundles with the same files, bytes and
executable bits have the same id and a redeploy of unchanged code can be recognised from
one `test -d releases/<id>` on the target -- nothing is transferred. The tar stream is
deterministic (sorted names, fixed mtimes, uid/gid 0) so its bytes depend only on content.

File selection honours .gitignore: inside a git work tree `git ls-files -co
--exclude-standard` answers exactly as git would; elsewhere every .gitignore of the tree is
matched with pathspec's GitIgnoreSpec (negations, `**`, nested files). Bytecode caches and VCS folders never ship.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import os
import stat
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterable

import pathspec

from controller.errors import BadInputError
from controller.playbook import BundleConfig

MANIFEST_NAME = ".dfctl-manifest.json"
SHA256SUMS_NAME = ".dfctl-sha256sums"
TAR_MTIME_S = 1_000_000_000          # fixed, and after 1970 so tar prints no "implausibly old" warning
_ALWAYS_EXCLUDED = ("__pycache__", "*.pyc", "*.pyo", ".git", ".hg", ".svn", ".DS_Store")


@dataclass(frozen=True)
class BundleFile:
    relpath: str          # POSIX path relative to the project root (also the path in the release)
    size_bytes: int
    executable: bool
    sha256: str


@dataclass(frozen=True)
class Bundle:
    """What one deploy ships. `content_id` names the release directory on the target."""

    root: Path
    files: tuple[BundleFile, ...]
    content_id: str

    @property
    def total_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)

    def manifest(self) -> dict:
        return {"format": 1, "files": [
            {"path": f.relpath, "size": f.size_bytes, "executable": f.executable, "sha256": f.sha256}
            for f in self.files]}

    def manifest_bytes(self) -> bytes:
        return _canonical(self.manifest())

    def sha256sums(self) -> bytes:
        """`sha256sum -c` input, verified on the target after the transfer."""
        return "".join(f"{f.sha256}  {f.relpath}\n" for f in self.files).encode()

    def tar_to(self, fh: IO[bytes]) -> None:
        """Write the release as a tar stream: manifest files first, then files in order."""
        with tarfile.open(fileobj=fh, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for name, data in ((MANIFEST_NAME, self.manifest_bytes()), (SHA256SUMS_NAME, self.sha256sums())):
                tar.addfile(_info(name, len(data), 0o644), io.BytesIO(data))
            seen_dirs: set[str] = set()
            for f in self.files:
                parts = f.relpath.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in seen_dirs:
                        seen_dirs.add(d)
                        tar.addfile(_info(d, 0, 0o755, tarfile.DIRTYPE))
                with open(self.root / f.relpath, "rb") as src:
                    tar.addfile(_info(f.relpath, f.size_bytes, 0o755 if f.executable else 0o644), src)

    def tar_file(self) -> tuple[IO[bytes], int]:
        """The tar stream spooled (memory up to 64 MiB, then disk), rewound, and its size."""
        spool = tempfile.SpooledTemporaryFile(max_size=64 << 20)
        self.tar_to(spool)
        size = spool.tell()
        spool.seek(0)
        return spool, size


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _info(name: str, size: int, mode: int, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.type, ti.mtime = size, mode, kind, TAR_MTIME_S
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    return ti


# -- selection ----------------------------------------------------------------------------
def project_root(start: str | Path | None = None) -> Path:
    """The git work tree holding `start` (default: cwd), else `start` itself."""
    here = Path(start or os.getcwd()).resolve()
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return here
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else here


def _in_git(root: Path) -> bool:
    try:
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and r.stdout.strip() == "true"


def _git_files(root: Path, paths: Iterable[str]) -> list[str]:
    r = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z", "--", *paths],
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        raise BadInputError(f"{root}: `git ls-files` failed: {r.stderr.decode(errors='replace').strip()}")
    return [p for p in r.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


class _IgnoreRules:
    """Every .gitignore of a tree that is not a git work tree, matched as git matches them
    (pathspec's GitIgnoreSpec: `!` negations, `**`, anchoring, dir-only patterns): a
    .gitignore applies below its own directory, a deeper file's verdict wins over a
    shallower one's, and nothing below an ignored directory comes back (git's rule)."""

    def __init__(self, root: Path):
        self.root = root
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}

    def _spec(self, rel_dir: str) -> "pathspec.GitIgnoreSpec | None":
        if rel_dir not in self._specs:
            gi = self.root / rel_dir / ".gitignore" if rel_dir else self.root / ".gitignore"
            try:
                lines = gi.read_text(errors="replace").splitlines() if gi.is_file() else None
            except OSError:
                lines = None
            self._specs[rel_dir] = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        return self._specs[rel_dir]

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Is `rel` (POSIX, relative to the root) ignored by the .gitignore files above it?"""
        parts = rel.split("/")
        for depth in range(len(parts) - 1, -1, -1):          # deepest .gitignore first
            spec = self._spec("/".join(parts[:depth]))
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            verdict = spec.check_file(sub).include
            if verdict is not None:
                return bool(verdict)
        return False


def _walk_files(root: Path, paths: Iterable[str]) -> list[str]:
    rules = _IgnoreRules(root)
    out = []
    for p in paths:
        base = root / p
        if base.is_file():
            if not rules.ignored(p, is_dir=False):
                out.append(p)
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            prefix = "" if rel_dir == "." else rel_dir + "/"
            dirnames[:] = sorted(d for d in dirnames if not rules.ignored(prefix + d, is_dir=True))
            out.extend(prefix + f for f in filenames if not rules.ignored(prefix + f, is_dir=False))
    return out


def select_files(root: Path, config: BundleConfig) -> list[str]:
    """Relative POSIX paths that make up the bundle (sorted, regular files only)."""
    for p in config.paths:
        if not (root / p).exists():
            raise BadInputError(f"bundle.paths: {p!r} does not exist under {root}")
    names = _git_files(root, config.paths) if _in_git(root) else _walk_files(root, config.paths)
    keep = []
    for rel in sorted(set(names)):
        parts = rel.split("/")
        if any(fnmatch.fnmatchcase(c, pat) for c in parts for pat in _ALWAYS_EXCLUDED):
            continue
        if any(fnmatch.fnmatchcase(rel, pat) or fnmatch.fnmatchcase(parts[-1], pat) for pat in config.exclude):
            continue
        full = root / rel
        try:
            st = full.lstat()
        except FileNotFoundError:      # tracked but deleted in the work tree
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if "\n" in rel or "\\" in rel:
            raise BadInputError(f"bundle: {rel!r}: file names with newlines or backslashes cannot be shipped")
        keep.append(rel)
    return keep


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks (a release's files, a shipped tool)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_bundle(root: str | Path, config: BundleConfig) -> Bundle:
    """Select, hash and name the bundle. Raises BadInputError for a missing path or no files."""
    root = Path(root).resolve()
    rels = select_files(root, config)
    if not rels:
        raise BadInputError(f"bundle: no files selected from {', '.join(config.paths)} under {root}")
    files = []
    for rel in rels:
        full = root / rel
        st = full.stat()
        files.append(BundleFile(rel, st.st_size, bool(st.st_mode & 0o111), sha256_file(full)))
    tmp = Bundle(root, tuple(files), "")
    content_id = hashlib.sha256(tmp.manifest_bytes()).hexdigest()[:16]
    return Bundle(root, tuple(files), content_id)


def local_git_state(root: str | Path) -> tuple[str | None, bool | None]:
    """(HEAD commit, dirty?) of the project, or (None, None) outside git."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        if head.returncode != 0:
            return None, None
        st = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    return head.stdout.strip(), bool(st.stdout.strip())


class ProgressReader(io.RawIOBase):
    """A read-only stream that reports bytes read (drives the transfer progress bar)."""

    def __init__(self, inner: IO[bytes], on_bytes: Callable[[int], None]):
        self.inner = inner
        self.on_bytes = on_bytes

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        if data:
            self.on_bytes(len(data))
        return data

    def readinto(self, b: memoryview) -> int:   # type: ignore[override]  # io hands it a memoryview
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)
