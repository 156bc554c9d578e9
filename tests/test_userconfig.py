"""~/.config/dfctl/config.toml defaults and DFCTL_* environment overrides, through dfctl's
main() in-process (tests/cli_support.py; the child's start-up is not the point): the command
line wins over the environment, which wins over the file."""

from __future__ import annotations

from controller.transport.ssh import resolve_endpoint
from tests.cli_support import dfctl_in_process


def dfctl(*args, env):
    return dfctl_in_process(*args, env=env)


def _config(tmp_path, text: str) -> dict:
    (tmp_path / "cfg" / "dfctl").mkdir(parents=True, exist_ok=True)
    (tmp_path / "cfg" / "dfctl" / "config.toml").write_text(text)
    return {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "DFCTL_HOME": str(tmp_path / "home")}


def test_file_gives_defaults_env_overrides_it_flag_overrides_both(tmp_path):
    env = _config(tmp_path, 'playbook = "from-file.toml"\nnotify = "/from/file/notifier"\n')
    assert "from-file.toml: no such playbook file" in dfctl("deploy", "--dry-run", env=env).stderr
    assert "from-env.toml" in dfctl("deploy", "--dry-run", env={**env, "DFCTL_PLAYBOOK": "from-env.toml"}).stderr
    assert "from-flag.toml" in dfctl("deploy", "from-flag.toml", "--dry-run",
                                     env={**env, "DFCTL_PLAYBOOK": "from-env.toml"}).stderr
    # watch --notify: refused up front when missing, so the message shows which one won
    p = dfctl("watch", "x", env=env)
    assert p.returncode == 2 and "--notify /from/file/notifier: not an executable file" in p.stderr
    p = dfctl("watch", "x", env={**env, "DFCTL_NOTIFY": "/from/env"})
    assert "--notify /from/env:" in p.stderr
    assert "DFCTL_NOTIFY" in dfctl("watch", "-h", env=env).stdout


def test_a_bad_config_file_is_one_line_naming_file_and_key(tmp_path):
    for text, words in (('notfy = "x"\n', "unknown key 'notfy'"), ("notify = 3\n", "notify: expected a string"),
                        ("playbook = \n", "not valid TOML")):
        env = _config(tmp_path, text)
        p = dfctl("runs", env=env)
        assert p.returncode == 2 and p.stderr.startswith(f"dfctl: error: {tmp_path}/cfg/dfctl/config.toml: ")
        assert words in p.stderr and "Traceback" not in p.stderr


def test_host_aliases_expand_before_ssh_config(tmp_path, monkeypatch):
    env = _config(tmp_path, '[hosts]\npve = "admin@10.1.2.6:2222"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", env["XDG_CONFIG_HOME"])
    ep = resolve_endpoint("pve", ssh_config=None)
    assert (ep.user, ep.hostname, ep.port) == ("admin", "10.1.2.6", 2222)
    assert resolve_endpoint("other-host").hostname == "other-host"
