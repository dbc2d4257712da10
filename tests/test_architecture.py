"""The code's layering, read from the source: no two modules import each other (at any depth of the
file: function-level imports count), and the core (``reasoning_env``) imports neither the workbench, the
UI, training nor, at module level, torch. Data flows one way: sources -> sampler -> environment ->
policies / trainers -> records -> analysis / UI.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("reasoning_env", "workbench", "training")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = f.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            mods[name] = f
    return mods


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str) -> tuple[set[str], set[str], set[str]]:
    """(project modules ``name`` imports anywhere in its file, top-level packages it imports anywhere,
    those it imports at module level)."""
    f = MODULES[name]
    tree = ast.parse(f.read_text(encoding="utf-8"))
    out: set[str] = set()
    top_level = {n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    module_level: set[str] = set()
    anywhere: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]
        else:
            continue
        for t in targets:
            anywhere.add(t.split(".")[0])
            if node in top_level:
                module_level.add(t.split(".")[0])
            r = _resolve(t)
            if r and r != name:
                out.add(r)
    return out, anywhere, module_level


GRAPH = {name: _imports(name) for name in MODULES}


def test_the_module_list_is_read():
    assert {"reasoning_env.env", "reasoning_env.rewards.rubric", "workbench.app.play_tab"} <= set(MODULES)
    assert "reasoning_env.rewards" in GRAPH["reasoning_env.env"][0]


def test_no_two_modules_import_each_other():
    pairs = sorted({tuple(sorted((a, b))) for a, (deps, *_) in GRAPH.items() for b in deps if a in GRAPH[b][0]})
    assert pairs == [], "modules that import each other: " + ", ".join(" <-> ".join(p) for p in pairs)


def test_the_core_never_imports_the_workbench_training_or_the_ui():
    core = {name: imports for name, imports in GRAPH.items() if name.startswith("reasoning_env")}
    anywhere = {n: sorted(pkgs & {"workbench", "training", "gradio", "plotly"}) for n, (_, pkgs, _) in core.items()}
    assert {n: v for n, v in anywhere.items() if v} == {}
    # torch only inside the transformers policy's functions (hf_local), never on import
    at_import = {n: sorted(pkgs & {"torch", "trl", "peft"}) for n, (_, _, pkgs) in core.items()}
    assert {n: v for n, v in at_import.items() if v} == {}
