"""The typed shape of ``config.yaml``.

Every section is a frozen model that refuses unknown keys, so a typo is an
error instead of a silently ignored setting. ``config/config.example.yaml``
documents the same keys for operators; a test keeps the two in step.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BeforeValidator, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config.environment import listing
from config.fields import (
    Fraction,
    IdList,
    Port,
    PositiveFloat,
    PositiveInt,
    Secret,
    Section,
    Toggle,
    at_least,
    between,
    off_as_written,
)
from config.alerts import AlertsConfig
from config.cluster import ClusterConfig
from config.tools import ToolsConfig
from config.liveness import CatchUpConfig, LivenessConfig
from config.media import MediaConfig
from config.secret_variables import SecretVariable
from config.storage_url import StorageUrl, StorageUrlError, parse_storage_url


class ModelConfig(Section):
    provider: Literal["anthropic", "openai"] = "anthropic"
    """Which API the model is called through. ``openai`` also serves any OpenAI-compatible server."""
    name: str = "claude-sonnet-4-6"
    """The model name sent to the API."""
    api_key: Secret = None
    """The API key; when unset, ANTHROPIC_API_KEY or OPENAI_API_KEY (by provider) is used."""
    base_url: str | None = None
    """Another endpoint for the API (a proxy, OpenRouter, vLLM, Ollama, a test server)."""
    context_length: PositiveInt | None = None
    """The model's context window in tokens; overrides the built-in table."""
    vision: bool | None = None
    """Whether the model reads images (and PDFs); unset: the built-in table by model name (unknown names: no)."""
    cache_ttl: Literal["5m", "1h", "auto"] = "auto"
    """Prompt-cache lifetime: 5m, 1h, or auto (picked per session from how fast the user replies)."""
    max_tokens: PositiveInt = 4096
    """The most tokens one reply may have."""
    timeout: PositiveFloat = 120.0
    """Seconds one model request may take before it is retried."""
    fallbacks: list[FallbackModel] = []
    """Models tried in order when this one keeps failing (rate limits, outages, bad key)."""
    prices: dict[str, ModelPrice] = {}
    """Prices per model name (longest matching name wins), over the built-in table."""


class AgentConfig(Section):
    system_message: str | None = None
    """Extra instructions added to every session's system prompt."""
    workdir: str | None = None
    """A project directory whose AGENTS.md / CLAUDE.md / .switchboard.md enter the prompt."""
    max_iterations: Annotated[int, between(1, 500)] = 90
    """Model calls with tools allowed in one turn."""
    tool_timeout: PositiveFloat = 120.0
    """Seconds one tool call may run."""
    platform_hints: dict[str, str] = {}
    """Replace the built-in formatting hint for a platform (telegram, discord, slack); "" removes it."""


class FallbackModel(Section):
    provider: Literal["anthropic", "openai"] = "anthropic"
    """The API of this fallback model."""
    name: str
    """The model name."""
    api_key: Secret = None
    """Its key; unset means the main model's key when the provider is the same, else the provider's variable."""
    base_url: str | None = None
    """Its endpoint; unset means the provider's default."""
    vision: bool | None = None
    """Whether it reads images; unset: the built-in table by model name."""


class ModelPrice(Section):
    input: Annotated[float, at_least(0.0)]
    """USD per million uncached input tokens."""
    output: Annotated[float, at_least(0.0)]
    """USD per million output tokens."""
    cache_read: Annotated[float, at_least(0.0)] | None = None
    """USD per million tokens read from cache (default: 10% of input)."""
    cache_write: Annotated[float, at_least(0.0)] | None = None
    """USD per million tokens written to cache (default: 1.25x input for 5m, 2x for 1h)."""


class AuxiliaryModel(Section):
    provider: Literal["anthropic", "openai"] | None = None
    """The API for this task; unset means the main model's."""
    model: str | None = None
    """The model for this task; unset means the main model."""
    base_url: str | None = None
    """Another endpoint for this task; unset means the main model's."""
    api_key: Secret = None
    """A key for this task's endpoint; unset means the main model's key."""


class AuxiliaryConfig(Section):
    compression: AuxiliaryModel = AuxiliaryModel()
    """The model that writes compaction summaries."""


class CompressionConfig(Section):
    enabled: bool = True
    """Keep long conversations inside the model's window by summarising their middle."""
    threshold: Fraction = 0.50
    """The agent compacts when the prompt reaches this share of the context window."""
    target_ratio: Annotated[float, between(0.10, 0.80)] = 0.20
    """Share of the threshold kept verbatim as the recent tail."""
    protect_last_n: PositiveInt = 20
    """At least this many recent messages are never summarised."""
    hygiene_threshold: Fraction = 0.85
    """Before a turn, the gateway compacts a stored session that reached this share of the window."""


class Listen(Section):
    host: str = "127.0.0.1"
    """Address to listen on."""
    port: Port = 8443
    """Port to listen on."""
    header_timeout: Annotated[float, between(0.1, 600.0)] = 10.0
    """Seconds a client has to send a request's line and headers (from connecting, or from the first byte of
    its next request); slower clients are disconnected."""
    body_timeout: Annotated[float, between(0.1, 3600.0)] = 30.0
    """Seconds a request's body has to arrive once its headers are in; slower ones get 408 and are disconnected."""
    max_connections: Annotated[int, between(1, 100_000)] = 256
    """Connections open at once; one more is answered 503 and closed."""


class SlackListen(Listen):
    port: Port = 3000
    path: str = "/slack/events"
    """URL path Slack posts events to (the path of the app's Request URL)."""

    @field_validator("path")
    @classmethod
    def _path_is_absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise PydanticCustomError("slack_path", "must start with / (for example /slack/events)")
        return value


@dataclass(frozen=True, slots=True)
class Conflict:
    """Settings of a platform that cannot work together: it stays off until they are fixed."""

    detail: str
    """Why the platform is off, in a few words (``switchboard check``'s platform line)."""
    problem: str
    """What is wrong and how to fix it (the blocker)."""


class PlatformSection(Section):
    """A platform's section, ``platforms.<name>``: its settings, and what its start plan needs to know.

    Its secrets are marked on their fields with :class:`SecretVariable`; ``required``, ``connection`` and
    ``conflict`` say what it needs to run, how it connects and what cannot work together. The loader and
    the plan read these for every section of :class:`PlatformsConfig` and name no platform themselves.
    """

    enabled: Toggle = "auto"
    """auto: on when the settings it requires are set."""
    stream_edit_interval: Annotated[float, between(0.2, 60.0)] | None = None
    """Seconds at least between two updates of a reply shown while it is written (unset: the platform's own
    pace, which keeps inside its rate limits)."""

    @abstractmethod
    def required(self) -> tuple[str, ...]:
        """The keys of this section that must be set for the platform to run as configured (in its mode). With
        ``enabled: auto`` it is on when all are set, off when none is, and blocked when only some are."""

    @abstractmethod
    def connection(self) -> str:
        """How the platform connects as configured, for ``switchboard check`` (``long polling``)."""

    def conflict(self, path: str) -> Conflict | None:
        """Settings that cannot work together once the platform is on; ``path`` is the section's key path."""
        return None


class TelegramConfig(PlatformSection):
    enabled: Toggle = "auto"
    """auto: on when a token is set."""
    token: Annotated[Secret, SecretVariable("TELEGRAM_BOT_TOKEN", example="123456:ABC...")] = None
    """Bot token from @BotFather; when unset, TELEGRAM_BOT_TOKEN is used."""
    api_base_url: str | None = None
    """A custom Bot API server (self-hosted, or a local emulator in tests)."""
    mode: Literal["polling", "webhook"] = "polling"
    """How updates arrive."""
    webhook_url: str | None = None
    """Public HTTPS URL Telegram posts to (webhook mode)."""
    webhook_secret: Annotated[Secret, SecretVariable("TELEGRAM_WEBHOOK_SECRET", fallback=False)] = None
    """Secret Telegram sends in X-Telegram-Bot-Api-Secret-Token (required in webhook mode)."""
    webhook_listen: Listen = Listen()
    """Where the webhook server listens."""
    allowed_users: IdList = []
    """Telegram user ids allowed to talk to the bot."""
    allowed_chats: IdList = []
    """Group chat ids the bot answers in (empty: any group an allowed user is in)."""
    allow_all: bool = False
    """Answer everyone (an open bot)."""
    require_mention: bool = True
    """In groups, answer only when mentioned or replied to."""
    poll_timeout: Annotated[int, between(1, 50)] = 30
    """Polling mode: seconds one getUpdates request waits for new messages (long polling)."""
    stall_timeout: Annotated[float, between(2.0, 3600.0)] = 120.0
    """Polling mode: seconds without a successful getUpdates before polling is restarted on a new connection."""
    webhook_check_interval: Annotated[float, between(1.0, 3600.0)] = 60.0
    """Webhook mode: seconds between getWebhookInfo checks (lost registration, Telegram failing to reach us)."""

    def required(self) -> tuple[str, ...]:
        return ("token", "webhook_url", "webhook_secret") if self.mode == "webhook" else ("token",)

    def connection(self) -> str:
        if self.mode == "webhook":
            text = f"webhook {self.webhook_url}, listening on {self.webhook_listen.host}:{self.webhook_listen.port}"
        else:
            text = "long polling"
        return f"{text} via {self.api_base_url}" if self.api_base_url else text

    def conflict(self, path: str) -> Conflict | None:
        if self.mode != "polling" or self.stall_timeout > self.poll_timeout:
            return None
        # A healthy long poll answers only every poll_timeout seconds; a shorter stall limit restarts it forever.
        return Conflict("polling timeouts do not fit",
                        f"{path}.stall_timeout ({self.stall_timeout:g} s) must be longer than poll_timeout "
                        f"({self.poll_timeout} s); raise stall_timeout or lower poll_timeout")  # fmt: skip


class DiscordConfig(PlatformSection):
    enabled: Toggle = "auto"
    """auto: on when a token is set."""
    token: Annotated[Secret, SecretVariable("DISCORD_BOT_TOKEN")] = None
    """Bot token from the Developer Portal; when unset, DISCORD_BOT_TOKEN is used."""
    api_base_url: str | None = None
    """Discord REST base URL (a local emulator in tests)."""
    gateway_url: str | None = None
    """Discord gateway WebSocket URL (a local emulator in tests)."""
    allowed_users: IdList = []
    """Discord user ids allowed to talk to the bot."""
    allowed_guilds: IdList = []
    """Servers the bot answers in (empty: any)."""
    allowed_channels: IdList = []
    """Channels the bot answers in (empty: any)."""
    allow_all: bool = False
    """Answer everyone (an open bot)."""
    require_mention: bool = True
    """In servers, answer only when mentioned or replied to."""
    message_content_intent: bool = False
    """Request the privileged Message Content intent (must also be enabled in the portal)."""
    allow_bots: bool = False
    """Accept messages from other bots (the bot's own messages are always ignored)."""

    def required(self) -> tuple[str, ...]:
        return ("token",)

    def connection(self) -> str:
        intent = "message content intent on" if self.message_content_intent else "mentions and DMs only"
        text = f"gateway connection, {intent}"
        if self.api_base_url or self.gateway_url:
            text += f" via {self.api_base_url or 'discord.com'} / {self.gateway_url or 'gateway.discord.gg'}"
        return text


class SlackConfig(PlatformSection):
    enabled: Toggle = "auto"
    """auto: on when the tokens the mode needs are set."""
    bot_token: Annotated[Secret, SecretVariable("SLACK_BOT_TOKEN", example="xoxb-...")] = None
    """xoxb- bot token; when unset, SLACK_BOT_TOKEN is used."""
    app_token: Annotated[Secret, SecretVariable("SLACK_APP_TOKEN", example="xapp-...")] = None
    """xapp- app-level token for Socket Mode; when unset, SLACK_APP_TOKEN is used."""
    signing_secret: Annotated[Secret, SecretVariable("SLACK_SIGNING_SECRET")] = None
    """Signing secret for HTTP mode; when unset, SLACK_SIGNING_SECRET is used."""
    mode: Literal["socket", "http"] = "socket"
    """Socket Mode (no public URL needed) or the HTTP Events API."""
    api_base_url: str | None = None
    """Slack Web API base URL (a local fake in tests)."""
    http_listen: SlackListen = SlackListen()
    """Where the HTTP events endpoint listens (http mode)."""
    allowed_users: IdList = []
    """Slack user ids allowed to talk to the bot."""
    allowed_channels: IdList = []
    """Channels the bot answers in (empty: any)."""
    allow_all: bool = False
    """Answer everyone in the workspace the app is installed in (and in allowed_teams), never other workspaces."""
    allowed_teams: IdList = []
    """Other workspaces (T…) or organisations (E…) whose people count as the workspace's own, for Slack Connect
    channels shared with them; empty: only the installed workspace. Events from any other team are refused."""
    require_mention: bool = True
    """In channels, answer only @mentions and threads the bot takes part in; false: every message of the
    channels the app is in (each top-level message opens a thread of its own)."""

    def required(self) -> tuple[str, ...]:
        return ("bot_token", "app_token") if self.mode == "socket" else ("bot_token", "signing_secret")

    def connection(self) -> str:
        listen = self.http_listen
        text = "Socket Mode" if self.mode == "socket" else f"HTTP events on {listen.host}:{listen.port}{listen.path}"
        return f"{text} via {self.api_base_url}" if self.api_base_url else text


class PlatformsConfig(Section):
    """One section per platform, named as the platform (its adapter is the package ``adapters.<name>``).
    A new platform adds its :class:`PlatformSection` here: the loader and the plan find it by iterating."""

    telegram: TelegramConfig = TelegramConfig()
    discord: DiscordConfig = DiscordConfig()
    slack: SlackConfig = SlackConfig()

    def section(self, platform: str) -> PlatformSection | None:
        """The section of ``platform``; None for a name that has none (a platform only a test adds)."""
        return getattr(self, platform) if platform in type(self).model_fields else None

    def sections(self) -> list[tuple[str, PlatformSection]]:
        """Each platform's name and section, in the order they are shown."""
        return [(name, getattr(self, name)) for name in type(self).model_fields]


class SessionsConfig(Section):
    reset: Literal["idle", "daily", "none"] = "idle"
    """When a conversation starts afresh on its own."""
    idle_minutes: PositiveInt = 1440
    """With reset: idle, minutes of silence after which the next message starts a new session."""
    daily_hour: Annotated[int, between(0, 23)] = 4
    """With reset: daily, the local hour at which sessions roll over."""
    group_per_user: bool = True
    """In groups, each user has their own session (threads stay shared)."""
    busy: Literal["queue", "interrupt"] = "queue"
    """A message sent while the bot is answering: queue (answered next, together) or interrupt."""
    debounce_ms: Annotated[int, between(0, 10000)] = 400
    """Messages typed within this many milliseconds of each other become one turn."""
    max_concurrent_turns: Annotated[int, between(1, 1000)] = 16
    """Agents working at the same time (model calls and tools); more wait for a slot. Delivery needs none."""


DEFAULT_DB_PATH = "state.db"


class StorageConfig(Section):
    url: str | None = None
    """Where the data lives: a path or ``sqlite:///state.db`` (SQLite), or
    ``postgresql://user@host:5432/database?sslmode=require`` (PostgreSQL, password from ``password``). Unset:
    SQLite at ``path``."""
    path: str = DEFAULT_DB_PATH
    """The SQLite database, relative to the home directory unless absolute (when ``url`` is unset)."""
    password: Annotated[Secret, SecretVariable("PGPASSWORD", example="...")] = None
    """The PostgreSQL role's password; when unset, PGPASSWORD is used (never put it in ``url``)."""
    synchronous: Literal["normal", "full"] = "normal"
    """SQLite durability: normal (safe with WAL, fast) or full (fsync every commit)."""

    @field_validator("url")
    @classmethod
    def _known_engine(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_storage_url(value)
            except StorageUrlError as error:
                raise PydanticCustomError("storage_url", "{problem}", {"problem": str(error)}) from None
        return value

    @model_validator(mode="after")
    def _one_place(self) -> StorageConfig:
        if self.url is not None and self.path != DEFAULT_DB_PATH:
            raise PydanticCustomError(
                "storage_url", "url and path name two databases: keep url (it names the engine too) and remove path"
            )
        return self

    @property
    def location(self) -> StorageUrl:
        """The engine and where its data is: ``url`` parsed, or ``path`` for SQLite."""
        return parse_storage_url(self.url) if self.url is not None else StorageUrl("sqlite", self.path)


QUIET_AT_DEBUG = frozenset({"httpx", "httpx2", "httpcore", "httpcore2", "asyncio"})
"""Libraries whose debug lines hold no message text (connections, request lines, status codes): they may be
named at debug in ``logging.libraries`` without ``include_content``. (httpx2 and httpcore2 are the names
of httpx and httpcore in some builds of the model SDKs.)"""


class LoggingConfig(Section):
    file: str = "logs/gateway.log"
    """The log file, relative to the home directory unless absolute."""
    format: Literal["text", "json"] = "text"
    """text: one key=value line per event; json: one JSON object per line."""
    level: Literal["debug", "info", "warning", "error"] = "info"
    """The least severe level of Switchboard's own lines written (libraries: warning, or see ``libraries``)."""
    max_size_mb: PositiveFloat = 10.0
    """Rotate the file when it grows past this many megabytes."""
    backups: Annotated[int, between(0, 100)] = 5
    """How many rotated files to keep."""
    console: bool = True
    """Also write log lines to standard error (for Docker and systemd journals)."""
    include_content: bool = False
    """Allow lines that carry message text (what users and the model say): only libraries write such lines,
    at debug, so this is needed to name one at debug in ``libraries``. Off: no message text in the log."""
    libraries: dict[str, Literal["debug", "info", "warning", "error"]] = {}
    """Levels for libraries' loggers (by logger name: httpx, aiogram, discord, slack_sdk, anthropic, ...),
    which otherwise write warnings and errors only."""

    @field_validator("libraries")
    @classmethod
    def _content_needs_consent(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if info.data.get("include_content"):
            return value
        talkative = [name for name, level in value.items()
                     if level == "debug" and name.split(".")[0] not in QUIET_AT_DEBUG]  # fmt: skip
        if talkative:
            raise PydanticCustomError(
                "content_at_debug",
                "{names} at debug write message text (what they send and receive) into the log; set "
                "logging.include_content: true as well (and take both out when done), or name {them} at info",
                {"names": listing(talkative), "them": "it" if len(talkative) == 1 else "them"},
            )
        return value


class HealthConfig(Listen):
    host: str = "127.0.0.1"
    """Address of the /health endpoint."""
    port: Port = 8642
    """Port of the /health endpoint (0 picks a free one; the log says which)."""


class GatewayConfig(Section):
    drain_timeout: Annotated[float, between(0.0, 3600.0)] = 30.0
    """On shutdown, seconds running turns may take to finish before they are stopped."""
    streaming: Annotated[Literal["auto", "off"], BeforeValidator(off_as_written)] = "auto"
    """auto: a reply is shown while the model writes it, the way each platform does it best; off: it is sent
    once written, with the tool progress message (``tool_progress``) while tools run."""
    tool_progress: bool = True
    """While a turn calls tools, show one message saying what the agent is doing, edited as it goes."""
    event_loop: Literal["auto", "uvloop", "asyncio"] = "auto"
    """``auto``: uvloop when installed (it is a dependency on Linux and macOS), else asyncio's loop."""
    undelivered_retry_every: Annotated[float, between(1.0, 3600.0)] = 60.0
    """Seconds between new attempts at replies a platform could not take (an outage, a long rate limit)."""
    undelivered_keep_hours: Annotated[float, between(0.0, 168.0)] = 24.0
    """Hours such a reply is kept and tried again before it is given up (``delivery.failed``)."""
    database_retry_notice_after: Annotated[float, between(0.0, 3600.0)] = 5.0
    """A turn the database let down (locked, disk full, I/O error) is tried again while the gateway runs;
    once it has taken this many seconds, the user gets one short notice that the answer is delayed."""
    database_retry_max_delay: Annotated[float, between(0.01, 3600.0)] = 60.0
    """The longest pause, in seconds, between two tries of such a turn (the pauses double up to it)."""


class Settings(Section):
    """The whole configuration."""

    model: ModelConfig = ModelConfig()
    agent: AgentConfig = AgentConfig()
    auxiliary: AuxiliaryConfig = AuxiliaryConfig()
    compression: CompressionConfig = CompressionConfig()
    platforms: PlatformsConfig = PlatformsConfig()
    sessions: SessionsConfig = SessionsConfig()
    storage: StorageConfig = StorageConfig()
    logging: LoggingConfig = LoggingConfig()
    health: HealthConfig = HealthConfig()
    gateway: GatewayConfig = GatewayConfig()
    media: MediaConfig = MediaConfig()
    liveness: LivenessConfig = LivenessConfig()
    catch_up: CatchUpConfig = CatchUpConfig()
    alerts: AlertsConfig = AlertsConfig()
    cluster: ClusterConfig = ClusterConfig()
    tools: ToolsConfig = ToolsConfig()

    @field_validator("alerts")
    @classmethod
    def _alert_chats_on_known_platforms(cls, value: AlertsConfig) -> AlertsConfig:
        unknown = [target for target in value.chats if target.partition(":")[0] not in PlatformsConfig.model_fields]
        if unknown:
            raise PydanticCustomError(
                "alert_platform",
                "chats {targets}: the part before the colon must be a platform ({platforms})",
                {"targets": listing(unknown), "platforms": ", ".join(PlatformsConfig.model_fields)},
            )
        return value

    @field_validator("tools")
    @classmethod
    def _tool_rules_on_known_platforms(cls, value: ToolsConfig) -> ToolsConfig:
        unknown = sorted({platform for server in value.mcp_servers for rule in server.allow for platform in rule.platforms
                          if platform not in PlatformsConfig.model_fields})  # fmt: skip
        if unknown:
            raise PydanticCustomError(
                "tool_rule_platform", "tools.mcp_servers: allow rules name platforms there are none of: {names} "
                "(platforms are {platforms})",
                {"names": ", ".join(unknown), "platforms": ", ".join(PlatformsConfig.model_fields)},
            )  # fmt: skip
        return value

    @model_validator(mode="after")
    def _cluster_needs_postgresql(self) -> Settings:
        if self.cluster.enabled and self.storage.location.engine != "postgresql":
            raise PydanticCustomError(
                "cluster_engine",
                "cluster.enabled needs a database every replica shares: set storage.url to a postgresql:// URL "
                "(a SQLite file belongs to one gateway), or turn cluster.enabled off",
            )
        return self


PLATFORMS: tuple[str, ...] = tuple(PlatformsConfig.model_fields)
"""Every platform a configuration can have a section for, in the order they are shown."""
