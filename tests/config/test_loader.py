"""Loading config.yaml: substitution, .env, validation messages, defaults, the home directory."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from config import ConfigError, Settings, load_config
from config.loader import EXAMPLE_PATH


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def problems(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path / "config.yaml", text), {"SWITCHBOARD_HOME": str(tmp_path), **(environ or {})})
    return caught.value.problems


def test_no_file_gives_the_defaults(tmp_path: Path) -> None:
    loaded = load_config(environ={"SWITCHBOARD_HOME": str(tmp_path)})
    assert loaded.config_path is None
    assert loaded.settings == Settings()
    assert loaded.settings.compression.threshold == 0.50
    assert loaded.db_path == tmp_path / "state.db"
    assert loaded.log_path == tmp_path / "logs" / "gateway.log"


def test_example_file_documents_exactly_the_defaults(tmp_path: Path) -> None:
    env = {"SWITCHBOARD_HOME": str(tmp_path)}
    assert load_config(EXAMPLE_PATH, env).settings == load_config(environ=env).settings


def test_example_file_mentions_every_key() -> None:
    text = EXAMPLE_PATH.read_text(encoding="utf-8")

    def keys(model: type, prefix: str = "") -> list[str]:
        found = []
        for name, info in model.model_fields.items():
            found.append(name)
            if isinstance(info.annotation, type) and hasattr(info.annotation, "model_fields"):
                found += keys(info.annotation)
        return found

    missing = [key for key in keys(Settings) if f"{key}:" not in text]
    assert missing == []


def test_variables_are_substituted_with_defaults_and_escapes(tmp_path: Path) -> None:
    text = """
model:
  name: ${MODEL_NAME}
  base_url: http://${HOST:-127.0.0.1}:${PORT:-8080}/v1
platforms:
  telegram:
    webhook_url: https://example.org/$${literal}
"""
    loaded = load_config(write(tmp_path / "c.yaml", text), {"SWITCHBOARD_HOME": str(tmp_path), "MODEL_NAME": "gpt-5"})
    assert loaded.settings.model.name == "gpt-5"
    assert loaded.settings.model.base_url == "http://127.0.0.1:8080/v1"
    assert loaded.settings.platforms.telegram.webhook_url == "https://example.org/${literal}"
    assert loaded.variable_for("model.name") == "MODEL_NAME"


def test_dotenv_fills_in_but_never_overrides(tmp_path: Path) -> None:
    write(tmp_path / ".env", "# secrets\nexport TELEGRAM_BOT_TOKEN='123:from-dotenv'\nANTHROPIC_API_KEY=from-dotenv\n")
    env = {"SWITCHBOARD_HOME": str(tmp_path), "ANTHROPIC_API_KEY": "from-process"}
    loaded = load_config(environ=env)
    assert loaded.settings.platforms.telegram.token == "123:from-dotenv"
    assert loaded.settings.model.api_key == "from-process"


def test_secrets_fall_back_to_conventional_variables_by_provider(tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.yaml", "model:\n  provider: openai\n  name: gpt-5\n")
    env = {"SWITCHBOARD_HOME": str(tmp_path), "OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant"}
    loaded = load_config(cfg, env)
    assert loaded.settings.model.api_key == "sk-openai"
    assert loaded.variable_for("model.api_key") == "OPENAI_API_KEY"
    assert "sk-openai" in loaded.secrets()


def test_out_of_range_value_names_path_value_and_range(tmp_path: Path) -> None:
    assert problems(tmp_path, "compression:\n  threshold: 1.5\n") == [
        "compression.threshold: must be between 0 and 1, got 1.5"
    ]


def test_an_alert_chat_names_a_platform_and_a_chat(tmp_path: Path) -> None:
    assert problems(tmp_path, "alerts:\n  chats: ['slack:']\n") == [
        'alerts.chats: "slack:" is not a chat to alert: write platform:chat_id, the platform as named under platforms:'
    ]
    assert problems(tmp_path, "alerts:\n  chats: ['tg:42', 'telegram:42', 'matrix:!room']\n") == [
        "alerts: chats tg:42 and matrix:!room: the part before the colon must be a platform (telegram, discord, slack)"
    ]


def test_streaming_keys_are_checked(tmp_path: Path) -> None:
    assert problems(tmp_path, "gateway:\n  streaming: always\n"
                              "platforms:\n  discord:\n    stream_edit_interval: 0.1\n") == [  # fmt: skip
        "platforms.discord.stream_edit_interval: must be between 0.2 and 60, got 0.1",
        "gateway.streaming: must be 'auto' or 'off', got 'always'",
    ]
    for written, meant in (("off", "off"), ("'off'", "off"), ("on", "auto"), ("auto", "auto")):  # YAML: off is false
        loaded = load_config(write(tmp_path / "s.yaml", f"gateway:\n  streaming: {written}\n"),
                             {"SWITCHBOARD_HOME": str(tmp_path)})  # fmt: skip
        assert loaded.settings.gateway.streaming == meant
    loaded = load_config(write(tmp_path / "ok.yaml", "platforms:\n  slack:\n    stream_edit_interval: 2\n"),
                         {"SWITCHBOARD_HOME": str(tmp_path)})  # fmt: skip
    assert loaded.settings.platforms.slack.stream_edit_interval == 2.0
    assert loaded.settings.platforms.telegram.stream_edit_interval is None
    assert loaded.settings.gateway.streaming == "auto"


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    assert problems(tmp_path, "compression:\n  treshold: 0.4\n") == [
        "compression.treshold: unknown key (did you mean 'threshold'?)"
    ]


def test_unknown_key_without_a_close_match_lists_the_known_ones(tmp_path: Path) -> None:
    (line,) = problems(tmp_path, "health:\n  banana: 1\n")
    assert line.startswith("health.banana: unknown key; known keys here: body_timeout, header_timeout, host, max_connections, port")


def test_unknown_section_suggests_the_close_one(tmp_path: Path) -> None:
    assert problems(tmp_path, "platfroms: {}\n") == ["platfroms: unknown key (did you mean 'platforms'?)"]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "model:\n  provider: antropic\ncompression:\n  protect_last_n: many\nhealth:\n  port: 70000\n",
    )
    assert found == [
        "model.provider: must be 'anthropic' or 'openai', got 'antropic' (did you mean 'anthropic'?)",
        "compression.protect_last_n: must be a whole number, got 'many'",
        "health.port: must be between 0 and 65535, got 70000",
    ]


def test_unset_variable_is_named_in_the_error(tmp_path: Path) -> None:
    (line,) = problems(tmp_path, "health:\n  port: ${GATEWAY_PORT}\n")
    assert line.startswith("health.port: ")
    assert f"(GATEWAY_PORT is not set in the environment and there is no {tmp_path / '.env'})" in line
    write(tmp_path / ".env", "OTHER=1\n")
    (line,) = problems(tmp_path, "health:\n  port: ${GATEWAY_PORT}\n", {"GATEWAY_PORT": ""})
    assert f"(GATEWAY_PORT is empty in the environment and not in {tmp_path / '.env'})" in line


def test_yaml_syntax_error_shows_line_and_column(tmp_path: Path) -> None:
    (line,) = problems(tmp_path, "model:\n  name: x\n   provider: openai\n")
    assert line.startswith("line 3, column 12: ")


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    (line,) = problems(tmp_path, "- a\n- b\n")
    assert "top level must be a mapping" in line


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml", {"SWITCHBOARD_HOME": str(tmp_path)})


def test_error_text_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path / "c.yaml", "compression:\n  threshold: 2\n"), {"SWITCHBOARD_HOME": str(tmp_path)})
    rendered = caught.value.render()
    assert str(tmp_path / "c.yaml") in rendered
    assert "(1 problem)" in rendered


def test_first_run_creates_a_private_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    loaded = load_config(environ={"SWITCHBOARD_HOME": str(home)}, create_home=True)
    assert loaded.home == home
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for sub in ("memories", "logs"):
        assert stat.S_IMODE((home / sub).stat().st_mode) == 0o700
    for name in ("config.yaml", ".env"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600
    assert (home / "config.yaml").read_text() == EXAMPLE_PATH.read_text()
    assert loaded.config_path == home / "config.yaml"


def test_first_run_leaves_existing_files_alone(tmp_path: Path) -> None:
    write(tmp_path / "config.yaml", "model:\n  name: mine\n")
    loaded = load_config(environ={"SWITCHBOARD_HOME": str(tmp_path)}, create_home=True)
    assert loaded.settings.model.name == "mine"
