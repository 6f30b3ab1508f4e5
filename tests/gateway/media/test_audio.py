"""How long a voice note or audio file is, read from its bytes."""

from __future__ import annotations

import pytest

from gateway.media.audio import audio_duration
from tests.fakes import media_files as files


@pytest.mark.parametrize("seconds", [1.5, 42.0, 3 * 3600.0])
def test_an_ogg_opus_voice_note_says_how_long_it_is(seconds: float) -> None:
    assert audio_duration(files.ogg_opus(seconds)) == pytest.approx(seconds)


def test_wav_and_mp3() -> None:
    assert audio_duration(files.wav(2.5)) == pytest.approx(2.5)
    # 128 kbit/s frames of 417 bytes (the padding byte of every other frame left out): within a percent.
    assert audio_duration(files.mp3(30)) == pytest.approx(30, rel=0.01)
    assert audio_duration(files.mp3(30, id3=True)) == pytest.approx(30, rel=0.01)


@pytest.mark.parametrize(
    "data",
    [b"", b"not audio at all", files.webm_head("A_OPUS"), files.amr_head(), files.pdf(1), files.ogg_opus(5)[:40]],
)
def test_unknown_when_the_bytes_do_not_tell(data: bytes) -> None:
    assert audio_duration(data) is None
