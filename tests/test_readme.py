"""README stays true: the playbook reference is the one the code generates, and every
playbook key and command it names exists."""

from pathlib import Path

from controller.playbook import reference_markdown

ROOT = Path(__file__).resolve().parents[1]


def test_playbook_reference_in_readme_is_current():
    text = (ROOT / "README.md").read_text()
    start = text.index("\n", text.index("<!-- playbook-reference:start")) + 1
    end = text.index("<!-- playbook-reference:end -->")
    assert text[start:end].strip() == reference_markdown().strip(), \
        "README's playbook reference is stale: regenerate it from controller.playbook.reference_markdown()"


def test_readme_commands_exist():
    from typer.main import get_command

    from controller.cli import app

    names = set(get_command(app).commands)
    text = (ROOT / "README.md").read_text()
    for cmd in ("deploy", "runs", "logs", "stop", "doctor", "watch", "check-log", "compare-runs", "import"):
        assert f"dfctl {cmd}" in text and cmd in names
