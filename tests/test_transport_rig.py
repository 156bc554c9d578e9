"""SSH + pct transports against the rig: real sshd in a namespace, real LXC CTs, pct stand-in.

Byte-exact argv through local -> ssh -> pct -> shell (hypothesis), host-key policy (unknown
refused / accepted with the flag / changed refused), unreachable host within the timeout,
stopped CT, one reused connection reopened after a drop, stdin streaming and big output."""

from __future__ import annotations

import hashlib
import io
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.errors import BadInputError, ContainerStateError, HostKeyError, UnreachableError
from controller.playbook import TargetConfig
from controller.transport.factory import close_all, open_host_transport, open_transport

pytestmark = pytest.mark.rig


def rig_target(rig, host, **kw) -> TargetConfig:
    base = dict(kind="pct", host=host.name, vmid=host.vmid_running, workdir="/workspace/dfctl",
                ssh_config=str(rig.ssh_config_path), connect_timeout_s=5.0)
    base.update(kw)
    return TargetConfig(**base)


@pytest.fixture
def pct(rig, rig_host):
    close_all()
    yield open_transport(rig_target(rig, rig_host))
    close_all()


ARG = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)
SPECIALS = st.sampled_from(["'", '"', "$HOME", "`id`", "\\", "\n", "a b", "*", "-n", "--", "é漢🙂", ";ls", "$(id)", "~"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(st.one_of(ARG, SPECIALS), min_size=1, max_size=6))
def test_argv_reaches_container_byte_exact(pct, args):
    expected = b"".join(a.encode() + b"\0" for a in args)
    direct = pct.run(["printf", "%s\\0", *args], timeout_s=60)
    assert direct.ok, direct.summary()
    assert direct.stdout == expected
    # and one shell level more, inside the CT
    shell = pct.run(["sh", "-c", 'printf "%s\\0" "$@"', "sh", *args], timeout_s=60)
    assert shell.stdout == expected


def test_clean_env_stdin_stream_big_output_and_reuse(pct, rig_host):
    env = pct.run(["env"], timeout_s=60)
    lines = set(env.stdout_text.splitlines())
    assert "HOME=/root" in lines and "LANG=C.UTF-8" in lines
    assert any(ln.startswith("PATH=/usr/local/sbin:/usr/local/bin:") for ln in lines)
    assert not any(ln.startswith(("SSH_", "USER=")) for ln in lines)       # pct's kept env is cleared
    data = os.urandom(3 << 20)
    r = pct.run(["sh", "-c", "sha256sum; head -c 3000000 /dev/zero >&2; head -c 2500000 /dev/zero"],
                stdin=io.BytesIO(data), timeout_s=120)
    assert r.ok and r.stdout.startswith(hashlib.sha256(data).hexdigest().encode())
    assert len(r.stderr) == 3000000 and len(r.stdout) == 2500000 + 68
    host = pct.host
    client = host._client
    assert pct.run(["true"]).ok and host._client is client                 # one reused connection
    rig_host.restart_sshd(drop_sessions=True)                              # the connection drops
    assert pct.run(["echo", "back"], timeout_s=60).stdout == b"back\n"     # reconnected on the next call


def test_stopped_and_absent_ct(rig, rig_host):
    close_all()
    with pytest.raises(ContainerStateError) as exc:
        open_transport(rig_target(rig, rig_host, vmid=rig_host.vmid_stopped)).run(["true"])
    assert exc.value.exit_code == 3
    assert f"CT {rig_host.vmid_stopped} is stopped" in exc.value.message and rig_host.name in exc.value.message
    with pytest.raises(ContainerStateError, match="CT 4242 does not exist"):
        open_transport(rig_target(rig, rig_host, vmid=4242)).run(["true"])
    close_all()


def test_host_key_unknown_refused_then_accepted_changed_refused(rig, rig_host, tmp_path):
    close_all()
    kh = tmp_path / "known_hosts"
    with pytest.raises(HostKeyError) as exc:
        open_host_transport(rig_target(rig, rig_host, known_hosts=str(kh))).run(["true"])
    fp = exc.value.message
    assert "unknown host key" in fp and "SHA256:" in fp and "--accept-new-host-key" in exc.value.hint
    assert exc.value.exit_code == 3
    close_all()
    t = open_host_transport(rig_target(rig, rig_host, known_hosts=str(kh), accept_new_host_key=True))
    assert t.run(["true"]).ok
    assert kh.read_text().startswith(rig_host.address + " ssh-ed25519 ")
    close_all()
    assert open_host_transport(rig_target(rig, rig_host, known_hosts=str(kh))).run(["true"]).ok   # now known
    close_all()
    rig_host.rekey()
    for accept in (False, True):                                            # a changed key: always refused
        with pytest.raises(HostKeyError, match="HOST KEY CHANGED"):
            open_host_transport(rig_target(rig, rig_host, known_hosts=str(kh), accept_new_host_key=accept)).run(["true"])
        close_all()


def test_key_from_ssh_agent_only_and_an_empty_agent_is_a_clear_exit_3(rig, rig_host, tmp_path, monkeypatch):
    """No IdentityFile anywhere and no key under ~/.ssh: the key comes from a real
    ssh-agent (SSH_AUTH_SOCK), as on most operators' machines; with the agent emptied the
    failure names the host, the user and ssh-agent, exit 3."""
    import subprocess

    close_all()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))                       # paramiko's look_for_keys finds nothing
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host agent-only\n  HostName {rig_host.address}\n  User {rig_host.user}\n  Port {rig_host.port}\n")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        wait_until = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < wait_until:
            time.sleep(0.02)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(rig.identity_file)], env=env, check=True, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        target = TargetConfig(kind="ssh", host="agent-only", ssh_config=str(cfg), known_hosts=str(rig.known_hosts_path),
                              connect_timeout_s=5.0)
        r = open_host_transport(target).run(["sh", "-c", "echo agent-auth-ok"])
        assert r.ok and r.stdout.strip() == b"agent-auth-ok"
        close_all()
        subprocess.run(["ssh-add", "-D"], env=env, check=True, capture_output=True)
        with pytest.raises(UnreachableError) as exc:
            open_host_transport(target).run(["true"])
        assert exc.value.exit_code == 3 and "authentication failed" in exc.value.message
        assert "agent-only" in exc.value.message and rig_host.user in exc.value.message
        assert "ssh-agent" in exc.value.hint
    finally:
        close_all()
        agent.terminate()
        agent.wait(10)


def test_unreachable_host_fails_within_timeout(rig, rig_host):
    close_all()
    rig_host.link_down()
    t0 = time.monotonic()
    with pytest.raises(UnreachableError) as exc:
        open_transport(rig_target(rig, rig_host, connect_timeout_s=2.0)).run(["true"])
    assert time.monotonic() - t0 < 6
    assert exc.value.exit_code == 3 and rig_host.name in exc.value.message
    close_all()


def test_no_banner_times_out_exit_3(rig, rig_host):
    close_all()
    rig_host.sigstop_sshd()                     # TCP connects, but no banner ever comes
    t0 = time.monotonic()
    with pytest.raises(UnreachableError) as exc:
        open_host_transport(rig_target(rig, rig_host, connect_timeout_s=1.5)).run(["true"])
    assert time.monotonic() - t0 < 6 and exc.value.exit_code == 3 and rig_host.name in exc.value.message
    close_all()


def test_proxyjump_alias(rig, rig_host, tmp_path):
    """An alias reached through ProxyJump (the jump host is itself from rig's ssh_config):
    the target sees the connection come from the jump host, not from us."""
    close_all()
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host via-jump\n  HostName {rig_host.address}\n  User root\n  ProxyJump {rig_host.name}\n"
                   f"  IdentityFile {rig.identity_file}\n  UserKnownHostsFile {rig.known_hosts_path}\n\n"
                   + rig.ssh_config_path.read_text())
    direct = open_host_transport(rig_target(rig, rig_host)).run(["sh", "-c", "echo $SSH_CONNECTION"])
    jumped = open_host_transport(TargetConfig(kind="ssh", host="via-jump", ssh_config=str(cfg),
                                              connect_timeout_s=5.0)).run(["sh", "-c", "echo $SSH_CONNECTION"])
    assert direct.ok and jumped.ok, jumped.summary()
    assert direct.stdout.split()[0] != rig_host.address.encode()
    assert jumped.stdout.split()[0] == rig_host.address.encode()        # came from the jump host
    close_all()


def test_proxyjump_naming_no_host_is_bad_input(tmp_path):
    # `ProxyJump ,` splits into no hops; the tunnel builder then used a hop it never made
    # (AttributeError on None, exit 1). Refused before any connection (found by mypy).
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host nowhere\n  HostName 10.200.0.9\n  ProxyJump ,\n")
    with pytest.raises(BadInputError) as exc:
        open_host_transport(TargetConfig(kind="ssh", host="nowhere", ssh_config=str(cfg),
                                         connect_timeout_s=1.0)).run(["true"])
    assert exc.value.exit_code == 2 and "ProxyJump" in exc.value.message and "nowhere" in exc.value.message
    close_all()
