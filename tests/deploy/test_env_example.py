"""deploy/.env.example documents, with a comment, every variable Switchboard reads."""

from __future__ import annotations

import re

from config.home import DOTENV_TEMPLATE, HOME_VARIABLE
from config.loader import MODEL_KEY_VARIABLES, example_config_text, fallback_variables
from tests.deploy.dockerfile import REPO

EXAMPLE = REPO / "deploy" / ".env.example"


def variables_read() -> set[str]:
    settings = "\n".join(line for line in example_config_text().splitlines() if not line.lstrip().startswith("#"))
    from_config = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", settings))
    return {HOME_VARIABLE, *fallback_variables().values(), *MODEL_KEY_VARIABLES.values(), *from_config}


def test_every_variable_is_documented_with_a_comment_above_it() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    for name in sorted(variables_read()):
        found = [n for n, line in enumerate(lines) if re.match(rf"#?\s*{name}=", line)]
        assert found, f"{name} is missing from deploy/.env.example"
        index = found[0] - 1
        while index >= 0 and re.match(r"#?\s*[A-Z_][A-Z0-9_]*=", lines[index]):
            index -= 1  # variables of one group share the comment above the group
        assert index >= 0 and lines[index].startswith("#") and lines[index][1:].strip(), f"{name} has no comment"


def test_no_value_is_filled_in() -> None:
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"([A-Z_][A-Z0-9_]*)=(.*)", line)
        if match:
            assert match.group(2) == "", f"{match.group(1)} must be empty in the example"


def test_the_home_dotenv_template_names_the_same_secrets() -> None:
    secrets = variables_read() - {HOME_VARIABLE}
    assert all(name in DOTENV_TEMPLATE for name in secrets)
