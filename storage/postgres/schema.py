"""The PostgreSQL schema, as an ordered list of forward migrations (as ``storage/schema.py`` is for SQLite).

Version N of the schema is what migrations 1..N produce; ``LATEST`` is the version this build writes.
The numbering is the PostgreSQL engine's own: version 1 here is the SQLite schema at its version 10,
minus what SQLite needed only for its own search machinery (``messages_fts``, ``search_cjk``,
``search_words``): PostgreSQL searches with its own. Never edit a migration that has shipped.

Notes on the layout (the SQLite notes in ``storage/schema.py`` hold for the tables both share):

* Times are ``double precision`` seconds since the epoch, the floats the records carry; ids are
  ``bigint`` identities ``BY DEFAULT``, so a copy from SQLite keeps its ids (and then moves the
  identity past them).
* What SQLite stores as JSON text is ``jsonb`` here: ``messages.tool_calls``, ``messages.media`` and
  ``inbox.payload``.
* ``messages.words`` is the ``tsvector`` word search reads: a generated column, so every writer (the
  store, ``storage migrate``, a hand-written INSERT) keeps it right without a trigger. It holds the
  words of the text, the tool name and the tool calls as decoded text (the names and the argument
  values, not the argument JSON escaped a second time; see ``storage/search/call_text.py`` for why),
  parsed with the ``switchboard`` configuration: ``simple`` (no stemming, no stop words) with accents
  taken off (``unaccent``), as SQLite's ``unicode61 remove_diacritics 2`` tokenizer.
* CJK: the parser reads a whole CJK run as one word, so ``words`` also holds each run as its
  overlapping character pairs (``cjk_words``, the same stream as ``storage/search/cjk.py``'s
  ``cjk_tokens``): a CJK query of any length, one or two characters included, is a lookup in the
  word index. The pairs are computed in SQL so that the column stays a generated one.
* Punctuation: the parser keeps some tokens whole across it ("P2.2", "my-app.config.ts", URLs, hosts,
  "-5"), where SQLite's tokenizer splits at every punctuation mark; so ``words`` also holds the words
  of such text read with punctuation as spaces (``part_words``): "P2" finds "P2.2" with one lookup.
* The functions the column calls give the same words whatever the ``search_path`` of the writer
  (``pg_restore`` runs with an empty one): the SQL ones have their names bound when created, the
  PL/pgSQL ones carry the path of the schema they were created in (``_PINNED_PATH``).
* Parts of words ("ploy" in "redeployment") are found through ``search_vocabulary``, the distinct
  words of the messages (the lexemes of ``words``: lower case, no accents) with a GIN trigram index
  (``pg_trgm``), as SQLite's ``search_words``: the words containing the part, then the messages
  holding those words through the word index. The append statement adds a message's new words
  (``storage/postgres/vocabulary.py``); a trigram index over each message's own words cost every
  append some 300 index keys. ``word`` compares byte by byte (``COLLATE "C"``): the appends add
  their words in that order, so two of them adding the same words never deadlock.
* ``sessions.last_seq`` is the ``seq`` of the session's last message (its ``message_count``): an append
  moves it and numbers its messages from it in one statement, under the row lock the ``UPDATE`` takes
  (``storage/postgres/messages.py``), and reading a session needs no ``MAX(seq)`` over its messages.
* ``sessions.title`` compares byte by byte (``COLLATE "C"``), as SQLite's BINARY does, whatever the
  database's locale: a chain's numbered titles are found by a range scan (``"notes #0" <= title <
  "notes #:"``, ``storage/titles.py``), which a language collation would reorder (ICU sorts ``:``
  before the digits; glibc's ``en_US`` skips punctuation), and unique means the same characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from storage.search.cjk import CJK_CLASS

__all__ = ["EXTENSIONS", "LATEST", "MIGRATIONS", "Migration", "TEXT_SEARCH_CONFIG"]

TEXT_SEARCH_CONFIG: Final = "switchboard"
"""The text search configuration of ``messages.words``; a query must parse its words with the same one."""

EXTENSIONS: Final = ("pg_trgm", "unaccent")
"""The extensions the schema needs (``doctor`` checks the server offers them)."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


# Accents off before the ``simple`` dictionary, for the token types that can hold non-ASCII letters.
_CONFIG: Final = (
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    f"CREATE TEXT SEARCH CONFIGURATION {TEXT_SEARCH_CONFIG} (COPY = simple)",
    f"""ALTER TEXT SEARCH CONFIGURATION {TEXT_SEARCH_CONFIG}
        ALTER MAPPING FOR word, numword, hword, hword_part, numhword WITH unaccent, simple""",
)

# The CJK pair stream of ``storage.search.cjk.cjk_tokens`` as words: each CJK run as its overlapping
# pairs and its last character, the text between runs kept in place ("用docker部署" -> 用 docker 部署 署);
# no words at all for text without CJK (the usual case, decided on the first test).
_CJK_WORDS: Final = f"""CREATE FUNCTION cjk_words(body text) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    piece text[];
    tokens text[] := '{{}}';
BEGIN
    IF octet_length(body) = char_length(body) OR body !~ '[{CJK_CLASS}]' THEN
        RETURN ''::tsvector;
    END IF;
    FOR piece IN SELECT regexp_matches(body, '([{CJK_CLASS}]+)|([^{CJK_CLASS}]+)', 'g') LOOP
        IF piece[1] IS NULL THEN
            tokens := tokens || piece[2];
        ELSE
            FOR i IN 1 .. char_length(piece[1]) - 1 LOOP
                tokens := tokens || substr(piece[1], i, 2);
            END LOOP;
            tokens := tokens || right(piece[1], 1);
        END IF;
    END LOOP;
    RETURN to_tsvector('{TEXT_SEARCH_CONFIG}', array_to_string(tokens, ' '));
END
$$"""

# The parts of the tokens the parser keeps whole across punctuation ("P2.2", "my-app.config.ts",
# "deployment.apps/chat-send", "-5"): the words of the text read again with punctuation as spaces, as
# SQLite's unicode61 tokenizer reads it, so "p2", "ts" and "5" are words too. Only for text where such
# a token may be (a ".", "/", "@" or "~" before a non-space, a sign before a digit): other text is not
# parsed twice. A SQL body, so its names are bound when it is created, whatever the caller's
# search_path; not STRICT, so the planner inlines it (a call of a SQL function costs more than the test).
_JOINED: Final = "[./@~][^[:space:]]|[-+][0-9]"  # where a token may hold punctuation
_PART_WORDS: Final = f"""CREATE FUNCTION part_words(body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN body ~ '{_JOINED}'
        THEN to_tsvector('{TEXT_SEARCH_CONFIG}', regexp_replace(body, '[[:punct:]]+', ' ', 'g'))
        ELSE ''::tsvector END"""

# The words of a message's tool calls: each call's name and the values of its arguments, the
# arguments decoded from the JSON string the model APIs send (taken as they are when they are not
# JSON). Immutable, so a generated column may call it; a bad argument string never fails an insert.
# Strict: a message without tool calls (most of them) does not call it at all.
_CALL_WORDS: Final = f"""CREATE FUNCTION call_words(calls jsonb) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL RESTRICTED AS $$
DECLARE
    call jsonb;
    arguments jsonb;
    said text;
    words tsvector := ''::tsvector;
BEGIN
    IF jsonb_typeof(calls) <> 'array' THEN
        RETURN words;
    END IF;
    FOR call IN SELECT value FROM jsonb_array_elements(calls) LOOP
        CONTINUE WHEN jsonb_typeof(call) <> 'object';
        words := words || to_tsvector('{TEXT_SEARCH_CONFIG}', coalesce(call->>'name', ''));
        BEGIN
            arguments := (call->>'arguments')::jsonb;
        EXCEPTION WHEN others THEN
            arguments := to_jsonb(call->>'arguments');
        END;
        IF arguments IS NOT NULL THEN
            words := words || jsonb_to_tsvector('{TEXT_SEARCH_CONFIG}', arguments, '["string", "numeric"]');
        END IF;
        CONTINUE WHEN concat(call->>'name', ' ', arguments) !~ '[{CJK_CLASS}]|{_JOINED}';
        said := concat(call->>'name', ' ', (
            SELECT string_agg(value #>> '{{}}', ' ') FROM jsonb_path_query(arguments, 'strict $.**') AS value
            WHERE jsonb_typeof(value) IN ('string', 'number')
        ));
        words := words || cjk_words(said) || part_words(said);
    END LOOP;
    RETURN words;
END
$$"""

# The PL/pgSQL functions find the configuration and each other by name when they run, so they carry
# the search_path of the schema they were created in: a generated column must give the same words
# whatever the caller's path (pg_restore runs with an empty one; another schema may hold a
# ``switchboard`` of its own). The schema is named exactly, not ``FROM CURRENT``: a path with
# "$user" in it would mean another schema for another role.
_PINNED_PATH: Final = """DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION cjk_words(text) SET search_path = %I', current_schema());
    EXECUTE format('ALTER FUNCTION call_words(jsonb) SET search_path = %I', current_schema());
END
$$"""

_V1_CORE: Final = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    *_CONFIG,
    """CREATE TABLE schema_version (
        singleton integer PRIMARY KEY CHECK (singleton = 1),
        version integer NOT NULL,
        migrated_at double precision NOT NULL
    )""",
    """CREATE TABLE prompts (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        digest text NOT NULL UNIQUE,
        text text NOT NULL
    )""",
    """CREATE TABLE sessions (
        id text PRIMARY KEY,
        session_key text NOT NULL,
        platform text NOT NULL,
        chat_id text NOT NULL,
        chat_type text,
        thread_id text,
        user_id text,
        title text COLLATE "C",
        model text,
        prompt_id bigint REFERENCES prompts(id),
        parent_session_id text REFERENCES sessions(id),
        started_at double precision NOT NULL,
        ended_at double precision,
        end_reason text,
        input_tokens bigint NOT NULL DEFAULT 0,
        output_tokens bigint NOT NULL DEFAULT 0,
        cache_read_tokens bigint NOT NULL DEFAULT 0,
        cache_write_tokens bigint NOT NULL DEFAULT 0,
        last_prompt_tokens bigint NOT NULL DEFAULT 0,
        cost_usd double precision NOT NULL DEFAULT 0,
        last_seq integer NOT NULL DEFAULT 0,
        CHECK ((ended_at IS NULL) = (end_reason IS NULL))
    )""",
    "CREATE UNIQUE INDEX sessions_title ON sessions(title) WHERE title IS NOT NULL",
    "CREATE INDEX sessions_open_by_key ON sessions(session_key, started_at) WHERE ended_at IS NULL",
    "CREATE INDEX sessions_by_parent ON sessions(parent_session_id) WHERE parent_session_id IS NOT NULL",
    "CREATE INDEX sessions_by_start ON sessions(started_at)",
    "CREATE INDEX sessions_by_platform ON sessions(platform, started_at)",
    _CJK_WORDS,
    _PART_WORDS,
    _CALL_WORDS,
    _PINNED_PATH,
    f"""CREATE TABLE messages (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq integer NOT NULL,
        role text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content text NOT NULL DEFAULT '',
        tool_calls jsonb,
        tool_call_id text,
        tool_name text,
        reasoning text,
        token_estimate integer,
        created_at double precision NOT NULL,
        platform_message_id text,
        media jsonb,
        words tsvector GENERATED ALWAYS AS (
            to_tsvector('{TEXT_SEARCH_CONFIG}', content)
            || to_tsvector('{TEXT_SEARCH_CONFIG}', coalesce(tool_name, ''))
            || coalesce(call_words(tool_calls), '')
            || cjk_words(content || ' ' || coalesce(tool_name, ''))
            || part_words(content || ' ' || coalesce(tool_name, ''))
        ) STORED,
        UNIQUE (session_id, seq)
    )""",
    """CREATE INDEX messages_by_platform_id ON messages(session_id, platform_message_id)
        WHERE platform_message_id IS NOT NULL""",
    "CREATE INDEX messages_words ON messages USING gin (words)",
    'CREATE TABLE search_vocabulary (word text COLLATE "C" PRIMARY KEY)',
    "CREATE INDEX search_vocabulary_trigrams ON search_vocabulary USING gin (word gin_trgm_ops)",
)

_V1_GATEWAY: Final = (
    """CREATE TABLE inbox (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        platform text NOT NULL,
        event_id text NOT NULL,
        session_key text NOT NULL,
        payload jsonb NOT NULL,
        status text NOT NULL DEFAULT 'accepted' CHECK (status IN ('accepted', 'done')),
        received_at double precision NOT NULL,
        done_at double precision,
        UNIQUE (platform, event_id)
    )""",
    "CREATE INDEX inbox_unfinished ON inbox(id) WHERE status = 'accepted'",
    "CREATE INDEX inbox_finished ON inbox(done_at) WHERE status = 'done'",
    "CREATE INDEX inbox_by_session ON inbox(session_key, id)",
    # ``live`` and ``stream`` as SQLite's version 8 made them: see the note on _V8_OUTBOX in storage/schema.py.
    """CREATE TABLE outbox (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        turn_id text NOT NULL,
        platform text NOT NULL,
        chat_id text NOT NULL,
        thread_id text,
        chunk_index integer NOT NULL,
        text text NOT NULL,
        plain text,
        markup text,
        reply_to text,
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed', 'live')),
        platform_message_id text,
        attempts integer NOT NULL DEFAULT 0,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        last_error text,
        stream text CHECK (stream IN ('edit', 'native')),
        UNIQUE (turn_id, chunk_index)
    )""",
    "CREATE INDEX outbox_pending ON outbox(platform, chat_id, thread_id, id) WHERE status = 'pending'",
    "CREATE INDEX outbox_settled ON outbox(updated_at) WHERE status <> 'pending'",
    "CREATE INDEX outbox_live ON outbox(turn_id) WHERE status = 'live'",
)

_V1_PAIRING_AND_USAGE: Final = (
    """CREATE TABLE pairing_codes (
        platform text NOT NULL,
        code text NOT NULL,
        user_id text NOT NULL,
        user_name text,
        chat_id text,
        created_at double precision NOT NULL,
        expires_at double precision NOT NULL,
        used_at double precision,
        PRIMARY KEY (platform, code)
    )""",
    "CREATE INDEX pairing_codes_by_user ON pairing_codes(platform, user_id, created_at)",
    """CREATE TABLE pairing_approvals (
        platform text NOT NULL,
        user_id text NOT NULL,
        user_name text,
        approved_at double precision NOT NULL,
        PRIMARY KEY (platform, user_id)
    )""",
    """CREATE TABLE pairing_failures (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        platform text NOT NULL,
        failed_at double precision NOT NULL
    )""",
    "CREATE INDEX pairing_failures_by_platform ON pairing_failures(platform, failed_at)",
    """CREATE TABLE usage (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        at double precision NOT NULL,
        input_tokens bigint NOT NULL,
        output_tokens bigint NOT NULL,
        cache_read_tokens bigint NOT NULL,
        cache_write_tokens bigint NOT NULL,
        cost_usd double precision NOT NULL
    )""",
    "CREATE INDEX usage_by_time ON usage(at)",
    "CREATE INDEX usage_by_session ON usage(session_id)",
)

# Several gateways on one database (``storage/cluster.py`` has the model). A replica's row is its
# incarnation; deleting it (reaping a dead one, or a clean stop) drops its session claims and frees its
# leases and outbox chunks through the foreign keys, in that one statement. Fences come from one sequence,
# so a number never repeats, whatever lease or claim drew it.
_V2_CLUSTER: Final = (
    "CREATE SEQUENCE cluster_fence",
    """CREATE TABLE replicas (
        id text PRIMARY KEY,
        name text NOT NULL,
        host text NOT NULL,
        pid integer NOT NULL,
        version text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        seen_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        info jsonb NOT NULL DEFAULT '{}'
    )""",
    """CREATE TABLE leases (
        name text PRIMARY KEY,
        holder text REFERENCES replicas(id) ON DELETE SET NULL,
        fence bigint NOT NULL,
        acquired_at timestamptz,
        takeovers bigint NOT NULL DEFAULT 0,
        released boolean NOT NULL DEFAULT true,
        progress text
    )""",
    "CREATE INDEX leases_by_holder ON leases(holder)",
    """CREATE TABLE session_claims (
        session_key text PRIMARY KEY,
        holder text NOT NULL REFERENCES replicas(id) ON DELETE CASCADE,
        fence bigint NOT NULL DEFAULT nextval('cluster_fence'),
        claimed_at timestamptz NOT NULL DEFAULT now()
    )""",
    "CREATE INDEX session_claims_by_holder ON session_claims(holder)",
    "ALTER TABLE outbox ADD COLUMN claimed_by text REFERENCES replicas(id) ON DELETE SET NULL",
    "CREATE INDEX outbox_claimed_by ON outbox(claimed_by) WHERE claimed_by IS NOT NULL",
    "CREATE INDEX inbox_unfinished_by_session ON inbox(session_key, id) WHERE status = 'accepted'",
)

# The tool list each session was offered when it started (as SQLite's version 11): JSON text interned in
# ``prompts`` like the system prompt; NULL for sessions stored before.
_V3_SESSION_TOOLS: Final = ("ALTER TABLE sessions ADD COLUMN tools_id bigint REFERENCES prompts(id)",)

MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        1,
        "sessions, messages with word search and a vocabulary, inbox, outbox, pairing and usage",
        (*_V1_CORE, *_V1_GATEWAY, *_V1_PAIRING_AND_USAGE),
    ),
    Migration(2, "replicas, leases, session claims and outbox claims, for several gateways", _V2_CLUSTER),
    Migration(3, "the tools each session was offered when it started", _V3_SESSION_TOOLS),
)

LATEST: Final = MIGRATIONS[-1].version
