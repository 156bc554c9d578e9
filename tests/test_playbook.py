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
    pb = parse_playbook('[target]\nkind = "local"\n[run]\nenv = { HF_TOKEN = "hf_abc", LR = "3" }')
    red = pb.redacted()
    assert red["run"]["env"] == {"HF_TOKEN": "<redacted>", "LR": "3"}
    assert "hf_abc" not in repr(red)


LOCAL = '[target]\nkind = "local"\n'
PCT = '[target]\nkind = "pct"\nhost = "h"\nvmid = 200\n'


@pytest.mark.parametrize("text,message", [
    # issue 12 item 11: an empty or truncated playbook must not launch on this machine
    ("", 'x.toml: target: required: a [target] table with kind = "local", "ssh" or "pct"'),
    ("# just a comment\n", "x.toml: target: required"),
    ('[run]\nname = "r"\n', "x.toml: target: required"),
    ('[target]\nworkdir = ".dfctl-local"\n', 'x.toml: target.kind: required: "local", "ssh" or "pct"'),
    (PCT + 'workdir = "/"', 'x.toml: target.workdir: "/" is not allowed'),
    (PCT + 'workdir = "//."', 'x.toml: target.workdir: "/" is not allowed'),
    (PCT + 'workdir = "/workspace/../etc"', "x.toml: target.workdir: '..' is not allowed"),
    (PCT + 'workdir = "/etc/dfctl"', "x.toml: target.workdir: not under /etc (a system directory)"),
    (PCT + 'workdir = "/usr/lib/x"', "x.toml: target.workdir: not under /usr"),
    (LOCAL + 'workdir = "../outside"', "x.toml: target.workdir: '..' is not allowed"),
    (LOCAL + 'workdir = "/"', 'x.toml: target.workdir: "/" is not allowed'),
    (LOCAL + 'python = ""', 'x.toml: target.python: expected an interpreter name or absolute path, got ""'),
    (LOCAL + 'python = "venv/bin/python"', "x.toml: target.python: a path must be absolute"),
    (LOCAL + "[watch]\ngpus_expected = -3", "x.toml: watch.gpus_expected: expected 1..4096, got -3"),
    (LOCAL + "[watch]\ngpus_expected = 100000000000000000", "x.toml: watch.gpus_expected: expected 1..4096"),
    (LOCAL + "[watch]\nstale_log_s = 1e308", "x.toml: watch.stale_log_s: expected at most 604800 seconds"),
    (LOCAL + "[watch]\nbaseline_tok_per_s = 1e-300", "x.toml: watch.baseline_tok_per_s: expected a positive number from 0.001"),
    (LOCAL + "[watch]\nhang_factor = 1e9", "x.toml: watch.hang_factor: expected 1..1000"),
    (LOCAL + "[watch]\nstartup_deadlines_s = { first_step = 0 }", "x.toml: watch.startup_deadlines_s.first_step"),
])
def test_bounds_and_required_keys(text, message):
    with pytest.raises(PlaybookError) as info:
        parse_playbook(text, "x.toml")
    assert message in str(info.value) and "\n" not in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("workdir", ["/workspace/dfctl", "/root/dfctl", "/var/lib/dfctl", "/srv/a/b", "/opt/x"])
def test_sane_workdirs_load(workdir):
    assert parse_playbook(PCT + f'workdir = "{workdir}"', "x.toml").target.workdir == workdir


@pytest.mark.parametrize("name,secret", [
    ("HF_TOKEN", True), ("WANDB_API_KEY", True), ("MY_AUTH", True), ("GITHUB_PAT", True), ("PAT", True),
    ("DB_PASS", True), ("SENTRY_DSN", True), ("AWS_SECRET_ACCESS_KEY", True), ("MYSQL_PWD", True),
    ("OAUTH_BEARER", True), ("PRIVATE_KEY_FILE", True), ("SESSION_COOKIE", True), ("DB_PASSWORD", True),
    ("PATH", False), ("PYTHONPATH", False), ("LR", False), ("WANDB_MODE", False), ("PATCH_SIZE", False),
    ("NCCL_DEBUG", False), ("CUDA_VISIBLE_DEVICES", False), ("PASSES", False),
])
def test_secret_name_rule(name, secret):
    """Issue 12 item 12: the old rule (KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL) missed
    MY_AUTH, GITHUB_PAT, DB_PASS, SENTRY_DSN; short words count only whole (PATH is not PAT)."""
    from controller.playbook import looks_secret

    assert looks_secret(name) is secret


def test_registry_form_holds_no_env_value():
    """Issue 12 item 12: the registry gets names and hashes, never an env value; a value is
    marked secret explicitly by naming it in run.secret_env."""
    from controller.playbook import env_value_hash
    from controller.ship.launch import split_env

    pb = parse_playbook(LOCAL + '[run]\nsecret_env = ["DB_URL"]\n'
                        'env = { MY_AUTH = "secret-DEF", DB_URL = "postgres://u:pw@db", LR = "3" }', "x.toml")
    stored = pb.for_registry()
    assert stored["run"]["env"] == {"MY_AUTH": "<redacted>", "DB_URL": "<redacted>", "LR": env_value_hash("LR", "3")}
    assert "secret-DEF" not in repr(stored) and "pw@db" not in repr(stored) and "'3'" not in repr(stored["run"]["env"])
    assert env_value_hash("LR", "3") == env_value_hash("LR", "3") != env_value_hash("LR", "4")
    plain, secret = split_env(pb, {})
    assert plain == {"LR": "3"} and secret == {"MY_AUTH": "secret-DEF", "DB_URL": "postgres://u:pw@db"}


def test_two_node_playbook_loads_as_a_job():
    pb = load_playbook(ROOT / "playbooks" / "two-nodes-ct200.toml")
    assert pb.is_job and [n.host for n in pb.nodes] == ["pve1", "pve2"]
    assert pb.rdzv_endpoint() == "10.0.0.11:29500"
    assert pb.for_node(1).target.host == "pve2"
    reg = pb.for_registry()
    assert "target" not in reg and reg["nodes"][1]["addr"] == "10.0.0.12"
    assert reg["distributed"]["env"]["NCCL_SOCKET_IFNAME"].startswith("sha256:")   # no env value stored


_NODE = '[[nodes]]\nkind = "pct"\nhost = "h1"\nvmid = 200\naddr = "10.0.0.1"\nworkdir = "/ws"\n'


@pytest.mark.parametrize("text,message", [
    (_NODE + '[[nodes]]\nkind = "pct"\nhost = "h2"\nvmid = "abc"', 'nodes[1].vmid: expected an integer, got "abc"'),
    (_NODE + '[[nodes]]\nkind = "pct"\nhost = "h2"\nvmid = 200\nworkdir = "/ws"', "nodes[1].addr: required for a pct node"),
    (_NODE + '[[nodes]]\nhost = "h2"', "nodes[1].kind: required"),
    (_NODE + '[[nodes]]\nkind = "pct"\nhost = "h2"\naddr = "x"\nworkdir = "/ws"', "nodes[1].vmid: required"),
    (_NODE + '[[nodes]]\nkind = "pct"\nhost = "h2"\nvmid = 200\naddr = "a b"', 'nodes[1].addr: expected a host name'),
    (_NODE + _NODE, "nodes[1]: the same target and workdir as nodes[0]"),
    (_NODE + '[[nodes]]\nkind = "local"\nworkdir = "/usr/x"', "nodes[1].workdir: not under /usr"),
    (_NODE + '[[nodes]]\nkind = "local"\nvmid = 200\nadr = 1', 'nodes[1].adr: unknown key (did you mean "addr"?)'),
    (_NODE + '[target]\nkind = "local"', "nodes: a playbook has either [target] or [[nodes]], not both"),
    (_NODE + '[distributed]\nnproc_per_node = 0', "distributed.nproc_per_node: expected 1..4096, got 0"),
    (_NODE + '[distributed]\nrdzv_backend = "etcd"', 'distributed.rdzv_backend: expected one of "c10d", got "etcd"'),
    (_NODE + '[distributed]\nrdzv_endpoint = "h1"', 'distributed.rdzv_endpoint: expected HOST:PORT, got "h1"'),
    (_NODE + '[distributed]\nenv = { HF_TOKEN = "x" }', "distributed.env.HF_TOKEN: looks like a secret"),
    ('nodes = ["x"]', 'nodes[0]: expected a table, got "x"'),
])
def test_bad_job_playbooks_name_the_node_and_key(text, message):
    with pytest.raises(PlaybookError) as info:
        parse_playbook(text, "playbooks/x.toml")
    assert f"playbooks/x.toml: {message}" in str(info.value)
    assert info.value.exit_code == 2


def test_local_nodes_default_to_loopback():
    pb = parse_playbook('[[nodes]]\nkind = "local"\nworkdir = "a"\n[[nodes]]\nkind = "local"\nworkdir = "b"\n'
                        '[distributed]\nmaster_port = 29611', "x.toml")
    assert pb.rdzv_endpoint() == "127.0.0.1:29611" and pb.nodes[1].reach_addr == "127.0.0.2"


# -- [recover] (issue 25 item 1) ---------------------------------------------------------
RECOVER_OK = LOCAL + '''[run]
args = ["--token-budget", "64", "--steps=40"]
[recover]
on = ["crash", "oom", "hang"]
max_attempts = 2
backoff_s = 5
window_s = 1
[recover.oom]
args = { "--token-budget" = "half", "--steps" = "double", "--seed" = "7" }
[recover.hang]
action = "stop"
[recover.unreachable]
window_s = 600
'''


def test_recover_table_loads_and_resolves_per_kind():
    from controller.playbook import recover_config_from

    pb = parse_playbook(RECOVER_OK, "x.toml")
    r = pb.recover
    assert r.on == ("crash", "oom", "hang") and r.max_attempts == 2 and r.backoff_s == 5
    assert r.for_kind("hang").action == "stop" and r.for_kind("crash").action == "resume"
    assert r.window_for("unreachable") == 600 and r.window_for("crash") == 1
    # the registry's copy (asdict) comes back as the same policy
    assert recover_config_from(pb.for_registry()) == r
    assert recover_config_from({}).on == ()


def test_default_recover_never_acts():
    assert parse_playbook(LOCAL).recover.on == ()


def test_changed_args_half_double_and_values():
    from controller.playbook import changed_args

    pb = parse_playbook(RECOVER_OK, "x.toml")
    out = changed_args(pb.run.args, pb.recover.oom.args)
    assert out == ["--token-budget", "32", "--steps=80", "--seed", "7"]
    # they add up along a chain; half never goes below 1
    assert changed_args(changed_args(["--n", "3"], {"--n": "half"}), {"--n": "half"}) == ["--n", "1"]


@pytest.mark.parametrize("recover,message", [
    ('on = ["crash", "explode"]', 'x.toml: recover.on[1]: unknown finding kind "explode" (known: "crash"'),
    ('on = ["stop"]', "x.toml: recover.on[0]: \"stop\" is an operator's stop, never acted on"),
    ('max_attempts = -1', "x.toml: recover.max_attempts: expected 0..100"),
    ('window_s = -5', "x.toml: recover.window_s: expected 0.."),
    ('targets = ["nope.toml"]', 'x.toml: recover.targets[0]: no such playbook file "nope.toml"'),
    ('[recover.oom]\naction = "restart"', 'x.toml: recover.oom.action: expected one of "resume", "stop", got "restart"'),
    ('[recover.oom]\nargs = { "--token-budget" = "half" }', 'x.toml: recover.oom.args."--token-budget": "half" needs --token-budget with an integer in run.args, got none'),
    ('[recover.oom]\nargs = { "batch" = "8" }', 'x.toml: recover.oom.args."batch": expected a flag such as --token-budget'),
    ('[recover.oom]\nargs = { "--resume-from" = "x" }', 'x.toml: recover.oom.args."--resume-from": set by the resume itself'),
    ('[recover.hang]\naction = "stop"\nargs = { "--x" = "1" }', 'x.toml: recover.hang.args: changes apply to a resume; action is "stop"'),
    ('[recover.oom]\nwindow = 3', 'x.toml: recover.oom.window: unknown key (did you mean "window_s"?)'),
    ('[recover.crashh]\naction = "stop"', 'x.toml: recover.crashh: unknown key (did you mean "crash"?)'),
])
def test_bad_recover_tables_name_the_key(recover, message):
    text = LOCAL + ("[recover]\n" + recover if not recover.startswith("[") else recover)
    with pytest.raises(PlaybookError) as info:
        parse_playbook(text, "x.toml")
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_recover_targets_are_playbooks_next_to_this_one(tmp_path):
    (tmp_path / "other.toml").write_text(LOCAL)
    pb = tmp_path / "pb.toml"
    pb.write_text(LOCAL + '[recover]\non = ["crash"]\ntargets = ["other.toml"]\n')
    assert load_playbook(pb).recover.targets == ("other.toml",)
