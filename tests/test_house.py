"""The house's shape, kept by a test: every module name used once, imports pointing down.

The layer list below is the one README.md's "The house" section shows (the test renders it
and compares), so the map in the README is the tree as built, not a drawing of it. A wing
may import the wings of lower layers only; the shared vocabulary (layer 0) may also import
itself; remote/ (the stdlib-only scripts that run on the node) imports nothing of ours
outside itself.
Imports under `if TYPE_CHECKING:` are annotations, not dependencies, and are not counted.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTROLLER = ROOT / "controller"

# (layer, wing, what it is): the wing is a package under controller/ or a top-level module.
LAYERS: list[tuple[int, str, str]] = [
    (0, "errors", "exit-coded exceptions"),
    (0, "records", "the frozen records that flow from probe to screen"),
    (0, "throughput_columns", "progress samples as compact columns"),
    (0, "playbook", "validated TOML run recipes"),
    (0, "userconfig", "the user's own defaults"),
    (0, "remote", "the stdlib-only scripts that run on the node: probe agent, process scan, launcher"),
    (1, "transport", "local, ssh, pct behind one interface"),
    (1, "follow", "the file cursor; log text -> typed records"),
    (1, "store", "the run registry and each run's metric history"),
    (1, "wandb_io", "a wandb run's numbers, offline file or API"),
    (2, "judge", "pure detectors: rules, structure readers, state, regression, ranks"),
    (2, "probe", "one round trip per host: the tick's probe, the scan, /proc truth"),
    (3, "ship", "bundle, deploy, launch, stop, replace; jobs; stacks; doctor"),
    (3, "view", "the dashboard and its widgets: state -> Rich renderable"),
    (4, "adopt", "runs dfctl did not start: attach, import"),
    (5, "compare", "compare-runs: statistics and renderings"),
    (5, "watch", "the tick: HostPoller, RunFollower, JobFollower, Watch; logs -f"),
    (6, "expose", "the watch's numbers for Prometheus: metric families, the scrape endpoint, the live fleet"),
    (6, "act", "recovery: decide what to do about a failed run ([recover]) and do it"),
    (7, "cli", "parse, call, render, map errors to exit codes"),
]
LAYER_OF = {wing: layer for layer, wing, _ in LAYERS}
NOT_WINGS = {"__init__", "__main__"}


def wing_of(path: Path) -> str:
    rel = path.relative_to(CONTROLLER)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every `controller.` import outside `if TYPE_CHECKING:` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("controller")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "controller":
                found += [(node.lineno, f"controller.{a.name}") for a in node.names]
            elif node.module.startswith("controller."):
                found.append((node.lineno, node.module))
    return found


def layer_markdown() -> str:
    """README's layer list, rendered from LAYERS."""
    lines = ["| layer | wing | what it is |", "|---|---|---|"]
    for layer, wing, what in LAYERS:
        name = f"`{wing}/`" if (CONTROLLER / wing).is_dir() else f"`{wing}.py`"
        lines.append(f"| {layer} | {name} | {what} |")
    return "\n".join(lines)


def test_every_wing_is_in_the_layer_list_and_every_listed_wing_exists():
    wings = {p.name for p in CONTROLLER.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    wings |= {p.stem for p in CONTROLLER.glob("*.py")} - NOT_WINGS
    assert wings == set(LAYER_OF), (sorted(wings - set(LAYER_OF)), sorted(set(LAYER_OF) - wings))


def test_no_module_name_is_used_twice():
    seen: dict[str, list[str]] = {}
    for top in (CONTROLLER, ROOT / "trainer"):
        for p in top.rglob("*.py"):
            if p.stem in NOT_WINGS:
                continue
            seen.setdefault(p.stem, []).append(str(p.relative_to(ROOT)))
        for p in top.rglob("*/"):
            if (p / "__init__.py").exists() and p != top:
                seen.setdefault(p.name, []).append(str(p.relative_to(ROOT)) + "/")
    twice = {name: where for name, where in seen.items() if len(where) > 1}
    assert twice == {}


def test_imports_point_down_the_layers():
    wrong = []
    for p in sorted(CONTROLLER.rglob("*.py")):
        if p.stem == "__main__" and p.parent == CONTROLLER:
            continue
        src = wing_of(p)
        for line, module in runtime_imports(ast.parse(p.read_text(encoding="utf-8"))):
            parts = module.split(".")
            if len(parts) < 2 or parts[1] not in LAYER_OF:
                continue                                  # `from controller import __version__`
            dst = parts[1]
            if dst == src:
                continue
            ok = (src != "remote") and (LAYER_OF[dst] < LAYER_OF[src]
                                        or (LAYER_OF[src] == LAYER_OF[dst] == 0))
            if not ok:
                wrong.append(f"{p.relative_to(ROOT)}:{line} ({src}, layer {LAYER_OF[src]}) imports "
                             f"{module} ({dst}, layer {LAYER_OF[dst]})")
    assert wrong == []


def test_the_remote_scripts_import_nothing_of_ours_outside_the_kit():
    # process_scan.py is shipped after probe_agent.py's text; imported here, it takes the same
    # names from the module instead -- the kit's only import, and it stays inside remote/.
    for p in (CONTROLLER / "remote").glob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        outside = [m for _, m in runtime_imports(tree) if not m.startswith("controller.remote.")]
        assert outside == [], p


def test_readme_shows_the_layers_as_built():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = "<!-- house-layers:start", "<!-- house-layers:end -->"
    block = readme[readme.index(start):readme.index(end)]
    assert layer_markdown() in block


def test_the_import_rule_catches_an_upward_import(tmp_path):
    # The rule's own check: a judge module importing the watch would be named.
    tree = ast.parse("from controller.watch.tick import Watch\nif TYPE_CHECKING:\n    import controller.cli\n")
    assert runtime_imports(tree) == [(1, "controller.watch.tick")]
    assert LAYER_OF["watch"] > LAYER_OF["judge"]
