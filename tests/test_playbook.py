"""Playbook loading: every shipped playbook loads; bad ones give file: key: problem."""

from pathlib import Path

import pytest

from controller.errors import PlaybookError
from controller.playbook import load_playbook, parse_playbook

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "playbooks").glob("*.toml")), ids=lambda p: p.name)
def test_shipped_playbooks_load(path):
    pb = load_playbook(path)
    assert pb.source == str(path)


def test_user_layout_playbook_matches_the_seeds():
    pb = load_playbook(ROOT / "playbooks" / "proxmox-ct200.toml")
    assert pb.target.kind == "pct" and pb.target.vmid == 200
    assert pb.target.workdir.startswith("/workspace")
    assert pb.watch.baseline_tok_per_s == 21500
    assert pb.watch.gpus_expected == 8


def test_local_playbook_is_the_embedded_default():
    pb = load_playbook(ROOT / "playbooks" / "local.toml")
    assert pb.target.kind == "local"


@pytest.mark.parametrize("text,message", [
    ('[target]\nkind = "pct"\nhost = "h"\nvmid = "abc"', 'ct200.toml: target.vmid: expected an integer, got "abc"'),
    ('[target]\nkind = "pct"\nhost = "h"', "ct200.toml: target.vmid: required"),
    ('[target]\nkind = "docker"', 'ct200.toml: target.kind: expected one of "local", "ssh", "pct", got "docker"'),
    ('[targt]\nkind = "local"', 'ct200.toml: targt: unknown key (did you mean "target"?)'),
    ('[run]\nname = "a b"', "ct200.toml: run.name: expected letters"),
    ('[run]\nargs = "x"', 'ct200.toml: run.args: expected a list, got "x"'),
    ('[watch]\nbaseline_tok_per_s = -1', "ct200.toml: watch.baseline_tok_per_s: expected a positive number"),
    ('[watch]\nprogress_pattern = "tok=(\\\\d+)"', "ct200.toml: watch.progress_pattern: needs a named group"),
    ("target = [", "ct200.toml: not valid TOML"),
])
def test_bad_playbooks_name_file_key_and_problem(text, message):
    with pytest.raises(PlaybookError) as info:
        parse_playbook(text, "playbooks/ct200.toml")
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_non_utf8_playbook():
    with pytest.raises(PlaybookError, match="not valid UTF-8"):
        parse_playbook(b"[run]\nname = \"\xff\"", "x.toml")


def test_missing_playbook_file(tmp_path):
    with pytest.raises(PlaybookError, match="no such playbook file"):
        load_playbook(tmp_path / "nope.toml")


def test_secret_looking_env_is_redacted():
    pb = parse_playbook('[run]\nenv = { HF_TOKEN = "hf_abc", LR = "3" }')
    red = pb.redacted()
    assert red["run"]["env"] == {"HF_TOKEN": "<redacted>", "LR": "3"}
    assert "hf_abc" not in repr(red)
