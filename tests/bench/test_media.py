"""The pieces of ``bench.media`` its figures stand on: the providers' formulas it compares with, the
memory gauge, the pictures, and the child process that measures 20 photos (here two small ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.media import anthropic_formula, openai_formula
from bench.media_memory import MB, Resident, measure
from bench.media_pictures import photo, screenshot


@pytest.mark.parametrize(("size", "tokens"), [
    ((200, 200), 54), ((1000, 1000), 1334), ((1092, 1092), 1590),  # Anthropic's priced examples, none resized
    ((4000, 4000), 1600), ((8000, 600), 246),                       # past ~1,600 tokens, or the long edge: fitted
])  # fmt: skip
def test_anthropics_formula_gives_its_published_prices(size: tuple[int, int], tokens: int) -> None:
    assert anthropic_formula(*size) in (tokens, tokens + 1)


@pytest.mark.parametrize(("size", "tokens"), [
    ((1024, 1024), 765),   # OpenAI's worked example: 768 x 768, 4 tiles
    ((2048, 4096), 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
    ((4032, 3024), 765),   # 2048 x 1536, then 1024 x 768: 4 tiles
    ((300, 200), 255),     # small: one tile, never scaled up
])  # fmt: skip
def test_openais_formula_gives_its_worked_examples(size: tuple[int, int], tokens: int) -> None:
    assert openai_formula(*size) == tokens


def test_a_short_spike_counts_in_the_peak() -> None:
    gauge = Resident()
    idle = gauge.status("VmRSS")
    gauge.watch()
    spike = b"\x01" * (64 * MB)  # written, so resident
    del spike
    assert gauge.peak() - idle >= 60 * MB


def test_the_pictures_weigh_what_real_ones_do() -> None:
    phone = photo(4032, 3024, seed=1)
    assert 2.5 * MB < len(phone) < 5 * MB and phone == photo(4032, 3024, seed=1) != photo(4032, 3024, seed=2)
    assert 100_000 < len(screenshot(1920, 1080)) < 1_000_000


async def test_the_child_prepares_every_photo_through_telegram_and_reports_its_memory(tmp_path: Path) -> None:
    photos = [photo(1600, 1200, seed=seed) for seed in (1, 2)]
    result = await measure(tmp_path, photos, max_parallel=4)
    assert (result["photos"], result["prepared"], result["problems"]) == (2, 2, [])
    assert result["downloaded_mb"] == pytest.approx(sum(map(len, photos)) / MB)
    kept = [path for path in (tmp_path / "media").rglob("*") if path.is_file()]
    assert result["sent_size"] == "1238x928" and len(kept) == 3  # the warm-up photo and the two
    assert result["rss_peak_mb"] >= result["rss_idle_mb"] > 0
