"""Full-text and substring search over messages.

``fulltext.py`` runs a query and cuts the excerpts; ``query.py`` turns what a person typed into an
FTS5 expression; ``cjk.py`` indexes Chinese, Japanese and Korean text as character pairs;
``words.py`` keeps the vocabulary of message words that substring search looks words up in, and
``indexer.py`` fills it in the background; ``call_text.py`` renders tool calls as the index reads
them. Only ``storage`` itself imports from here: callers go through ``storage/__init__.py``.
"""
