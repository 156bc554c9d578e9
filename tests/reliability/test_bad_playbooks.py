"""Hypothesis-generated bad playbooks through the real CLI: `dfctl deploy BAD.toml --dry-run`
and `dfctl doctor BAD.toml` always answer with ONE clear message naming the file, exit 2,
and never a traceback. Each example is a valid playbook with exactly one mutation that
makes it invalid (wrong type, missing key, unknown key, huge value, non-UTF-8, deep
nesting, broken TOML), so every example must be refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.deploy_support import dfctl as dfctl_inproc
from tests.deploy_support import only_error_doc

ROOT = Path(__file__).resolve().parents[2]

BASE = {
    "target": {"kind": "pct", "host": "pve1", "vmid": 200, "workdir": "/workspace/dfctl",
               "python": "python3", "connect_timeout_s": 5.0},
    "bundle": {"paths": ["trainer"]},
    "run": {"name": "tiny", "module": "trainer", "args": ["--steps", "10"], "env": {"WANDB_MODE": "offline"}},
    "watch": {"interval_s": 2.0, "baseline_tok_per_s": 21500.0},
}
# (section, key) -> a value of a type the field never accepts
WRONG_TYPES = {
    ("target", "vmid"): st.one_of(st.text(max_size=8), st.booleans(), st.floats(allow_nan=False), st.just([200])),
    ("target", "kind"): st.one_of(st.integers(), st.text(max_size=6).filter(lambda s: s not in ("local", "ssh", "pct"))),
    ("target", "connect_timeout_s"): st.one_of(st.text(max_size=5), st.booleans(), st.just({"a": 1})),
    ("target", "port"): st.one_of(st.text(max_size=5), st.floats(allow_nan=False)),
    ("bundle", "paths"): st.one_of(st.text(max_size=5), st.integers(), st.just([1, 2])),
    ("run", "args"): st.one_of(st.text(max_size=5), st.just([1]), st.just([["x"]])),
    ("run", "env"): st.one_of(st.just(["A"]), st.just({"A": 1}), st.just({"A": {"B": "c"}})),
    ("watch", "interval_s"): st.one_of(st.text(max_size=5), st.just([1.0])),
    ("watch", "startup_deadlines_s"): st.just({"first_step": "soon"}),
}
HUGE = st.sampled_from([
    ("target", "vmid", 10**30), ("target", "port", 2**63 - 1), ("target", "vmid", -1),
    ("watch", "interval_s", 1e300), ("watch", "regression_threshold_pct", 1e9),
    ("run", "name", "r" * 200_000), ("target", "connect_timeout_s", 1e12),
    ("watch", "regression_windows", -(2**62)),
])
KEYNAME = st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if v == v and abs(v) != float("inf") else "nan"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def to_toml(doc: dict) -> str:
    out = []
    for sec, table in doc.items():
        if isinstance(table, dict):
            out.append(f"[{sec}]")
            out += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
        else:
            out.insert(0, f"{json.dumps(sec)} = {toml_value(table)}")
    return "\n".join(out) + "\n"


def fresh() -> dict:
    return json.loads(json.dumps(BASE))


@st.composite
def bad_playbook(draw) -> bytes:
    kind = draw(st.sampled_from(["wrong_type", "missing", "unknown", "huge", "non_utf8", "deep", "broken"]))
    doc = fresh()
    if kind == "wrong_type":
        sec, key = draw(st.sampled_from(sorted(WRONG_TYPES)))
        doc[sec][key] = draw(WRONG_TYPES[(sec, key)])
    elif kind == "missing":
        del doc["target"][draw(st.sampled_from(["host", "vmid"]))]
    elif kind == "unknown":
        where = draw(st.sampled_from(["", "target", "bundle", "run", "watch"]))
        known = set(doc) | {"source"} | (set(doc[where]) if where else set())
        from controller import playbook as pbmod
        if where:
            cls = {"target": pbmod.TargetConfig, "bundle": pbmod.BundleConfig, "run": pbmod.RunConfig,
                   "watch": pbmod.WatchConfig}[where]
            known |= {f for f in cls.__dataclass_fields__}
        name = draw(KEYNAME.filter(lambda k: k not in known))
        (doc[where] if where else doc)[name] = draw(st.one_of(st.integers(), st.text(max_size=5)))
    elif kind == "huge":
        sec, key, value = draw(HUGE)
        doc[sec][key] = value
    text = to_toml(doc).encode()
    if kind == "non_utf8":
        junk = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xfe\xfe\xfe", b"\x80"]))
        text = text.replace(b'"tiny"', b'"ti' + junk + b'ny"')
    elif kind == "deep":
        depth = draw(st.integers(2000, 20000))
        text += b"x = " + b"[" * depth + b"]" * depth + b"\n"
    elif kind == "broken":
        cut = draw(st.integers(1, len(text) - 1))
        text = text[:cut] + draw(st.sampled_from([b"[[", b"= =", b'"unterminated', b"\x00", b"[target]\n"]))
    return text



def assert_one_clear_message(code: int, out: str, err: str, path: Path) -> None:
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("dfctl: error: ")]
    assert len(errors) == 1 and all(ln.startswith(("dfctl: error: ", "dfctl: hint: ")) for ln in lines), err
    assert str(path) in errors[0]
    assert len(errors[0]) < 1000          # huge values are shortened, not echoed whole
    assert only_error_doc(out, code), out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=bad_playbook(), command=st.sampled_from(["deploy", "doctor"]))
def test_generated_bad_playbook_one_message_exit_2(tmp_path, capsys, text, command):
    path = tmp_path / "BAD.toml"
    path.write_bytes(text)
    argv = ["deploy", str(path), "--dry-run"] if command == "deploy" else ["doctor", str(path)]
    code, out, err = dfctl_inproc(capsys, *argv)
    assert_one_clear_message(code, out, err, path)


@pytest.mark.parametrize("breaker", ["\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
                                     "\r", "\n", "\x1b[2J", "\x00"])
def test_line_breaking_characters_stay_on_one_line(tmp_path, capsys, breaker):
    """Regression (found by hypothesis on a fresh clone, 2026-12-01): a NEL in a value was
    printed raw and str.splitlines() split the one-line message in two."""
    path = tmp_path / "BAD.toml"
    value = "a" + breaker + "b"
    path.write_text("[run]\nname = " + json.dumps(value) + "\n", encoding="utf-8")
    code, out, err = dfctl_inproc(capsys, "deploy", str(path), "--dry-run")
    assert_one_clear_message(code, out, err, path)
    if breaker != "\n":                # the message's own line ends are the only raw ones
        assert breaker[0] not in err, repr(err)


def test_real_entry_point_deep_nesting_and_non_utf8(tmp_path):
    """The installed console script (a real process, its own recursion limit)."""
    cases = {"deep.toml": b"[run]\nargs = " + b"[" * 50000 + b"]" * 50000 + b"\n",
             "latin1.toml": '[run]\nname = "caf\xe9"\n'.encode("latin-1"),
             "inline.toml": b"x = " + b"{a=" * 5000 + b"1" + b"}" * 5000 + b"\n"}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        for argv in (["deploy", str(p), "--dry-run"], ["doctor", str(p), "--json"]):
            r = subprocess.run([str(ROOT / ".venv" / "bin" / "dfctl"), *argv], capture_output=True, text=True,
                               timeout=120, cwd=tmp_path)
            assert_one_clear_message(r.returncode, r.stdout, r.stderr, p)


@pytest.mark.parametrize("text,needle", [
    ("[target]\nkind = \"pct\"\nhost = \"h\"\n", "target.vmid: required"),
    ("[target]\nkind = \"ssh\"\n", "target.host: required"),
    ("[run]\nenv = { \"A B\" = \"x\" }\n", "not a valid environment variable name"),
    ("[bundle]\npaths = [\"../../etc\"]\n", "must be relative and inside the project"),
    ("[target]\nworkdir = \"/w/a:b\"\n", "target.workdir: ':' is not allowed"),
])
def test_named_problems(tmp_path, capsys, text, needle):
    p = tmp_path / "BAD.toml"
    p.write_text(text)
    code, out, err = dfctl_inproc(capsys, "deploy", str(p), "--dry-run")
    assert_one_clear_message(code, out, err, p)
    assert needle in err
