"""Pictures users send, made ready for the model with Pillow: checked, upright, small enough, without metadata.

:func:`prepare_image` is synchronous and CPU-bound (the pipeline runs it in a thread). It

* refuses a picture whose header claims more pixels than allowed before decoding anything
  (a "PNG bomb": a few kilobytes that would decode to gigabytes), with reason ``bomb``;
* refuses a file that does not decode to the end (truncated, damaged) with reason ``corrupt``;
* takes the first frame of an animation (GIF, WebP, APNG);
* turns the picture upright by its EXIF orientation (phones store it sideways and say so in EXIF);
* scales it down, keeping its aspect ratio, to fit both the long edge and the pixel count the
  model's provider works with (:data:`agent.ANTHROPIC_MAX_EDGE`, :data:`agent.ANTHROPIC_MAX_PIXELS`),
  so the tokens it costs are known and no upload is wasted on pixels the provider drops;
* encodes it anew, which leaves EXIF (GPS position, camera, time), XMP and comments behind: JPEG
  (quality 85) for photos, PNG where the source is lossless (screenshots, diagrams: their text
  stays sharp) or has transparency, unless that PNG would pass :data:`MAX_PNG_BYTES`.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass
from typing import Any, Final

from PIL import Image, ImageOps

from agent import ANTHROPIC_MAX_EDGE, ANTHROPIC_MAX_PIXELS
from gateway.media.errors import MediaRejected

FORMATS: Final = ("JPEG", "PNG", "GIF", "WEBP", "BMP")
"""The decoders Pillow may use here: those of the types :mod:`gateway.media.sniff` lets through, no others."""
LOSSLESS: Final = frozenset({"PNG", "GIF", "BMP"})
JPEG_QUALITY: Final = 85
MAX_PNG_BYTES: Final = 3_500_000
"""A PNG larger than this (a photo saved as PNG) goes as JPEG: Anthropic takes at most 5 MB of base64 per image."""

# Pillow warns (on stderr) about pictures above its own built-in pixel limit; the caller's limit
# (media.limits.image_megapixels) is checked right after opening and refuses them with a reason.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


@dataclass(frozen=True, slots=True)
class PreparedImage:
    data: bytes
    mime: str
    width: int
    height: int


def prepare_image(data: bytes, *, max_pixels: int) -> PreparedImage:
    """``data`` (a sniffed picture) checked, upright, downscaled and re-encoded (see the module's docstring)."""
    try:
        # Not closed by a with-block: it reads from memory, and when no resize is needed it is the picture encoded.
        image = Image.open(io.BytesIO(data), formats=FORMATS)
        width, height = image.size
        if width * height > max_pixels:
            raise MediaRejected("bomb", f"the picture is {width} x {height} pixels, {_over(max_pixels)}")
        lossless = image.format in LOSSLESS
        image.draft(None, fitted(width, height))  # JPEG: decoded at 1/2, 1/4 or 1/8 when that is still enough
        image.load()
        icc = image.info.get("icc_profile")
        ImageOps.exif_transpose(image, in_place=True)  # in place: no second copy of the pixels
    except Image.DecompressionBombError:
        # Pillow's own limit: it refuses pictures past twice its 89 megapixels as it opens them.
        raise MediaRejected("bomb", f"the picture claims {_over(max_pixels)}") from None
    except MediaRejected:
        raise
    except Exception as error:  # noqa: BLE001 - any failure to decode untrusted bytes means the same to the user
        raise MediaRejected("corrupt", "the picture is damaged or incomplete and could not be read") from error
    size = fitted(*image.size)
    if size != image.size:
        image = image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    return _encode(image, lossless=lossless, icc=icc)


def fitted(width: int, height: int) -> tuple[int, int]:
    """``width`` x ``height`` scaled down (never up) to fit the provider's long edge and pixel count."""
    scale = min(1.0, ANTHROPIC_MAX_EDGE / max(width, height), math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)))
    if scale >= 1.0:
        return width, height
    # The edge that binds lands on the limit exactly (1568.0 may come out as 1567.9999...), and never past it.
    w, h = max(1, math.floor(width * scale + 1e-6)), max(1, math.floor(height * scale + 1e-6))
    while max(w, h) > ANTHROPIC_MAX_EDGE or w * h > ANTHROPIC_MAX_PIXELS:
        w, h = (w - 1, h) if w >= h else (w, h - 1)
    return w, h


def _encode(image: Image.Image, *, lossless: bool, icc: bytes | None) -> PreparedImage:
    transparent = _transparent(image)
    if transparent is not None or lossless:
        png = _saved(transparent or _opaque(image), "PNG", icc, compress_level=6)
        if len(png) <= MAX_PNG_BYTES:
            return PreparedImage(png, "image/png", *image.size)
    jpeg = _saved(_opaque(transparent or image), "JPEG", icc, quality=JPEG_QUALITY)
    return PreparedImage(jpeg, "image/jpeg", *image.size)


def _saved(image: Image.Image, encoding: str, icc: bytes | None, **options: Any) -> bytes:
    """``image`` encoded as ``encoding`` (JPEG, PNG) with nothing of the original file's metadata but its colour profile."""
    image.info = {}  # EXIF, XMP, comments, text chunks: Pillow would carry some of them into the new file
    if icc:
        options["icc_profile"] = icc  # colours, not personal data
    out = io.BytesIO()
    image.save(out, encoding, **options)
    return out.getvalue()


def _transparent(image: Image.Image) -> Image.Image | None:
    """The picture as RGBA when some of it is see-through, else None (an alpha channel all opaque counts as none)."""
    if image.mode not in _ALPHA_MODES and "transparency" not in image.info:
        return None
    rgba = image.convert("RGBA")
    return None if rgba.getchannel("A").getextrema() == (255, 255) else rgba


def _opaque(image: Image.Image) -> Image.Image:
    """The picture without transparency (laid over white), in a mode both JPEG and PNG take."""
    if image.mode == "RGBA":
        white = Image.new("RGB", image.size, (255, 255, 255))
        white.paste(image, mask=image.getchannel("A"))
        return white
    return image if image.mode in ("RGB", "L") else image.convert("RGB")


def _over(max_pixels: int) -> str:
    return f"more than the {max_pixels / 1e6:g} million pixels read here"


_ALPHA_MODES: Final = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
