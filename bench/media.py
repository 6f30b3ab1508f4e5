"""Media benchmark: what a picture costs in tokens, and the memory 20 phone photos at once take.

``python -m bench.media [--quick] [--json]``

1. ``tokens``: a set of pictures users send (an icon, photos of 800 x 600 and exactly
   1568 x 1045, a 1920 x 1080 and a 1080 x 2400 screenshot, a 4032 x 3024 phone photo, an
   8000 x 600 panorama, a 600 x 8000 page) goes through ``gateway.media.images.prepare_image``
   as the pipeline sends it. Our estimate (``agent.part_tokens`` of the prepared picture, in the
   Anthropic and the OpenAI style) is compared with each provider's published formula applied to
   the ORIGINAL picture, resized the way that provider resizes it (written here on their own,
   not with our code):

   * Anthropic: scaled down to fit a 1568 px long edge and about 1,600 tokens (1.2 megapixels:
     its docs' table leaves 1092 x 1092 alone and prices it at about 1,590 tokens), then
     width x height / 750 tokens (rounded up). We downscale a little further, to the 1.15
     megapixels the same docs recommend sending, so a large picture costs about 4% less than
     the formula gives for its original;
   * OpenAI (GPT-4o family, high detail): scaled down to fit 2048 x 2048, then its short side
     down to 768 (each step in whole pixels; nothing is scaled up), then 85 + 170 per 512 px tile.

   The baseline is what a character-based estimator says: the length of the picture's base64 /
   4. Target: every estimate within TOLERANCE_PCT (5%) of the formula. For an estimate off by
   more than NOTED_PCT (1%), a line says whether the formula gives the same for the picture we
   send (then the estimate is off) or not (then the downscale changed what the picture costs).
2. ``memory`` (:mod:`bench.media_memory`): 20 messages, each with a 4032 x 3024 JPEG of about
   3.5 MB, arrive at once through the fake Telegram and the real aiogram adapter and are prepared
   by the real ``MediaPipeline`` with the default ``media.max_parallel``, in a child process:
   ``peak_above_idle_mb`` is its peak resident memory over its resident memory at rest. The
   baseline, measured in the same run, is the same 20 with no bound (``max_parallel`` 20).
   Target (issue 28): under 200 MB above idle. The full run measures ROUNDS (3) times and
   reports the largest peak; ``--quick`` once.

The exit status is non-zero when an estimate is off by more than the tolerance or the memory
target is missed; the figures say which (``FAIL`` lines).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent import MediaPart, part_tokens
from bench import media_memory
from bench.common import bench_parser, emit, known_args, say
from bench.media_pictures import photo, screenshot
from config.media import MediaConfig
from gateway.media.images import prepare_image
from tests.fakes import media_files

TOLERANCE_PCT: Final = 5.0
NOTED_PCT: Final = 1.0
MEMORY_TARGET_MB: Final = 200.0
PHOTOS: Final = 20
ROUNDS, QUICK_ROUNDS = 3, 1

ANTHROPIC_LONG_EDGE: Final = 1568
ANTHROPIC_PER_TOKEN: Final = 750
ANTHROPIC_AREA: Final = 1_600 * ANTHROPIC_PER_TOKEN
OPENAI_SQUARE: Final = 2048
OPENAI_SHORT_SIDE: Final = 768
OPENAI_TILE: Final = 512
OPENAI_BASE, OPENAI_PER_TILE = 85, 170


@dataclass(frozen=True)
class Picture:
    key: str
    """Its name in the figures (``tokens_anthropic_<key>``)."""
    label: str
    width: int
    height: int
    make: Callable[[int, int], bytes]


PICTURES: Final = (
    Picture("icon", "icon (PNG, see-through)", 64, 64, lambda w, h: media_files.png(w, h, alpha=128)),
    Picture("photo_800x600", "photo 800x600", 800, 600, photo),
    Picture("photo_1568x1045", "photo 1568x1045", 1568, 1045, photo),
    Picture("screenshot_1920x1080", "screenshot 1920x1080", 1920, 1080, screenshot),
    Picture("phone_screenshot", "phone screenshot 1080x2400", 1080, 2400, screenshot),
    Picture("phone_photo", "phone photo 4032x3024", 4032, 3024, photo),
    Picture("panorama", "panorama 8000x600", 8000, 600, photo),
    Picture("long_page", "long page 600x8000", 600, 8000, screenshot),
)


# -- the providers' formulas, on the original picture --------------------------------------------------


def anthropic_formula(width: int, height: int) -> int:
    """Anthropic: fit the long edge and the area, then a token per 750 pixels."""
    shrink = min(1.0, ANTHROPIC_LONG_EDGE / max(width, height), math.sqrt(ANTHROPIC_AREA / (width * height)))
    return math.ceil(width * shrink * height * shrink / ANTHROPIC_PER_TOKEN)


def openai_formula(width: int, height: int) -> int:
    """OpenAI high detail: into 2048 x 2048, short side down to 768, then 85 + 170 per 512 px tile."""
    if max(width, height) > OPENAI_SQUARE:
        long = max(width, height)
        width, height = width * OPENAI_SQUARE // long, height * OPENAI_SQUARE // long
    if min(width, height) > OPENAI_SHORT_SIDE:
        short = min(width, height)
        width, height = width * OPENAI_SHORT_SIDE // short, height * OPENAI_SHORT_SIDE // short
    return OPENAI_BASE + OPENAI_PER_TILE * -(-width // OPENAI_TILE) * -(-height // OPENAI_TILE)


# -- section 1: token estimates ------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    picture: Picture
    file_bytes: int
    sent: tuple[int, int]
    """The prepared picture's size."""
    sent_type: str
    ours: dict[str, int]
    formula: dict[str, int]
    naive: int

    def error(self, style: str) -> float:
        return _pct(self.ours[style], self.formula[style])


def estimate(picture: Picture, max_pixels: int) -> Estimate:
    data = picture.make(picture.width, picture.height)
    prepared = prepare_image(data, max_pixels=max_pixels)
    part = MediaPart(kind="image", mime=prepared.mime, sha256=hashlib.sha256(prepared.data).hexdigest(),
                     size=len(prepared.data), width=prepared.width, height=prepared.height)  # fmt: skip
    return Estimate(
        picture, len(data), (prepared.width, prepared.height), prepared.mime.removeprefix("image/"),
        ours={style: part_tokens(part, style) for style in ("anthropic", "openai")},
        formula={"anthropic": anthropic_formula(picture.width, picture.height),
                 "openai": openai_formula(picture.width, picture.height)},
        naive=math.ceil(len(base64.b64encode(prepared.data)) / 4),
    )  # fmt: skip


def tokens() -> tuple[dict[str, Any], list[Estimate]]:
    max_pixels = int(MediaConfig().limits.image_megapixels * 1e6)
    estimates = [estimate(picture, max_pixels) for picture in PICTURES]
    figures: dict[str, Any] = {}
    for style in ("anthropic", "openai"):
        worst = max(estimates, key=lambda e: abs(e.error(style)))
        figures[f"tokens_worst_error_pct_{style}"] = worst.error(style)
        figures[f"tokens_worst_picture_{style}"] = worst.picture.key
    naive = [_pct(e.naive, e.formula["anthropic"]) for e in estimates]
    figures["tokens_naive_error_pct_min"] = min(naive)
    figures["tokens_naive_error_pct_max"] = max(naive)
    for e in estimates:
        for style in ("anthropic", "openai"):
            figures[f"tokens_{style}_{e.picture.key}"] = e.ours[style]
            figures[f"tokens_{style}_formula_{e.picture.key}"] = e.formula[style]
        figures[f"tokens_naive_{e.picture.key}"] = e.naive
    return figures, estimates


def token_table(estimates: Sequence[Estimate]) -> None:
    say("image tokens: ours (of the picture we send) vs the provider's formula (on the original), "
        "and base64 length / 4:")
    say(f"  {'picture':<27} {'file':>8}  {'sent as':<15} {'anthropic ours/formula':>23} {'err':>7} "
        f"{'openai ours/formula':>20} {'err':>7} {'base64/4':>9} {'err':>9}")
    for e in estimates:
        sent = f"{e.sent[0]}x{e.sent[1]} {e.sent_type}"
        say(f"  {e.picture.label:<27} {e.file_bytes / 1024:>6,.0f}kB  {sent:<15} "
            f"{e.ours['anthropic']:>11,} / {e.formula['anthropic']:>9,} {e.error('anthropic'):>+6.1f}% "
            f"{e.ours['openai']:>8,} / {e.formula['openai']:>9,} {e.error('openai'):>+6.1f}% "
            f"{e.naive:>9,} {_pct(e.naive, e.formula['anthropic']):>+8.0f}%")  # fmt: skip
    naive = [_pct(e.naive, e.formula["anthropic"]) for e in estimates]
    say(f"  the base64's length / 4 is off by {min(naive):+,.0f}% to {max(naive):+,.0f}% against Anthropic's formula")
    formulas = {"anthropic": anthropic_formula, "openai": openai_formula}
    for e in estimates:
        for style, formula in formulas.items():
            if abs(e.error(style)) <= NOTED_PCT:
                continue
            sent = formula(*e.sent)
            why = ("the estimate is off, not the downscale" if sent == e.formula[style]
                   else "the downscale changes what it costs")  # fmt: skip
            say(f"  {e.picture.label}, {style}: the formula gives {sent:,} for the {e.sent[0]}x{e.sent[1]} picture "
                f"we send, we estimate {e.ours[style]:,}: {why}")


# -- section 2: memory ---------------------------------------------------------------------------------


async def memory(tmp: Path, rounds: int) -> dict[str, Any]:
    began = time.perf_counter()
    photos = media_memory.pictures(PHOTOS)
    default = MediaConfig().max_parallel
    bounded: list[dict[str, Any]] = []
    unbounded: list[dict[str, Any]] = []
    for number in range(rounds):
        bounded.append(await media_memory.measure(tmp / f"bounded-{number}", photos, max_parallel=default))
        unbounded.append(await media_memory.measure(tmp / f"unbounded-{number}", photos, max_parallel=PHOTOS))
        say(f"[{time.perf_counter() - began:5.1f} s] memory round {number + 1}/{rounds}: "
            f"{bounded[-1]['peak_above_idle_mb']:,.0f} MB above idle (max_parallel {default}), "
            f"{unbounded[-1]['peak_above_idle_mb']:,.0f} MB with no bound")  # fmt: skip
    worst = max(bounded, key=lambda r: r["peak_above_idle_mb"])
    worst_unbounded = max(unbounded, key=lambda r: r["peak_above_idle_mb"])
    broken = [r["problems"] for r in (*bounded, *unbounded) if r["prepared"] != r["photos"]]
    if broken:
        raise RuntimeError(f"benchmark broken: photos were not prepared: {broken}")
    return {
        "memory_photos": PHOTOS, "memory_photo_size": "x".join(map(str, media_memory.SIZE)),
        "memory_downloaded_mb": worst["downloaded_mb"], "memory_sent_mb": worst["sent_mb"],
        "memory_sent_size": worst["sent_size"], "memory_max_parallel": default, "memory_rounds": rounds,
        "rss_idle_mb": worst["rss_idle_mb"], "rss_peak_mb": worst["rss_peak_mb"],
        "peak_above_idle_mb": worst["peak_above_idle_mb"], "after_above_idle_mb": worst["after_above_idle_mb"],
        "peak_above_idle_mb_unbounded": worst_unbounded["peak_above_idle_mb"],
        "after_above_idle_mb_unbounded": worst_unbounded["after_above_idle_mb"],
        "memory_seconds": worst["seconds"], "memory_seconds_unbounded": worst_unbounded["seconds"],
        "memory_kernel_peak": worst["kernel_peak"], "memory_samples": worst["samples"],
        "memory_path": "telegram emulator -> aiogram adapter fetch_media -> MediaPipeline.prepare -> MediaFolder",
    }  # fmt: skip


# -- verdicts ------------------------------------------------------------------------------------------


def verdicts(result: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(figure, target, met) for each target."""
    return [
        *((f"tokens_worst_error_pct_{style}", f"within +/-{TOLERANCE_PCT:g}%",
           abs(result[f"tokens_worst_error_pct_{style}"]) <= TOLERANCE_PCT) for style in ("anthropic", "openai")),
        ("peak_above_idle_mb", f"< {MEMORY_TARGET_MB:g} MB", result["peak_above_idle_mb"] < MEMORY_TARGET_MB),
    ]  # fmt: skip


def report(result: dict[str, Any]) -> None:
    say(f"memory: {result['memory_photos']} photos of {result['memory_photo_size']} "
        f"({result['memory_downloaded_mb']:,.1f} MB in all, sent as {result['memory_sent_size']}, "
        f"{result['memory_sent_mb']:,.1f} MB) at once, {result['memory_path']}:")
    say(f"  at rest {result['rss_idle_mb']:,.0f} MB, peak {result['rss_peak_mb']:,.0f} MB: "
        f"{result['peak_above_idle_mb']:,.0f} MB above idle with max_parallel {result['memory_max_parallel']} "
        f"({result['memory_seconds']:,.1f} s), {result['peak_above_idle_mb_unbounded']:,.0f} MB with no bound "
        f"({result['memory_seconds_unbounded']:,.1f} s, the baseline)")
    say(f"  still resident afterwards: {result['after_above_idle_mb']:,.0f} MB above idle "
        f"({result['after_above_idle_mb_unbounded']:,.0f} MB with no bound)")
    say("vs targets:")
    for key, target, met in verdicts(result):
        shown = result[key]
        say(f"  {key:<32} {shown:>+9.1f}   target {target:<16} {'ok' if met else 'FAIL'}")


async def measure(quick: bool, tmp: Path) -> dict[str, Any]:
    figures, estimates = tokens()
    token_table(estimates)
    figures.update(await memory(tmp, QUICK_ROUNDS if quick else ROUNDS))
    figures["quick"] = quick
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    args = known_args(bench_parser(__doc__.splitlines()[0]), argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-media-") as tmp:
        result = asyncio.run(measure(args.quick, Path(tmp)))
    result["load_avg_1m"] = max(load_before, os.getloadavg()[0])
    report(result)
    emit(result, as_json=args.json)
    return 0 if all(met for _, _, met in verdicts(result)) else 1


def _pct(value: float, reference: float) -> float:
    return 100 * (value - reference) / reference


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
