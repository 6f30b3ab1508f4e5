"""A local Telegram Bot API server for tests (see :mod:`.server`), runnable in-process or as
``python -m tests.fakes.telegram_api --port N``."""

from .builders import Chat, User, text_mention
from .files import Fault
from .flood import FloodControl
from .html_check import ParseError, parse_html, utf16_length
from .media import Document, Rendition
from .screen import Screen, Shown
from .server import BotMessage, Call, TelegramAPI
from .wire import Failure

__all__ = (
    "BotMessage",
    "Call",
    "Chat",
    "Document",
    "Failure",
    "Fault",
    "FloodControl",
    "ParseError",
    "Rendition",
    "Screen",
    "Shown",
    "TelegramAPI",
    "User",
    "parse_html",
    "text_mention",
    "utf16_length",
)
