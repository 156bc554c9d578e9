"""`dfctl prune` on the local target: old releases go; `current`, a live run's release and
the --keep newest stay; --dry-run removes nothing. In-process through controller.cli.main."""

from __future__ import annotations

import json

from tests.deploy_support import dfctl, make_project, ticker_playbook


def test_prune_keeps_current_live_and_newest(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "proj", git=False)
    pb = ticker_playbook(root)
    monkeypatch.chdir(root)
    releases = []
    run_id = None
    try:
        for i in range(4):
            (root / "ticker" / "version.py").write_text(f"V = {i}\n")
            args = ["deploy", str(pb), "--json"] + ([] if i == 1 else ["--no-launch"])
            code, out, err = dfctl(capsys, *args)
            assert code == 0, err
            doc = json.loads(out)
            releases.append(doc["release"]["release_id"])
            if i == 1:
                run_id = doc["run"]["run_id"]      # a live run on the second release
        a, b, c, d = releases
        code, out, err = dfctl(capsys, "prune", str(pb), "--keep", "1", "--dry-run", "--json")
        assert code == 0, err
        plan = json.loads(out)
        assert plan["current"] == d and sorted(plan["removed"]) == sorted([a, c]) and plan["dry_run"]
        assert plan["kept"] == {d: "current", b: "live-run"}
        on_disk = {p.name for p in (root / ".dfctl-local" / "releases").iterdir()}
        assert {a, b, c, d} <= on_disk                                  # a dry run removes nothing
        code, out, err = dfctl(capsys, "prune", str(pb), "--keep", "1")
        assert code == 0, err
        assert f"removed release {a}" in out and f"kept release {b} (live run)" in out
        assert {p.name for p in (root / ".dfctl-local" / "releases").iterdir()} == {b, d}
        assert (root / ".dfctl-local" / "current").resolve().name == d
    finally:
        if run_id:
            dfctl(capsys, "stop", run_id, "--grace-s", "1")
