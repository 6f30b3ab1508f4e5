"""Pictures for the media benchmark that weigh what real ones do: phone photos and screenshots.

The test builders (:mod:`tests.fakes.media_files`) draw two flat colours, which any encoder
squeezes to a few kilobytes; a benchmark of memory and of base64 length needs files of a real
photo's and a real screenshot's size. :func:`photo` is a smooth colour field under film grain
(a 4032 x 3024 JPEG at quality 90 comes to about 3.5 MB, as a phone's does); :func:`screenshot`
is lines of words in anti-aliased type on white, saved as PNG (a 1920 x 1080 one is about
300 kB). Both are the same for the same ``seed``.
"""

from __future__ import annotations

import functools
import io
import random

from PIL import Image, ImageChops, ImageDraw, ImageFont

GRAIN = 0.16
"""The film grain's strength (its share of full-range noise): a phone photo's JPEG size, about 0.3 bytes a pixel."""
JPEG_QUALITY = 90
"""What phone cameras save at."""


def photo(width: int, height: int, *, seed: int = 0) -> bytes:
    """A JPEG photo of ``width`` x ``height``: soft colour patches under grain, different for each ``seed``."""
    rng = random.Random(seed)
    cells = (max(2, width // 64), max(2, height // 64))
    field = Image.frombytes("RGB", cells, rng.randbytes(cells[0] * cells[1] * 3))
    field = field.resize((width, height), Image.Resampling.BICUBIC)
    grain = ImageChops.offset(_grain(width, height), rng.randrange(width), rng.randrange(height))
    out = io.BytesIO()
    Image.blend(field, grain, 0.5).save(out, "JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def screenshot(width: int, height: int, *, seed: int = 0) -> bytes:
    """A PNG screenshot of ``width`` x ``height``: a coloured bar, then lines of made-up words in anti-aliased
    type on white (as a page or a chat looks)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randrange(2, 10))) for _ in range(400)]
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    bar = max(8, height // 20)
    draw.rectangle((0, 0, width, bar), fill=(40, 90, 160))
    font = ImageFont.load_default(size=15)
    for top in range(bar + 12, height - 20, 22):
        draw.text((16, top), " ".join(rng.choice(words) for _ in range(width // 40)), fill=(30, 30, 30), font=font)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


@functools.cache
def _grain(width: int, height: int) -> Image.Image:
    """Grey noise around mid-grey as an RGB picture, the same on every run (made once per size; each photo
    shifts it)."""
    noise = Image.frombytes("L", (width, height), random.Random(width * height).randbytes(width * height))
    noise = noise.point(lambda value: round(128 + (value - 128) * GRAIN))
    return Image.merge("RGB", (noise, noise, noise))
