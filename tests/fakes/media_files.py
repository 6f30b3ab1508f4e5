"""Files users might send, made on the spot for tests: pictures, PDFs, voice notes, and broken ones of each.

Every builder returns the bytes of a real file of its kind (Pillow writes the pictures, the PDFs are
written by hand the way a PDF producer writes them, the Ogg pages are mutagen's), except the ``*_head``
builders: those give just the first bytes that tell a format apart, for the sniffing tests, since
no library here writes M4A, WebM, FLAC or AMR.
"""

from __future__ import annotations

import io
import random
import struct
import wave
import zlib

from mutagen.ogg import OggPage
from PIL import Image

TOP: tuple[int, int, int] = (220, 30, 30)
"""The colour of the upper half of :func:`jpeg` and :func:`png` pictures as stored (red)."""
BOTTOM: tuple[int, int, int] = (30, 30, 220)
"""... and of their lower half (blue): after turning a picture upright, the halves show where it went."""


def picture(width: int, height: int, *, mode: str = "RGB", alpha: int = 255) -> Image.Image:
    """A picture whose upper half is :data:`TOP` and lower half :data:`BOTTOM` (``alpha`` in RGBA)."""
    image = Image.new("RGBA", (width, height), (*TOP, alpha))
    image.paste((*BOTTOM, alpha), (0, height // 2, width, height))
    return image if mode == "RGBA" else image.convert(mode)


def jpeg(width: int, height: int, *, orientation: int | None = None, camera: str | None = None) -> bytes:
    """A JPEG photo; ``orientation`` (1-8) goes in its EXIF as a phone writes it, and so does ``camera`` (its make)."""
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    if camera is not None:
        exif[0x010F] = camera
    out = io.BytesIO()
    picture(width, height).save(out, "JPEG", quality=90, exif=exif.tobytes() if len(exif) else b"")
    return out.getvalue()


def png(width: int, height: int, *, alpha: int = 255, noisy: bool = False) -> bytes:
    """A PNG; ``alpha`` below 255 makes it see-through, ``noisy`` fills it with random pixels (a large file; with
    ``alpha`` below 255 the alpha is random too)."""
    if noisy:
        mode = "RGBA" if alpha < 255 else "RGB"
        image = Image.frombytes(mode, (width, height), _noise(width * height * len(mode)))
    else:
        image = picture(width, height, mode="RGBA" if alpha < 255 else "RGB", alpha=alpha)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def encoded(width: int, height: int, kind: str) -> bytes:
    """The test picture in another format Pillow writes (``GIF``, ``WEBP``, ``BMP``)."""
    out = io.BytesIO()
    picture(width, height).save(out, kind)
    return out.getvalue()


def animated_gif(width: int, height: int, frames: int = 3) -> bytes:
    """An animated GIF whose first frame is the test picture and the others plain green."""
    first = picture(width, height).convert("P")
    rest = [Image.new("RGB", (width, height), (0, 200, 0)).convert("P") for _ in range(frames - 1)]
    out = io.BytesIO()
    first.save(out, "GIF", save_all=True, append_images=rest, duration=100, loop=0)
    return out.getvalue()


def png_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A "PNG bomb": a valid header claiming ``width`` x ``height`` pixels and a few bytes of image data,
    which would take width x height x 3 bytes of memory (30 GB by default) to decode."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 64)) \
        + _png_chunk(b"IEND", b"")


def truncated(data: bytes, keep: float = 0.5) -> bytes:
    """The first ``keep`` of ``data``: a download cut short."""
    return data[: max(1, int(len(data) * keep))]


def pdf(pages: int = 1, text: str | None = "Hello from page") -> bytes:
    """A PDF of ``pages`` pages; page N shows ``f"{text} {N}"`` in Helvetica (pypdf extracts it), or nothing
    when ``text`` is None (as a scan: pictures, no text)."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for number in range(1, pages + 1):
        line = f"{text} {number}".replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
        stream = b"BT /F1 18 Tf 72 720 Td (" + line + b") Tj ET" if text is not None else b""
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content = len(objects)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> >> >>" % content)  # fmt: skip
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % pages
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def encrypted_pdf(password: str = "secret") -> bytes:
    """A one-page PDF that opens only with ``password`` (RC4, which pypdf writes without extra packages)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf(1))))
    writer.encrypt(user_password=password, owner_password=None, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def ogg_opus(seconds: float, *, pre_skip: int = 312) -> bytes:
    """An Ogg Opus voice note ``seconds`` long, as its headers and last page say (the audio packet is silence-sized
    filler: nothing here decodes it, and the length is read from the last page's granule position)."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, pre_skip, 48_000, 0, 0)
    vendor = b"switchboard tests"
    tags = b"OpusTags" + struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    return _ogg_stream([[head], [tags], [b"\xf8\xff\xfe"]], last_position=pre_skip + round(seconds * 48_000))


def ogg_vorbis_head() -> bytes:
    """The first page of an Ogg Vorbis stream (its identification header)."""
    return _ogg_stream([[b"\x01vorbis" + bytes(23)]], last_position=0)


def ogg_theora_head() -> bytes:
    """The first page of an Ogg Theora (video) stream."""
    return _ogg_stream([[b"\x80theora" + bytes(34)]], last_position=0)


def wav(seconds: float, *, rate: int = 8000) -> bytes:
    """A WAV file of ``seconds`` of silence (16-bit mono)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(rate)
        file.writeframes(bytes(2 * round(seconds * rate)))
    return out.getvalue()


def mp3(seconds: float, *, id3: bool = False) -> bytes:
    """An MP3 of ``seconds`` (MPEG-1 layer III frames, 128 kbit/s at 44.1 kHz, silent payload), with an ID3v2
    tag first when ``id3``."""
    frame = b"\xff\xfb\x90\x00" + bytes(417 - 4)
    frames = frame * round(seconds * 44_100 / 1152)
    return (_id3_tag() if id3 else b"") + frames


def flac_head() -> bytes:
    return b"fLaC\x00\x00\x00\x22" + bytes(34)


def m4a_head(major: bytes = b"M4A ", *compatible: bytes) -> bytes:
    """The ``ftyp`` box that starts an MP4-family file: ``M4A `` audio, ``isom``/``mp42`` video, ``qt  `` MOV."""
    brands = major + b"\x00\x00\x02\x00" + b"".join(compatible or (major, b"isom"))
    return struct.pack(">I", 8 + len(brands)) + b"ftyp" + brands + bytes(16)


def webm_head(*codecs: str) -> bytes:
    """The start of a WebM file (EBML header, then a track entry per codec id such as ``A_OPUS``, ``V_VP9``)."""
    ebml = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\xf7\x81\x01\x42\x82\x84webm\x42\x87\x81\x04\x42\x85\x81\x02"
    tracks = b"".join(b"\xae\x90\x86" + bytes([0x80 | len(codec)]) + codec.encode() for codec in codecs)
    return ebml + b"\x18\x53\x80\x67\x01\xff\xff\xff\xff\xff\xff\xff\x16\x54\xae\x6b" + tracks


def amr_head(wide: bool = False) -> bytes:
    return (b"#!AMR-WB\n" if wide else b"#!AMR\n") + bytes(32)


def _ogg_stream(pages: list[list[bytes]], *, last_position: int) -> bytes:
    out = []
    for sequence, packets in enumerate(pages):
        page = OggPage()
        page.serial = 0x5B0A2D
        page.sequence = sequence
        page.packets = packets
        page.first = sequence == 0
        page.last = sequence == len(pages) - 1
        page.position = last_position if page.last else 0
        out.append(page.write())
    return b"".join(out)


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _id3_tag() -> bytes:
    title = b"\x00switchboard"
    frame = b"TIT2" + struct.pack(">I", len(title)) + b"\x00\x00" + title
    return b"ID3\x04\x00\x00" + bytes([0, 0, 0, len(frame)]) + frame


def _noise(size: int) -> bytes:
    """Incompressible bytes, the same on every run."""
    return random.Random(28).randbytes(size)
