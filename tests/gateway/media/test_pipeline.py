"""One message's files through the media pipeline: parts for the model, transcripts, and a clear problem for
everything that cannot be used, each logged with its reason."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
from PIL import Image
from structlog.testing import capture_logs

from adapters.contract import Attachment, MediaUnavailable
from agent import MediaPart
from gateway.media import pipeline as pipeline_module
from gateway.media.errors import MediaRejected
from gateway.media.pipeline import MB, MediaProblem, Transcript
from tests.fakes import media_files as files
from tests.gateway.media.conftest import FileShelf, PipelineFactory, ScriptedTranscriber, message
from tests.waiting import eventually


def rejections(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "media.rejected"]


async def test_a_photo_becomes_an_image_part_downscaled_and_kept(
    make_pipeline: PipelineFactory, shelf: FileShelf, folder: Any
) -> None:
    shelf.files["p1"] = files.jpeg(4000, 3000, orientation=6)
    photo = Attachment(kind="photo", ref="p1", size=len(shelf.files["p1"]), width=4000, height=3000)

    prepared = await make_pipeline().prepare(shelf, message(photo, text="what is this?"))

    assert prepared.problems == [] and prepared.transcripts == []
    [part] = prepared.parts
    assert (part.kind, part.mime, part.origin, part.width, part.height) == ("image", "image/jpeg", "photo", 928, 1238)
    assert (part.sent_at, part.file_id, part.name) == (1_750_000_000.0, "p1", None)
    kept = await folder.read(part.sha256)
    assert kept is not None and len(kept) == part.size
    assert Image.open(io.BytesIO(kept)).size == (928, 1238)  # upright (portrait) and downscaled
    assert shelf.fetched == [("p1", 10 * MB, 60.0)]


@pytest.mark.parametrize(
    ("renditions", "taken", "width"),
    [
        # Every pixel the model gets (1568 on the long edge) is in "small": the larger ones cost more for nothing.
        ([("big", 3 * MB, 2560, 1920), ("small", 300_000, 1600, 1200), ("thumb", 40_000, 800, 600)], "small", 1238),
        # Over the limit, all but the thumbnail: the largest within the limit.
        ([("big", 11 * MB, 4000, 3000), ("thumb", 90_000, 800, 600)], "thumb", 800),
    ],
)
async def test_of_a_photos_renditions_the_smallest_with_every_pixel_the_model_gets_within_the_limit_is_downloaded(
    make_pipeline: PipelineFactory, shelf: FileShelf, renditions: list[tuple[str, int, int, int]], taken: str, width: int
) -> None:
    for ref, _, w, h in renditions:
        shelf.files[ref] = files.jpeg(w, h)
    smaller = tuple(Attachment(kind="photo", ref=ref, size=size, width=w, height=h) for ref, size, w, h in renditions)
    photo = Attachment(kind="photo", ref="huge", size=12 * MB, width=5000, height=3750, smaller=smaller)

    prepared = await make_pipeline().prepare(shelf, message(photo))

    assert [ref for ref, _, _ in shelf.fetched] == [taken]
    assert prepared.parts[0].width == width


async def test_a_file_claimed_over_the_limit_is_refused_before_downloading_with_the_limit_in_mb(
    make_pipeline: PipelineFactory, shelf: FileShelf
) -> None:
    report = Attachment(kind="document", name="report.pdf", mime_type="application/pdf", ref="r", size=34 * MB)
    photo = Attachment(kind="photo", ref="p", size=int(10.4 * MB))

    with capture_logs() as logs:
        prepared = await make_pipeline().prepare(shelf, message(report, photo))

    assert shelf.fetched == []
    assert prepared.problems == [
        MediaProblem("report.pdf", "too_large", "it is 34 MB and the limit for documents is 20 MB"),
        MediaProblem("the photo", "too_large", "it is 10.4 MB and the limit for images is 10 MB"),
    ]
    assert [(e["platform"], e["kind"], e["reason"], e["size"]) for e in rejections(logs)] == [
        ("loopback", "document", "too_large", 34 * MB), ("loopback", "photo", "too_large", int(10.4 * MB)),
    ]  # fmt: skip


async def test_the_limit_of_what_the_file_turns_out_to_be_applies_after_sniffing(
    make_pipeline: PipelineFactory, shelf: FileShelf
) -> None:
    # Sent as a document claiming to be a PDF; the bytes are a picture, over the (lowered) image limit.
    shelf.files["d"] = picture = files.png(300, 300, noisy=True)
    sent = Attachment(kind="document", name="scan.pdf", mime_type="application/pdf", ref="d", size=len(picture))

    prepared = await make_pipeline(limits={"image_mb": 0.1}).prepare(shelf, message(sent))

    assert shelf.fetched == [("d", 20 * MB, 60.0)]  # a document may be anything: the largest limit for the download
    [problem] = prepared.problems
    assert (problem.what, problem.reason) == ("scan.pdf", "too_large")
    assert problem.user_text == f"it is {len(picture) / MB:.1f} MB and the limit for images is 0.1 MB"


async def test_a_download_stopped_at_the_limit_says_the_limit(make_pipeline: PipelineFactory, shelf: FileShelf) -> None:
    shelf.files["big"] = b"x" * 20_000  # no size claimed: the download itself stops at the limit

    prepared = await make_pipeline(limits={"image_mb": 0.01, "document_mb": 0.01, "audio_mb": 0.01}).prepare(
        shelf, message(Attachment(kind="file", name="notes.txt", ref="big"))
    )

    assert shelf.fetched == [("big", int(0.01 * MB), 60.0)]
    assert prepared.problems == [MediaProblem("notes.txt", "too_large", "it is over the 0.01 MB limit for files")]


@pytest.mark.parametrize(
    ("error", "reason", "words"),
    [
        (MediaUnavailable("timeout", "the download took longer than 60 s"), "download_failed",
         "the download took longer than 60 seconds"),
        (MediaUnavailable("redirect", "sent elsewhere"), "download_failed",
         "its download address led to another site, which is not followed"),
        (MediaUnavailable("gone", "404"), "download_failed", "the platform no longer has the file; try sending it again"),
        (MediaUnavailable("refused", "403"), "download_failed",
         "the platform refused the download (the bot may lack the permission to read files)"),
        (MediaUnavailable("failed", "502"), "download_failed", "the download failed; try sending it again"),
        (MediaUnavailable("unsupported", "files sent on loopback cannot be read here"), "unsupported",
         "files sent on loopback cannot be read here"),
    ],
)  # fmt: skip
async def test_a_failed_download_is_a_problem_in_words_for_the_user(
    make_pipeline: PipelineFactory, shelf: FileShelf, error: MediaUnavailable, reason: str, words: str
) -> None:
    shelf.files["f"] = error

    with capture_logs() as logs:
        prepared = await make_pipeline().prepare(shelf, message(Attachment(kind="photo", ref="f", size=1000)))

    assert prepared.problems == [MediaProblem("the photo", reason, words)]
    [logged] = rejections(logs)
    assert (logged["reason"], logged["detail"]) == (reason, f"{error.reason}: {error}")


async def test_a_download_the_adapter_never_ends_is_given_up(
    make_pipeline: PipelineFactory, shelf: FileShelf, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline_module, "DOWNLOAD_GRACE", 0.0)
    shelf.files["f"] = asyncio.Event()  # never set

    prepared = await make_pipeline(download_timeout=0.05).prepare(shelf, message(Attachment(kind="photo", ref="f")))

    assert prepared.problems == [MediaProblem("the photo", "download_failed", "the download took longer than 0.05 seconds")]


@pytest.mark.parametrize(
    ("attachment", "words"),
    [
        (Attachment(kind="video", ref="v", size=1000), "video is not read here"),
        (Attachment(kind="sticker", ref="s", size=1000), "stickers are not read here"),
    ],
)
async def test_video_and_stickers_are_refused_without_downloading(
    make_pipeline: PipelineFactory, shelf: FileShelf, attachment: Attachment, words: str
) -> None:
    prepared = await make_pipeline().prepare(shelf, message(attachment))

    assert shelf.fetched == []
    assert [(p.reason, p.user_text) for p in prepared.problems] == [("unsupported", words)]


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (files.m4a_head(b"isom", b"isom", b"avc1"), "video is not read here"),
        (b"PK\x03\x04" + bytes(100), "this kind of file is not read here (pictures, PDFs, text files and voice notes are)"),
    ],
)
async def test_what_the_bytes_are_decides_not_the_name(
    make_pipeline: PipelineFactory, shelf: FileShelf, data: bytes, words: str
) -> None:
    shelf.files["f"] = data
    sent = Attachment(kind="document", name="photo.jpg", mime_type="image/jpeg", ref="f", size=len(data))

    with capture_logs() as logs:
        prepared = await make_pipeline().prepare(shelf, message(sent))

    assert prepared.problems == [MediaProblem("photo.jpg", "unsupported", words)]
    assert rejections(logs)[0]["size"] == len(data)


async def test_media_off_refuses_every_file(make_pipeline: PipelineFactory, shelf: FileShelf) -> None:
    shelf.files["p"] = files.jpeg(100, 100)

    with capture_logs() as logs:
        prepared = await make_pipeline(enabled=False).prepare(
            shelf, message(Attachment(kind="photo", ref="p"), Attachment(kind="voice", ref="v", duration=3.0))
        )

    assert shelf.fetched == [] and prepared.parts == []
    assert prepared.problems == [MediaProblem("the photo", "disabled", "files are not read here"),
                                 MediaProblem("your voice note", "disabled", "files are not read here")]  # fmt: skip
    assert [e["reason"] for e in rejections(logs)] == ["disabled", "disabled"]


async def test_a_pdf_is_kept_with_its_pages_and_text(make_pipeline: PipelineFactory, shelf: FileShelf, folder: Any) -> None:
    shelf.files["d"] = document = files.pdf(3, "Quarterly figures")
    sent = Attachment(kind="document", name="q3.pdf", mime_type="application/pdf", ref="d", size=len(document))

    prepared = await make_pipeline().prepare(shelf, message(sent, text="summarise"))

    [part] = prepared.parts
    assert (part.kind, part.mime, part.origin, part.pages, part.name) == ("pdf", "application/pdf", "pdf", 3, "q3.pdf")
    assert await folder.read(part.sha256) == document
    text = (await folder.read(part.text_sha256 or "")).decode()  # type: ignore[union-attr]
    assert "Quarterly figures 3" in text
    assert part.text_tokens and 0 < part.text_tokens < len(text)


async def test_a_long_pdfs_text_is_cut_with_a_note_to_the_model(
    make_pipeline: PipelineFactory, shelf: FileShelf, folder: Any
) -> None:
    shelf.files["d"] = files.pdf(300, "A line of the long report")

    prepared = await make_pipeline(limits={"text_chars": 1000, "pdf_pages": 500}).prepare(
        shelf, message(Attachment(kind="document", ref="d"))
    )

    text = (await folder.read(prepared.parts[0].text_sha256 or "")).decode()  # type: ignore[union-attr]
    assert text.endswith("[The text stops here: only the first 1,000 characters are shown (of 300 pages).]")


@pytest.mark.parametrize(
    ("data", "reason", "words"),
    [
        (files.pdf(2000), "too_many_pages", "it has 2,000 pages and the limit is 100"),
        (files.encrypted_pdf(), "encrypted",
         "the PDF is encrypted (password or copy protection); a copy saved without the protection can be read"),
        (files.truncated(files.png(400, 400, noisy=True)), "corrupt", "the picture is damaged or incomplete and could not be read"),
        (files.png_bomb(), "bomb", "the picture claims more than the 50 million pixels read here"),
    ],
)  # fmt: skip
async def test_bad_files_are_problems_and_the_others_still_go(
    make_pipeline: PipelineFactory, shelf: FileShelf, data: bytes, reason: str, words: str
) -> None:
    shelf.files["bad"] = data
    shelf.files["good"] = files.png(200, 100)

    with capture_logs() as logs:
        prepared = await make_pipeline().prepare(
            shelf, message(Attachment(kind="document", name="bad.bin", ref="bad"), Attachment(kind="photo", ref="good"))
        )

    assert prepared.problems == [MediaProblem("bad.bin", reason, words)]
    assert [(p.kind, p.mime, p.width) for p in prepared.parts] == [("image", "image/png", 200)]
    assert [(e["kind"], e["reason"], e["size"]) for e in rejections(logs)] == [("document", reason, len(data))]


async def test_a_text_file_is_kept_as_its_decoded_text(make_pipeline: PipelineFactory, shelf: FileShelf, folder: Any) -> None:
    shelf.files["t"] = "Zeile eins\r\nZeile zwei: ä".encode("utf-16")

    prepared = await make_pipeline().prepare(shelf, message(Attachment(kind="document", name="log.txt", ref="t")))

    [part] = prepared.parts
    assert (part.kind, part.mime, part.origin) == ("text", "text/plain", "document")
    assert part.sha256 == part.text_sha256
    assert await folder.read(part.sha256) == "Zeile eins\nZeile zwei: ä".encode()
    assert part.size == len("Zeile eins\nZeile zwei: ä".encode())


async def test_without_transcription_a_voice_note_is_refused_before_downloading(
    make_pipeline: PipelineFactory, shelf: FileShelf
) -> None:
    shelf.files["v"] = files.ogg_opus(4)

    with capture_logs() as logs:
        prepared = await make_pipeline().prepare(shelf, message(Attachment(kind="voice", ref="v", duration=4.0)))

    assert shelf.fetched == []
    assert prepared.problems == [MediaProblem("your voice note", "no_transcription", "voice messages are not supported here")]
    assert [(e["kind"], e["reason"]) for e in rejections(logs)] == [("voice", "no_transcription")]


async def test_a_voice_note_is_measured_and_transcribed(make_pipeline: PipelineFactory, shelf: FileShelf, folder: Any) -> None:
    shelf.files["v"] = note = files.ogg_opus(4.5)
    transcriber = ScriptedTranscriber("  remind me to call Anna  ")

    prepared = await make_pipeline(transcriber).prepare(shelf, message(Attachment(kind="voice", ref="v", duration=4.0)))

    assert prepared.parts == [] and prepared.problems == []
    assert prepared.transcripts == [Transcript("remind me to call Anna", "voice", pytest.approx(4.5), None)]
    [heard] = transcriber.heard
    assert (heard.data, heard.mime, heard.name) == (note, "audio/ogg", "voice.ogg")
    assert not (folder.root.exists() and any(folder.root.rglob("*"))), "voice notes are not kept"


async def test_an_audio_file_gets_the_extension_of_what_it_is(make_pipeline: PipelineFactory, shelf: FileShelf) -> None:
    shelf.files["a"] = files.mp3(3, id3=True)
    transcriber = ScriptedTranscriber("a song")

    prepared = await make_pipeline(transcriber).prepare(
        shelf, message(Attachment(kind="audio", name="Meeting notes.oga", ref="a"))
    )

    assert prepared.transcripts == [Transcript("a song", "audio", pytest.approx(3, rel=0.01), "Meeting notes.oga")]
    assert transcriber.heard[0].name == "Meeting notes.mp3"


async def test_a_voice_note_longer_than_the_limit_is_refused_by_its_claim_or_its_bytes(
    make_pipeline: PipelineFactory, shelf: FileShelf
) -> None:
    shelf.files["claimed"] = files.ogg_opus(5)
    shelf.files["measured"] = files.ogg_opus(3 * 3600)  # the platform says a minute; the file says three hours
    transcriber = ScriptedTranscriber()

    prepared = await make_pipeline(transcriber).prepare(shelf, message(
        Attachment(kind="voice", ref="claimed", duration=11 * 60.0),
        Attachment(kind="audio", name="lecture.ogg", ref="measured", duration=60.0),
    ))  # fmt: skip

    assert [ref for ref, _, _ in shelf.fetched] == ["measured"]
    assert prepared.problems == [
        MediaProblem("your voice note", "too_long", "it is 11 minutes long and the limit is 10 minutes"),
        MediaProblem("lecture.ogg", "too_long", "it is 180 minutes long and the limit is 10 minutes"),
    ]
    assert transcriber.heard == []


async def test_the_platforms_claim_stands_in_when_the_file_does_not_say_its_length(
    make_pipeline: PipelineFactory, shelf: FileShelf
) -> None:
    shelf.files["w"] = clip = files.webm_head("A_OPUS") + bytes(1000)  # mutagen does not read WebM
    transcriber = ScriptedTranscriber()

    prepared = await make_pipeline(transcriber).prepare(shelf, message(
        Attachment(kind="voice", ref="w", duration=30.0), Attachment(kind="audio", ref="w"),
    ))  # fmt: skip

    assert [t.duration for t in prepared.transcripts] == [30.0, None]
    assert [(h.data, h.mime, h.name) for h in transcriber.heard] == [(clip, "audio/webm", "voice.webm"),
                                                                     (clip, "audio/webm", "audio.webm")]  # fmt: skip


@pytest.mark.parametrize(
    ("transcriber", "words"),
    [
        (ScriptedTranscriber(error=MediaRejected("transcription_failed", "the transcription service did not answer")),
         "the transcription service did not answer"),
        (ScriptedTranscriber("   "), "no speech was heard in it"),
    ],
)  # fmt: skip
async def test_a_failed_transcription_is_a_problem(
    make_pipeline: PipelineFactory, shelf: FileShelf, transcriber: ScriptedTranscriber, words: str
) -> None:
    shelf.files["v"] = files.ogg_opus(2)

    prepared = await make_pipeline(transcriber).prepare(shelf, message(Attachment(kind="voice", ref="v")))

    assert prepared.problems == [MediaProblem("your voice note", "transcription_failed", words)]


async def test_an_audio_file_sent_as_a_document_without_transcription_is_refused(
    make_pipeline: PipelineFactory, shelf: FileShelf
) -> None:
    shelf.files["a"] = files.wav(1)

    prepared = await make_pipeline().prepare(shelf, message(Attachment(kind="document", name="memo.wav", ref="a")))

    assert prepared.problems == [MediaProblem("memo.wav", "no_transcription", "voice messages are not supported here")]


async def test_an_error_of_ours_is_a_problem_not_a_crash(make_pipeline: PipelineFactory, shelf: FileShelf) -> None:
    shelf.files["boom"] = RuntimeError("an adapter bug")
    shelf.files["fine"] = files.jpeg(50, 50)

    with capture_logs() as logs:
        prepared = await make_pipeline().prepare(
            shelf, message(Attachment(kind="photo", ref="boom"), Attachment(kind="photo", ref="fine"))
        )

    assert prepared.problems == [MediaProblem("the photo", "failed", "it could not be read because of an error on our side")]
    assert len(prepared.parts) == 1
    assert [e["event"] for e in logs if e["log_level"] in ("error", "warning")] == ["media.failed", "media.rejected"]


async def test_parts_keep_the_order_of_the_attachments(make_pipeline: PipelineFactory, shelf: FileShelf) -> None:
    for width in (100, 200, 300):
        shelf.files[f"p{width}"] = files.jpeg(width, 50)
    album = [Attachment(kind="photo", ref=f"p{width}") for width in (300, 100, 200)]

    prepared = await make_pipeline().prepare(shelf, message(*album))

    assert [part.width for part in prepared.parts] == [300, 100, 200]
    assert all(isinstance(part, MediaPart) for part in prepared.parts)


async def test_at_most_max_parallel_files_are_handled_at_once_across_messages(
    make_pipeline: PipelineFactory, shelf: FileShelf
) -> None:
    gate = asyncio.Event()
    for n in range(5):
        shelf.files[f"p{n}"] = gate
        shelf.held[f"p{n}"] = files.jpeg(60 + n, 40)
    pipeline = make_pipeline(max_parallel=2)

    first = asyncio.create_task(pipeline.prepare(shelf, message(*[Attachment(kind="photo", ref=f"p{n}") for n in range(3)])))
    second = asyncio.create_task(pipeline.prepare(shelf, message(*[Attachment(kind="photo", ref=f"p{n}") for n in (3, 4)],
                                                                 event_id="8")))  # fmt: skip
    await eventually(lambda: shelf.downloading == 2, "two downloads under way")
    for _ in range(20):
        await asyncio.sleep(0)  # a chance for a third download to start, if the limit let it
    assert shelf.downloading == 2

    gate.set()
    done = await asyncio.gather(first, second)

    assert [len(prepared.parts) for prepared in done] == [3, 2]
    assert shelf.most_at_once == 2
