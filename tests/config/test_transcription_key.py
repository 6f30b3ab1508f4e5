"""The transcription endpoint's key (``media.transcription.api_key``) is a secret like the model's: read from
OPENAI_API_KEY (the environment or the home's .env) when left unset, masked in logs and in backups' copies of
config.yaml, and not looked for at all while transcription is off."""

from __future__ import annotations

from pathlib import Path

from config import LoadedConfig, load_config
from config.inline_secrets import mask_inline_secrets
from gateway.operations.redaction import Redactor

LOCAL = "media:\n  transcription:\n    base_url: http://127.0.0.1:8000/v1\n"
INLINE_KEY = "whisper-server-key-0123456789"


def load_written(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> LoadedConfig:
    (tmp_path / "config.yaml").write_text(text, encoding="utf-8")
    return load_config(tmp_path / "config.yaml", {"SWITCHBOARD_HOME": str(tmp_path), **(environ or {})})


def test_unset_it_is_read_from_OPENAI_API_KEY_in_the_homes_dotenv(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv-0123456789\n", encoding="utf-8")
    loaded = load_written(tmp_path, LOCAL)
    transcription = loaded.settings.media.transcription
    assert transcription is not None and transcription.api_key == "sk-from-dotenv-0123456789"
    assert loaded.variable_for("media.transcription.api_key") == "OPENAI_API_KEY"
    assert "sk-from-dotenv-0123456789" in loaded.secrets()


def test_a_key_written_in_config_yaml_is_a_secret_masked_everywhere(tmp_path: Path) -> None:
    loaded = load_written(tmp_path, LOCAL + f"    api_key: {INLINE_KEY}\n", {"OPENAI_API_KEY": "sk-other-0123456789"})
    assert loaded.settings.media.transcription is not None
    assert loaded.settings.media.transcription.api_key == INLINE_KEY
    assert "media.transcription.api_key" in loaded.secret_paths()
    assert Redactor(loaded.secrets())(f"POST with key {INLINE_KEY} failed") == "POST with key [REDACTED] failed"
    masked = mask_inline_secrets(loaded, {"OPENAI_API_KEY": "sk-other-0123456789"})
    assert INLINE_KEY not in masked.text
    assert masked.masked == {"media.transcription.api_key": "SWITCHBOARD_MEDIA_TRANSCRIPTION_API_KEY"}


def test_with_transcription_off_no_key_is_looked_for(tmp_path: Path) -> None:
    loaded = load_written(tmp_path, "media:\n  transcription: null\n", {"OPENAI_API_KEY": "sk-openai-0123456789"})
    assert loaded.settings.media.transcription is None
    assert "media.transcription.api_key" not in loaded.secret_paths()
    assert "media.transcription.api_key" not in loaded.variables
