"""Files users send (photos, documents, voice notes): from the platform's bytes to what the model reads.

* ``errors``: :class:`MediaRejected`, a file that cannot be used, with the reason and the words a user is told;
* ``sniff``: what a file is, from its first bytes (never from its name or the platform's claim);
* ``images``: pictures checked, turned upright and downscaled for the model (Pillow);
* ``documents``: PDFs (pages, text) and text files read;
* ``audio``: how long a voice note or audio file is, from its bytes;
* ``transcribe``: voice notes to text through an OpenAI-compatible ``/audio/transcriptions`` endpoint;
* ``tool_pictures``: the pictures tools return, made ready and kept the same way as users' photos;
* ``pipeline``: one inbound message's attachments downloaded, checked and kept, as parts for the model,
  transcripts, and the problems the user is told about.
"""
