"""Replies shown while the model writes them (issue 27), one concept per module:

* :mod:`.reply_stream`: :class:`ReplyStream`, one turn's streamed reply: the latest text (and the
  tool line) in, coalesced updates out at the platform's pace, inside the chat's rate budget;
* :mod:`.surface`, :mod:`.draft`, :mod:`.edited`, :mod:`.native`: the three ways a platform shows
  a growing text (an ephemeral draft, a message edited in place, the platform's streaming API);
* :mod:`.refusals`: which way to try for a chat, and the refusals remembered per kind of chat;
* :mod:`.marks`: how a message the answer will not reach is ended ("— stopped", "— interrupted");
* :mod:`.sweep`: at start, the streamed messages a crash left whose turn will not run again.

An edited or natively streamed message is a *live* outbox row from before its first send
(``storage/outbox_live.py``): the turn's end makes it the reply's first chunk, so delivery edits
it to the final text, after a crash too, and it is never posted twice.
"""

from gateway.delivery.streaming.marks import INTERRUPTED_MARK, STOPPED_MARK
from gateway.delivery.streaming.refusals import StreamRefusals
from gateway.delivery.streaming.reply_stream import ReplyStream, StreamTarget
from gateway.delivery.streaming.sweep import close_orphaned_streams

__all__ = ["INTERRUPTED_MARK", "STOPPED_MARK", "ReplyStream", "StreamRefusals", "StreamTarget", "close_orphaned_streams"]
