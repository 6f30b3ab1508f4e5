"""Pictures made ready for the model: downscaled to the provider's size, upright, re-encoded without metadata;
bombs refused before decoding and damaged files refused as such."""

from __future__ import annotations

import io
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from agent import ANTHROPIC_MAX_EDGE, ANTHROPIC_MAX_PIXELS
from gateway.media.errors import MediaRejected
from gateway.media.images import MAX_PNG_BYTES, fitted, prepare_image
from tests.fakes import media_files as files

MAX_PIXELS = 50_000_000


def opened(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def near(colour: tuple[int, ...], expected: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 40 for a, b in zip(colour[:3], expected, strict=True))


@pytest.mark.parametrize(
    ("width", "height", "expected"),
    [
        (4000, 3000, (1238, 928)),  # a 12 MP photo: the pixel count binds (1,148,864 <= 1,150,000)
        (3000, 600, (1568, 313)),  # a wide banner: the long edge binds
        (600, 3000, (313, 1568)),
        (1568, 700, (1568, 700)),  # within both: untouched
        (800, 600, (800, 600)),
    ],
)
def test_large_pictures_are_scaled_down_to_the_providers_size_keeping_their_shape(
    width: int, height: int, expected: tuple[int, int]
) -> None:
    prepared = prepare_image(files.jpeg(width, height), max_pixels=MAX_PIXELS)

    assert (prepared.width, prepared.height) == expected
    assert opened(prepared.data).size == expected
    assert max(expected) <= ANTHROPIC_MAX_EDGE and expected[0] * expected[1] <= ANTHROPIC_MAX_PIXELS
    assert abs(expected[0] / expected[1] - width / height) < 0.01


def test_exif_orientation_is_applied() -> None:
    # Stored 400 x 200 with its red half on top; orientation 6 says "turn me 90 degrees clockwise to view":
    # upright it is 200 x 400 with the red half on the right.
    prepared = prepare_image(files.jpeg(400, 200, orientation=6), max_pixels=MAX_PIXELS)
    image = opened(prepared.data)

    assert (prepared.width, prepared.height) == image.size == (200, 400)
    assert near(image.getpixel((150, 200)), files.TOP)
    assert near(image.getpixel((50, 200)), files.BOTTOM)


def test_orientation_and_downscaling_together() -> None:
    prepared = prepare_image(files.jpeg(4000, 3000, orientation=8), max_pixels=MAX_PIXELS)
    image = opened(prepared.data)

    # Orientation 8 turns it counter-clockwise: portrait, red half on the left.
    assert image.size == (928, 1238)
    assert near(image.getpixel((200, 600)), files.TOP)
    assert near(image.getpixel((700, 600)), files.BOTTOM)


def test_metadata_is_not_carried_into_the_new_file() -> None:
    prepared = prepare_image(files.jpeg(300, 200, orientation=1, camera="Acme Phone"), max_pixels=MAX_PIXELS)
    image = opened(prepared.data)

    assert dict(image.getexif()) == {}
    assert b"Acme Phone" not in prepared.data
    assert "exif" not in image.info


def test_photos_become_jpeg_and_lossless_pictures_stay_sharp_as_png() -> None:
    assert prepare_image(files.jpeg(300, 200), max_pixels=MAX_PIXELS).mime == "image/jpeg"
    assert prepare_image(files.png(300, 200), max_pixels=MAX_PIXELS).mime == "image/png"  # a screenshot
    assert prepare_image(files.encoded(300, 200, "BMP"), max_pixels=MAX_PIXELS).mime == "image/png"
    assert prepare_image(files.encoded(300, 200, "WEBP"), max_pixels=MAX_PIXELS).mime == "image/jpeg"


def test_transparency_is_kept_as_png() -> None:
    prepared = prepare_image(files.png(300, 200, alpha=100), max_pixels=MAX_PIXELS)
    image = opened(prepared.data)

    assert prepared.mime == "image/png"
    assert image.mode == "RGBA" and image.getpixel((10, 10))[3] == 100


def test_a_png_too_large_for_the_provider_goes_as_jpeg_over_white() -> None:
    prepared = prepare_image(files.png(1200, 950, alpha=128, noisy=True), max_pixels=MAX_PIXELS)

    assert prepared.mime == "image/jpeg"
    assert len(prepared.data) < MAX_PNG_BYTES
    assert opened(prepared.data).mode == "RGB"


def test_an_animated_gif_gives_its_first_frame() -> None:
    prepared = prepare_image(files.animated_gif(120, 80, frames=4), max_pixels=MAX_PIXELS)
    image = opened(prepared.data)

    assert getattr(image, "n_frames", 1) == 1
    assert near(image.convert("RGB").getpixel((60, 10)), files.TOP)
    assert near(image.convert("RGB").getpixel((60, 70)), files.BOTTOM)


@pytest.mark.parametrize(("width", "height"), [(100_000, 100_000), (8_000, 8_000)])
def test_a_png_bomb_is_refused_from_its_header_without_decoding(width: int, height: int) -> None:
    bomb = files.png_bomb(width, height)
    assert len(bomb) < 200  # a few bytes claiming up to 30 GB of pixels

    with pytest.raises(MediaRejected) as refused:
        prepare_image(bomb, max_pixels=MAX_PIXELS)

    # Decoding would have failed as "corrupt" (its image data is 64 bytes) or run out of memory first.
    assert refused.value.reason == "bomb"
    assert "50 million pixels" in refused.value.user_text


def test_the_pixel_limit_is_the_callers() -> None:
    with pytest.raises(MediaRejected) as refused:
        prepare_image(files.png(3000, 2000), max_pixels=5_000_000)

    assert refused.value.reason == "bomb"
    assert refused.value.user_text == "the picture is 3000 x 2000 pixels, more than the 5 million pixels read here"


@pytest.mark.parametrize(
    "data",
    [
        files.truncated(files.jpeg(800, 600), 0.5),
        files.truncated(files.jpeg(800, 600), 0.95),
        files.truncated(files.png(400, 400, noisy=True), 0.7),
        files.truncated(files.png(40, 40), 0.1),  # cut inside its header
        files.jpeg(200, 100)[:200] + bytes(2000),  # the header, then garbage
        b"\x89PNG\r\n\x1a\n" + bytes(100),
        b"GIF89a",
    ],
)
def test_damaged_or_truncated_pictures_are_refused_as_corrupt(data: bytes) -> None:
    with pytest.raises(MediaRejected) as refused:
        prepare_image(data, max_pixels=MAX_PIXELS)

    assert refused.value.reason == "corrupt"
    assert refused.value.user_text == "the picture is damaged or incomplete and could not be read"


@given(st.integers(1, 30_000), st.integers(1, 30_000))
def test_fitted_sizes_are_within_both_limits_keep_the_shape_and_never_grow(width: int, height: int) -> None:
    w, h = fitted(width, height)

    assert max(w, h) <= ANTHROPIC_MAX_EDGE and w * h <= ANTHROPIC_MAX_PIXELS
    assert w <= width and h <= height
    # Both sides scaled by the one factor that fits (to the pixel: sizes are whole numbers, and at least 1).
    scale = min(1.0, ANTHROPIC_MAX_EDGE / max(width, height), math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)))
    assert abs(w - max(1.0, width * scale)) <= 1 and abs(h - max(1.0, height * scale)) <= 1
