"""config/ names the platforms in one module, models.py, where each platform's section is: the loader,
the plan, the home's .env and the masking read those sections and list no platform of their own."""

from __future__ import annotations

import ast
from pathlib import Path

import config
from config.models import PLATFORMS

CONFIG = Path(config.__file__).parent


def names_in_code(path: Path) -> set[str]:
    """The identifiers and string values of a module's code; its docstrings (examples for the reader) aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}  # fmt: skip
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.add(node.value)
        elif isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
    return found


def test_no_module_of_config_but_the_models_names_a_platform() -> None:
    modules = sorted(path for path in CONFIG.glob("*.py") if path.name != "models.py")
    assert {path.name for path in modules} >= {"loader.py", "plan.py", "home.py", "inline_secrets.py"}
    named = {path.name: sorted(text for text in names_in_code(path) for platform in PLATFORMS if platform in text.lower())
             for path in modules}  # fmt: skip
    assert {name: texts for name, texts in named.items() if texts} == {}
