"""The memory the gateway's process takes for 20 phone photos arriving at once (part of :mod:`bench.media`).

:func:`measure` runs the fake Telegram Bot API in this process and, for each run, a fresh child
process (``python -m bench.media_memory``) that does what the gateway does with a photo: the real
aiogram adapter receives the messages by long polling, and ``MediaPipeline.prepare`` downloads
each file through the adapter's ``fetch_media`` (getFile, then the file URL), sniffs, checks,
downscales and re-encodes it, and keeps it in a real ``MediaFolder`` under a temporary home. The
emulator, which holds every file's bytes, is not in the measured process.

The photos are 4032 x 3024 JPEGs of about 3.5 MB (:func:`bench.media_pictures.photo`), one per
user's private chat, sent as files: Telegram's own photo messages are at most 2,560 px wide, so a
phone's full-size picture reaches a bot as a document, and its smaller renditions are not there
to pick from. The child

1. starts the adapter and takes every message in (their text is small; no file is fetched yet);
2. prepares one 800 x 600 photo through the same path (the decoders, the thread pool and the
   HTTP connection are then set up, as in a gateway that has been running a while);
3. measures its resident memory at rest (``rss_idle_mb``, after a garbage collection);
4. resets the kernel's peak (``VmHWM``, by writing 5 to ``/proc/self/clear_refs``), samples
   ``VmRSS`` every SAMPLE_S on a thread as well, and prepares the 20 messages at once;
5. reports the peak (the larger of ``VmHWM`` and the samples) and what remained afterwards.

``MB`` here is 1,048,576 bytes, as in ``media.limits``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from bench.media_pictures import photo
from tests.gateway.processes import REPO, clean_env

MB: Final = 1024 * 1024
SIZE: Final = (4032, 3024)
WARM_UP_SIZE: Final = (800, 600)
WARM_UP: Final = "warm-up"
"""The caption of the warm-up photo (the child tells it from the others by it)."""
SAMPLE_S: Final = 0.002
CHILD_TIMEOUT_S: Final = 300.0
FIRST_USER: Final = 5001


def pictures(count: int) -> list[bytes]:
    """``count`` different phone photos."""
    return [photo(*SIZE, seed=seed) for seed in range(1, count + 1)]


async def measure(home: Path, photos: Sequence[bytes], *, max_parallel: int) -> dict[str, Any]:
    """One child process's figures for ``photos`` arriving at once, with ``media.max_parallel`` set so."""
    from tests.fakes.telegram_api import TelegramAPI, User

    api = TelegramAPI()
    await api.start()
    try:
        await api.send_document(User(id=FIRST_USER - 1, first_name="Warm"), "warm-up.jpg", "image/jpeg",
                                data=photo(*WARM_UP_SIZE, seed=0), caption=WARM_UP)  # fmt: skip
        for number, data in enumerate(photos):
            user = User(id=FIRST_USER + number, first_name=f"User {number}")
            await api.send_document(user, f"IMG_{number:04d}.jpg", "image/jpeg", data=data, caption="what is this?")
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.media_memory", "--api", api.base_url, "--token", api.token,
            "--count", str(len(photos)), "--max-parallel", str(max_parallel), "--home", str(home),
            cwd=REPO, env=clean_env(home), stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(child.communicate(), CHILD_TIMEOUT_S)
        except TimeoutError:
            child.kill()
            await child.wait()
            raise RuntimeError(f"benchmark broken: the memory child took more than {CHILD_TIMEOUT_S:.0f} s") from None
    finally:
        await api.stop()
    lines = out.decode(errors="replace").strip().splitlines()
    if child.returncode != 0 or not lines:
        raise RuntimeError(f"benchmark broken: the memory child exited {child.returncode}: {lines[-5:]}")
    return json.loads(lines[-1])


# -- the child process ------------------------------------------------------------------------------


class Resident:
    """This process's resident memory (Linux ``/proc/self``): now, and the most since :meth:`watch` began."""

    def __init__(self) -> None:
        self.samples = 0
        self.kernel_peak = False
        """Whether the kernel's own peak (VmHWM) could be reset, so it counts too."""
        self._most = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def status(field: str) -> int:
        """A ``/proc/self/status`` figure in bytes (``VmRSS``, ``VmHWM``)."""
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"/proc/self/status has no {field}")

    def watch(self) -> None:
        """Reset the peak and start sampling."""
        try:
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux 4.0 and later)
            self.kernel_peak = True
        except OSError:
            self.kernel_peak = False
        self._most = self.status("VmRSS")
        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)
        self._thread.start()

    def peak(self) -> int:
        """Stop sampling; the most resident memory since :meth:`watch`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return max(self._most, self.status("VmHWM") if self.kernel_peak else 0)

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._most = max(self._most, self.status("VmRSS"))
            self.samples += 1


async def _child(args: argparse.Namespace) -> dict[str, Any]:
    from adapters.contract import InboundMessage
    from adapters.telegram import TelegramAdapter, TelegramSettings
    from adapters.telegram.polling import PollingSettings
    from config.media import MediaConfig
    from gateway.media.pipeline import MediaPipeline
    from storage import MediaFolder

    inbox: list[InboundMessage] = []
    arrived = asyncio.Event()

    async def intake(message: InboundMessage) -> None:
        inbox.append(message)
        if len(inbox) > args.count:
            arrived.set()

    settings = TelegramSettings(token=args.token, api_base_url=args.api, polling=PollingSettings(poll_timeout=1))
    adapter = TelegramAdapter(settings)
    await adapter.start(intake)
    try:
        await asyncio.wait_for(arrived.wait(), 60)
        pipeline = MediaPipeline(MediaConfig(max_parallel=args.max_parallel), MediaFolder(args.home / "media"), None)
        [warm_up] = [m for m in inbox if m.text == WARM_UP]
        photos = [m for m in inbox if m is not warm_up]
        warmed = await pipeline.prepare(adapter, warm_up)
        if warmed.problems or not warmed.parts:
            raise RuntimeError(f"the warm-up photo was not prepared: {warmed.problems}")
        gc.collect()
        await asyncio.sleep(0.5)
        resident = Resident()
        idle = resident.status("VmRSS")
        resident.watch()
        began = time.perf_counter()
        prepared = await asyncio.gather(*(pipeline.prepare(adapter, message) for message in photos))
        seconds = time.perf_counter() - began
        peak = resident.peak()
        problems = [problem for result in prepared for problem in result.problems]
        parts = [part for result in prepared for part in result.parts]
        del prepared
        gc.collect()
        after = resident.status("VmRSS")
    finally:
        await adapter.close()
    return {
        "photos": len(photos), "prepared": len(parts), "problems": [p.reason for p in problems],
        "downloaded_mb": sum(m.attachments[0].size or 0 for m in photos) / MB,
        "sent_mb": sum(part.size for part in parts) / MB,
        "sent_size": f"{parts[0].width}x{parts[0].height}" if parts else "none",
        "max_parallel": args.max_parallel, "seconds": seconds,
        "rss_idle_mb": idle / MB, "rss_peak_mb": peak / MB, "rss_after_mb": after / MB,
        "peak_above_idle_mb": (peak - idle) / MB, "after_above_idle_mb": (after - idle) / MB,
        "samples": resident.samples, "kernel_peak": resident.kernel_peak,
    }  # fmt: skip


def _run_child(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description="the measured side of bench.media's memory figure")
    parser.add_argument("--api", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--max-parallel", type=int, required=True)
    parser.add_argument("--home", type=Path, required=True)
    result = asyncio.run(_child(parser.parse_args(argv)))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_run_child(sys.argv[1:]))
