"""The one settings object. Built in the entry point and passed down; every field is MEMLOG_<NAME>."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from projections.archives import RetentionPolicy
from projections.facts import FactPolicy
from projections.periods import KeyPeriods, longest_need_ms
from projections.recall import RecallPolicy
from projections.redaction import Redactor
from projections.session import ThreadPolicy
from schemas.errors import ServiceSetupError

# Local stack defaults (loopback only).
LOCAL_KAFKA_PORT = 9092
LOCAL_KAFKA_CONTROLLER_PORT = 9093
LOCAL_REDIS_PORT = 6379
LOCAL_MONGO_PORT = 27017
MAX_REPLAY_WORKERS = 64
# What a worker can run (MEMLOG_WORKER_PROJECTIONS): the four projections replay rebuilds, and the
# privacy agent (erasure and export requests), which a deployment runs in exactly one set.
WORKER_PROJECTIONS = ("sessions", "archives", "facts", "traces", "privacy")
# The worker sets `memlog up` runs (MEMLOG_UP_WORKER_SETS): what the next turn reads, the archive, the rest.
UP_WORKER_SETS = "sessions,facts;archives;traces,privacy"


def projection_set(text: str, setting: str) -> tuple[str, ...]:
    """A comma-separated set of projections, or `all`, in WORKER_PROJECTIONS' order; ValueError names a bad one."""
    if text.strip() == "all":
        return WORKER_PROJECTIONS
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in WORKER_PROJECTIONS]
    if unknown:  # split gives at least one name: an empty setting names ''
        raise ValueError(
            f"{setting}={text!r}: {', '.join(map(repr, unknown))} "
            f"is not a projection; give `all` or some of {', '.join(WORKER_PROJECTIONS)}"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"{setting}={text!r} names a projection twice")
    return tuple(name for name in WORKER_PROJECTIONS if name in names)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMLOG_", extra="ignore", env_ignore_empty=True)

    home: Path = Field(default=Path.home() / ".memlog", description="Home folder for local data, jars and logs.")

    # --- connections; unset means "use the local stack" ---
    kafka_bootstrap: str | None = Field(default=None, description="Existing Kafka bootstrap servers.")
    redis_url: str | None = Field(default=None, description="Existing Redis URL.")
    mongo_url: str | None = Field(default=None, description="Existing MongoDB URL.")
    schema_registry_url: str | None = Field(
        default=None, description="Confluent-compatible registry; when set, events use the Confluent wire format."
    )
    kafka_idempotence: bool = Field(default=True, description="Idempotent producer; turn off for brokers without it.")
    # --- credentials and TLS of those connections; secrets from the environment or a file, never the repository ---
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_sasl_password_file: Path | None = Field(default=None, description="Read the SASL password from here.")
    kafka_ssl_cafile: Path | None = Field(default=None, description="CA bundle for the brokers; default: the system's.")
    kafka_ssl_certfile: Path | None = Field(default=None, description="Client certificate (PEM), for mutual TLS.")
    kafka_ssl_keyfile: Path | None = Field(default=None, description="The client certificate's key (PEM).")
    redis_username: str | None = Field(default=None, description="Redis ACL user; default: the URL's, or none.")
    redis_password: SecretStr | None = None
    redis_password_file: Path | None = Field(default=None, description="Read the Redis password from here.")
    redis_tls: bool = Field(default=False, description="TLS to Redis (as a rediss:// URL does).")
    redis_cluster: bool = Field(
        default=False, description="Redis is a Redis Cluster: the URL names one node, the client finds the others."
    )
    redis_tls_cafile: Path | None = None
    redis_tls_certfile: Path | None = None
    redis_tls_keyfile: Path | None = None
    mongo_username: str | None = Field(default=None, description="MongoDB user; default: the URL's, or none.")
    mongo_password: SecretStr | None = None
    mongo_password_file: Path | None = Field(default=None, description="Read the MongoDB password from here.")
    mongo_auth_source: str | None = Field(default=None, description="The user's database; MongoDB's default: admin.")
    mongo_tls: bool = Field(default=False, description="TLS to MongoDB (as tls=true in the URL does).")
    mongo_tls_cafile: Path | None = None
    mongo_tls_certfile: Path | None = Field(default=None, description="Client certificate and key in one PEM.")
    local_broker: Literal["kafka", "tansu"] = Field(default="kafka", description="Broker that `memlog dev up` runs.")
    kafka_version: str = "4.1.1"
    local_kafka_port: int = LOCAL_KAFKA_PORT
    local_kafka_controller_port: int = LOCAL_KAFKA_CONTROLLER_PORT
    local_redis_port: int = LOCAL_REDIS_PORT
    local_redis_cluster_port: int = Field(
        default=7100, description="`memlog dev redis-cluster up`: its three nodes listen from this port on."
    )
    local_kafka_cluster_port: int = Field(
        default=19092,
        description="`memlog dev up kafka-cluster`: its three brokers listen from this port on, "
        "their controllers from this port + 100.",
    )
    local_mongo_port: int = LOCAL_MONGO_PORT
    kafka_heap: str = "768m"
    local_registry: bool = Field(default=False, description="Also run Apicurio Registry in `memlog dev up`.")
    local_registry_port: int = 8081

    # --- topics ---
    topic_prefix: str = Field(default="memlog", description="Topics are <prefix>.threads, <prefix>.facts, ...")
    partitions: int = Field(default=6, ge=1, description="Partitions of every subject-keyed topic (equal on all).")
    replication: int = Field(default=1, ge=1, description="Replication factor of the topics memlog creates.")
    min_insync_replicas: int | None = Field(
        default=None,
        ge=1,
        description="min.insync.replicas of the topics memlog creates (its producer writes with acks=all); "
        "default: the broker's.",
    )
    max_message_bytes: int = Field(default=1_048_576, ge=65_536)

    # --- projections ---
    # No ':' or glob character in either: a namespace's Redis keys are found by the prefix <app_id>:<namespace>:
    app_id: str = Field(
        default="memlog",
        pattern=r"^[A-Za-z0-9_.-]{1,100}$",
        description="Faust app id, also the consumer group prefix.",
    )
    namespace: str = Field(
        default="live",
        pattern=r"^[A-Za-z0-9_-]{1,32}$",  # projections.namespaces.NAME, with room for a replay's suffix
        description="Redis key prefix and MongoDB database suffix of projections.",
    )
    namespace_grace_seconds: int = Field(
        default=86_400,
        ge=0,
        description="A namespace out of use (switched away from, or built and not switched to) is dropped after this.",
    )
    namespace_check_seconds: float = Field(
        default=300.0, gt=0, description="How often a worker drops the namespaces whose grace period has passed."
    )
    otel_exporter: Literal["none", "console"] = Field(
        default="none",
        description="OpenTelemetry spans (API request, produce, worker apply): none exports nothing; console "
        "writes them to stdout. A process that installs its own tracer provider gets them whatever this says.",
    )
    ingest_retention_seconds: int = Field(
        default=3600,
        ge=1,
        description="How long the ingest topic (<prefix>.ingest, unsealed events of producers without the master "
        "key) keeps a record the worker has not sealed and deleted yet: the bound on its plaintext there.",
    )
    deadletter_retention_seconds: int = Field(
        default=604_800,
        ge=1,
        description="How long the dead-letter topic keeps a record (it may hold what a producer sent: personal "
        "data). Applied when the worker starts, to an existing topic too.",
    )
    mongo_database: str = "memlog"
    batch_size: int = Field(default=500, ge=1, description="Records an agent applies per batch.")
    worker_projections: str = Field(
        default="all",
        description="The projections a worker runs: `all`, or some of sessions, archives, facts, traces, privacy "
        "(comma-separated). Workers of one set share a consumer group of their own, so a set is not held "
        "to the pace of the others: Faust delivers a topic to all of a worker's agents through one "
        "consumer, so the slowest (the archive, on MongoDB) sets everyone's. Run each projection in some set.",
    )
    up_worker_sets: str = Field(
        default=UP_WORKER_SETS,
        description="The worker sets `memlog up` runs, one supervised process each (its own consumer group and "
        "watchdog): sets separated by `;`, each a MEMLOG_WORKER_PROJECTIONS value; every projection in exactly "
        "one set. `all` runs one worker. The default keeps what the next turn reads (sessions, facts) apart "
        "from the archive, so a stalled archive never stops another tenant's context.",
    )
    drill_step_delays: dict[str, float] = Field(
        default_factory=dict,
        description="Drills only: seconds a named projection (sessions, archive, facts, facts-activity, "
        "traces, privacy) waits before each batch, to rehearse a slow projection and stops mid-stream.",
    )
    batch_seconds: float = Field(default=0.05, gt=0, description="How long an agent fills a batch from its first one.")
    sessions_batch_seconds: float = Field(
        default=0.0,
        ge=0,
        description="How long the sessions and facts projections wait to fill a batch: a read with `after=` "
        "waits for it (bench/freshness.py). 0: none, each batch is what is queued when the worker takes it "
        "(streams/batches.py). The other projections keep MEMLOG_BATCH_SECONDS.",
    )
    worker_session_timeout_seconds: float = Field(
        default=15.0,
        ge=6,  # Kafka's group.min.session.timeout.ms
        le=90,  # Faust's broker_request_timeout: a longer session is refused when the worker starts
        description="A worker that dies without leaving its group holds its partitions this long (Faust: 60).",
    )
    worker_instance: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9._-]+$",  # Kafka's rule for a group instance id
        description="A name unique among the running workers of one set and kept across their restarts: the "
        "worker joins its consumer group as that static member (KIP-345), so one started again after a crash "
        "takes its partitions back at once instead of after the session timeout. A static member that stops "
        "does not leave its group: its partitions wait for it until the session timeout. Unset: a dynamic "
        "member. `memlog up` names its worker after the host and its own pid when this is unset.",
    )
    watchdog_seconds: float = Field(
        default=30.0,
        ge=2,
        description="A worker holding partitions with lag that applies nothing this long restarts its consumer, "
        "and exits with code 75 if that has not helped this long after.",
    )
    watchdog_batch_seconds: float = Field(
        default=300.0,
        gt=0,
        description="A batch in progress counts as progress for the watchdog this long: a costly record "
        "(a streamed tool call of many words) is work, not a stall; a batch that outlasts this is stuck.",
    )
    worker_stop_seconds: float = Field(
        default=15.0,
        gt=0,
        description="After SIGTERM a worker that has not stopped gracefully within this long exits anyway.",
    )
    worker_fault_signals: bool = Field(
        default=False,
        description="Test hook, never for production: SIGUSR1 pauses the worker's fetching, SIGUSR2 hangs its agents.",
    )
    chat_ttl_seconds: int = Field(default=86_400, ge=1, description="Session lifetime after the last question (000).")
    public_ttl_seconds: int = Field(default=7_200, ge=1, description="Public thread lifetime after its last question.")
    automation_ttl_seconds: int = Field(default=7_200, ge=1, description="Automation thread lifetime after a wake.")
    fold_tokens: int = Field(default=32_000, ge=1, description="A session past this many tokens folds (000).")
    fold_exchanges: int = Field(default=100, ge=1, description="... or past this many exchanges.")
    fold_keep_tokens: int = Field(default=12_000, ge=0, description="The newest tokens a fold leaves unfolded.")
    fold_keep_min: int = Field(default=2, ge=0, description="A fold leaves at least this many exchanges.")
    fold_keep_max: int = Field(default=30, ge=1, description="... and at most this many.")
    summary_chars: int = Field(default=3_000, ge=100, description="A summary's maximum length.")
    fold_urgent_tokens: int = Field(default=42_000, ge=1, description="Past this, the context read folds first.")
    fold_agent: bool = Field(default=True, description="Run folds in this worker; off for replays, which never fold.")
    fold_retry_seconds: float = Field(default=30.0, gt=0, description="Wait before retrying a failed fold.")
    summarizer: Literal["extractive", "openai"] = "extractive"
    summarizer_url: str | None = Field(default=None, description="OpenAI-compatible base URL (…/v1).")
    summarizer_model: str | None = None
    summarizer_api_key: str | None = None
    summarizer_timeout_seconds: float = Field(default=30.0, gt=0)
    facts_max: int = Field(default=30, ge=1, description="Facts kept per subject (000: up to 30).")
    fact_max_chars: int = Field(default=500, ge=1, description="A fact's maximum length; longer is refused.")
    facts_keep_days: float = Field(
        default=365, gt=0, description="Facts kept this long after the last question (fractions too: 0.5 is 12 h)."
    )
    recall_limit: int = Field(default=5, ge=1, description="Facts supplied with the context (003: a handful).")
    recall_floor: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="A fact scored at or above this (the estimated probability it bears on the question) is "
        "labelled bears; the others are still given, after it, as not matched (unless recall_strict).",
    )
    recall_strict: bool = Field(
        default=False,
        description="Recall gives only the facts that bear on the question (none when none does), not the best "
        "limit of all the asker may see.",
    )
    tenant_facts_max: int = Field(default=200, ge=1, description="Facts a tenant's own knowledge holds.")
    tenant_facts_keep_days: float = Field(
        default=0, ge=0, description="Tenant knowledge is kept this long after its last change; 0: until deleted."
    )
    tenant_facts_from_agents: list[str] = Field(
        default_factory=list,
        description="Tenants whose agents may save tenant knowledge with remember (scope tenant); * for all.",
    )
    agents_forget_backend_knowledge: bool = Field(
        default=False,
        description="An agent's forget may delete tenant knowledge the backend wrote, not only what an agent saved.",
    )
    embeddings: Literal["auto", "none", "local", "openai"] = Field(
        default="auto",
        description="Recall ranks by similarity with this model, by keyword (BM25) with none. auto: openai when an "
        "API key is configured and no model dir is named, else local when its package is installed, else none.",
    )
    embeddings_model_dir: Path | None = Field(default=None, description="A local model folder; default: the package.")
    embeddings_url: str = Field(default="https://api.openai.com/v1", description="OpenAI-compatible base URL (…/v1).")
    embeddings_model: str = Field(default="text-embedding-3-small", description="The endpoint's embedding model.")
    embeddings_api_key: str | None = Field(default=None, description="Endpoint key (default: the summarizer's).")
    embeddings_threads: int = Field(default=1, ge=1, description="BLAS threads of the local model (1: best tail).")
    embeddings_cache_size: int = Field(default=4096, ge=0, description="Questions whose vectors are kept (0: none).")
    embeddings_cache_seconds: float = Field(default=600.0, ge=0, description="... for this long after embedding.")
    trace_sample: float = Field(default=1.0, ge=0.0, le=1.0, description="Share of runs traced (000: all).")
    trace_days: float = Field(default=7, gt=0, description="Traces are kept this long after the run (000: 7).")
    trace_max_bytes: int = Field(default=786_432, ge=1024, description="A larger run is refused, not truncated.")
    tool_result_timeout_seconds: float = Field(
        default=300.0, gt=0, description="A tool call with no result this long after it was made reads incomplete."
    )
    redact_keys: list[str] = Field(default_factory=list, description="More secret key names (adds to the list).")
    redact_patterns: list[str] = Field(default_factory=list, description="More secret value regexes (adds).")
    tokenizer: str = Field(default="cl100k_base", description="tiktoken encoding used to count session tokens.")
    tokenizer_file: Path | None = Field(default=None, description="A .tiktoken file to use instead of a package.")
    producer_name: str = Field(default="memlog-api", description="The envelope's producer field.")
    fork_entries: int = Field(default=200, ge=1, description="A fork copies this many newest active entries (004).")
    search_vectors: Literal["none", "e5", "minilm"] = Field(default="none", description="Search by meaning too.")
    search_meaning_min: float = Field(
        default=0.84, ge=0, le=1, description="The cosine a nearest exchange must exceed to answer words found nowhere."
    )
    search_max_candidates: int = Field(
        default=1000,
        ge=1,
        description="A search reads at most this many exchanges' entry groups; past it the answer is marked "
        "`partial: true` (issue 41: no request reads an archive whole).",
    )
    search_max_time_ms: int = Field(
        default=1000,
        ge=1,
        description="maxTimeMS of each MongoDB query a search makes; past it the search answers 503 (SecantusDB "
        "cannot stop a query whose client went away, so this bounds it too).",
    )
    retention_enabled: bool = Field(default=False, description="Conversation retention; disabled until enabled (004).")
    retention_main_days: float = Field(
        default=60, gt=0, description="Age after which a main conversation may go (days; fractions too)."
    )
    retention_task_days: float = Field(default=30, gt=0, description="... a task conversation.")
    retention_subagent_days: float = Field(default=7, gt=0, description="... a subagent conversation.")
    retention_generation_seconds: float = Field(
        default=5_184_000, gt=0, description="Age (s) after which a generation of `main` (a fold's or reset's) goes."
    )
    retention_check_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="The worker applies retention to every tenant this often, once enabled (0: only by command).",
    )

    # --- API ---
    backend_tokens: dict[str, str] = Field(
        default_factory=dict, description="Backend credentials, token -> the tenant it is bound to (JSON)."
    )
    operator_tokens: list[str] = Field(default_factory=list, description="Operator credentials (JSON list).")
    credentials_file: Path | None = Field(
        default=None, description='A JSON file {"backends": {token: tenant}, "operators": [token]}.'
    )
    worker_metrics_port: int | None = Field(default=None, description="Serve the worker's Prometheus metrics here.")
    metrics_host: str = Field(default="127.0.0.1", description="Interface of the worker's metrics endpoint.")
    api_host: str = Field(
        default="127.0.0.1", description="The API's interface; off loopback it needs credentials (or API_ALLOW_OPEN)."
    )
    api_port: int = 8080
    api_keep_alive_seconds: int = Field(
        default=75,
        gt=0,
        description="How long the API keeps an idle connection open: longer than clients keep theirs in their "
        "pools (httpx: 5 s, proxies and load balancers: 60 s), so a request never meets a connection the "
        "API is closing.",
    )
    api_header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="A request whose line and headers are not complete this long after its first byte (the "
        "connection's opening, for its first request) is answered 408 and closed: a slow client cannot hold "
        "a connection.",
    )
    api_body_timeout_seconds: float = Field(
        default=30.0, gt=0, description="A body not complete this long after its headers is answered 408 and closed."
    )
    api_max_header_bytes: int = Field(
        default=65_536, ge=1024, description="A request line and headers past this many bytes answer 431, unread."
    )
    api_connections_per_address: int = Field(
        default=256,
        ge=1,
        description="Connections one client address may hold open at once; past it a new one is answered 503 "
        "and closed. Behind a proxy every client has the proxy's address: set it to what the proxy opens.",
    )
    api_allow_open: bool = Field(
        default=False, description="Serve the API with no credential on a non-loopback address (never in production)."
    )
    max_body_bytes: int = Field(
        default=2_097_152,
        ge=1024,
        description="A larger request body is refused (413) before it is read: twice a Kafka record's default size.",
    )
    read_wait_seconds: float = Field(default=5.0, gt=0, description="How long a read with after= waits.")
    ready_max_lag: int = Field(default=0, ge=0, description="/readyz tolerates this many unapplied records.")
    ready_stall_seconds: float = Field(
        default=30.0,
        gt=0,
        description="/readyz answers 503 when a projection with lag has applied nothing this long, whatever its lag.",
    )
    idempotency_ttl_seconds: int = Field(default=86_400, ge=1)

    # --- privacy (DESIGN "Erasure, export, replay") ---
    master_key: SecretStr | None = Field(
        default=None, description="Base64 of the 32-byte master key that wraps every data key (a secret)."
    )
    master_key_file: Path | None = Field(
        default=None, description="A file holding the master key; default: <home>/master.key, made by `memlog dev up`."
    )
    privacy_database: str = Field(
        default="memlog_privacy", description="MongoDB database of the key vault, ledger and exports (no namespace)."
    )
    export_keep_seconds: int = Field(
        default=86_400, ge=1, description="An export bundle is deleted this long after it was made (a TTL index)."
    )
    ledger_days: float = Field(
        default=365,
        gt=0,
        description="A ledger entry (digests and counts, no content) is deleted this long after it was recorded. "
        "At least MEMLOG_INGEST_RETENTION_SECONDS: the ingest sealer asks the ledger about erasures that long.",
    )
    compact_after_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="After an erasure or a retention purge, the worker's privacy set rewrites the storage "
        "engines' files within this long (`memlog compact`, by itself); 0: only by command.",
    )
    key_cache_seconds: float = Field(default=5.0, ge=0, description="How long a process caches a data key to read.")
    # --- the log forgets on schedule: period keys (projections/periods.py) ---
    log_key_period_seconds: int = Field(
        default=0,
        ge=0,
        description="Length of a key period of the log: a subject's thread and trace events are sealed under the key "
        "of the period their time falls in (0: calendar months, UTC).",
    )
    log_key_check_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="The worker's privacy set shreds the period keys that are due this often (0: never). A key is due "
        "once the longest lifetime its records feed has passed since its period ended (`log_key_keep_ms`).",
    )
    replay_batch: int = Field(
        default=60_000,
        ge=1,
        description="Records a replay reads and writes per batch (more: fewer store calls, more memory).",
    )
    replay_workers: int = Field(
        default=1,
        ge=1,
        le=MAX_REPLAY_WORKERS,
        description="Processes a replay shares the partitions among (`replay --workers`).",
    )

    @model_validator(mode="after")
    def _credentials_complete(self) -> Settings:
        if self.kafka_security_protocol.startswith("SASL_") and not (
            self.kafka_sasl_username and (self.kafka_sasl_password or self.kafka_sasl_password_file)
        ):
            raise ValueError(
                f"MEMLOG_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol} needs MEMLOG_KAFKA_SASL_USERNAME "
                "and MEMLOG_KAFKA_SASL_PASSWORD (or MEMLOG_KAFKA_SASL_PASSWORD_FILE)"
            )
        if (self.kafka_ssl_certfile is None) != (self.kafka_ssl_keyfile is None):
            raise ValueError("MEMLOG_KAFKA_SSL_CERTFILE and MEMLOG_KAFKA_SSL_KEYFILE go together")
        if (self.redis_tls_certfile is None) != (self.redis_tls_keyfile is None):
            raise ValueError("MEMLOG_REDIS_TLS_CERTFILE and MEMLOG_REDIS_TLS_KEYFILE go together")
        self.worker_set()  # names its problem
        self.up_sets()
        if self.ledger_days * 86_400 < self.ingest_retention_seconds:
            raise ValueError(
                f"MEMLOG_LEDGER_DAYS={self.ledger_days} is shorter than MEMLOG_INGEST_RETENTION_SECONDS="
                f"{self.ingest_retention_seconds}: the ingest sealer would miss erasures it must honour"
            )
        if self.min_insync_replicas is not None and self.min_insync_replicas > self.replication:
            raise ValueError(
                f"MEMLOG_MIN_INSYNC_REPLICAS={self.min_insync_replicas} exceeds MEMLOG_REPLICATION="
                f"{self.replication}: no write could be acknowledged"
            )
        return self

    # --- derived ---
    def master_key_bytes(self) -> bytes:
        """The master key, from the setting, its file, or the local stack's file; refuses to go on without one."""
        if self.master_key is not None:
            text = self.master_key.get_secret_value()
            origin = "MEMLOG_MASTER_KEY"
        else:
            path = self.master_key_file or self.home / "master.key"
            if not path.is_file():
                raise ServiceSetupError(
                    "no master key: set MEMLOG_MASTER_KEY (base64 of 32 random bytes) or MEMLOG_MASTER_KEY_FILE; "
                    f"`memlog dev up` makes {self.home / 'master.key'} for the local stack"
                )
            text = path.read_text(encoding="utf-8")
            origin = str(path)
        try:
            key = base64.b64decode(text.strip(), validate=True)
        except (ValueError, binascii.Error):
            raise ServiceSetupError(f"the master key in {origin} is not base64") from None
        if len(key) != 32:
            raise ServiceSetupError(f"the master key in {origin} is {len(key)} bytes; it must be 32")
        return key

    def retention_policy(self) -> RetentionPolicy:
        days = {"main": self.retention_main_days, "task": self.retention_task_days}
        days["subagent"] = self.retention_subagent_days
        return RetentionPolicy(self.retention_enabled, days, round(self.retention_generation_seconds * 1000))

    def key_periods(self) -> KeyPeriods:
        return KeyPeriods(self.log_key_period_seconds)

    def log_key_keep_ms(self) -> int | None:
        """How long after its end a period's key is kept: the longest lifetime of what its records feed,
        derived from the lifetime settings here and nowhere else (None: never shredded, while
        conversations of the archive live until purged, i.e. retention is disabled)."""
        retention = self.retention_policy()
        return longest_need_ms(
            (self.chat_ttl_seconds * 1000, self.public_ttl_seconds * 1000, self.automation_ttl_seconds * 1000),
            round(self.trace_days * 86_400_000),
            retention.keep_ms() if retention.enabled else None,
        )

    def redactor(self) -> Redactor:
        return Redactor.build(self.redact_keys, self.redact_patterns)

    def fact_policy(self) -> FactPolicy:
        return FactPolicy(
            max_facts=self.facts_max,
            max_chars=self.fact_max_chars,
            keep_ms=round(self.facts_keep_days * 86_400_000),
            tenant_max_facts=self.tenant_facts_max,
            tenant_keep_ms=round(self.tenant_facts_keep_days * 86_400_000),
        )

    def recall_policy(self) -> RecallPolicy:
        return RecallPolicy(limit=self.recall_limit, floor=self.recall_floor, strict=self.recall_strict)

    def thread_policy(self) -> ThreadPolicy:
        return ThreadPolicy(
            session_ttl_ms=self.chat_ttl_seconds * 1000,
            public_ttl_ms=self.public_ttl_seconds * 1000,
            automation_ttl_ms=self.automation_ttl_seconds * 1000,
            fold_tokens=self.fold_tokens,
            fold_exchanges=self.fold_exchanges,
            keep_tokens=self.fold_keep_tokens,
            keep_min=self.fold_keep_min,
            keep_max=self.fold_keep_max,
            summary_chars=self.summary_chars,
            urgent_tokens=self.fold_urgent_tokens,
        )

    @property
    def idempotent_producer(self) -> bool:
        # Tansu has no idempotent producer (README, "Local stack").
        return self.kafka_idempotence and not (self.kafka_bootstrap is None and self.local_broker == "tansu")

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}.{name}"

    @property
    def threads_topic(self) -> str:
        return self.topic("threads")

    @property
    def deadletter_topic(self) -> str:
        return self.topic("deadletter")

    @property
    def subject_topics(self) -> list[str]:
        return [self.topic(name) for name in ("threads", "facts", "traces", "privacy")]

    @property
    def bootstrap(self) -> str:
        if self.kafka_bootstrap:
            return self.kafka_bootstrap
        return f"127.0.0.1:{self.local_kafka_port}"

    @property
    def redis(self) -> str:
        return self.redis_url or f"redis://127.0.0.1:{self.local_redis_port}/0"

    @property
    def mongo(self) -> str:
        return self.mongo_url or f"mongodb://127.0.0.1:{self.local_mongo_port}/?directConnection=true"

    @property
    def mongo_db_name(self) -> str:
        return f"{self.mongo_database}_{self.namespace}"

    def worker_set(self) -> tuple[str, ...]:
        """MEMLOG_WORKER_PROJECTIONS as names, in WORKER_PROJECTIONS' order; raises ValueError naming a bad one."""
        return projection_set(self.worker_projections, "MEMLOG_WORKER_PROJECTIONS")

    def up_sets(self) -> tuple[tuple[str, ...], ...]:
        """MEMLOG_UP_WORKER_SETS as sets of names; raises ValueError unless each projection is in exactly one."""
        setting = "MEMLOG_UP_WORKER_SETS"
        sets = tuple(projection_set(part, setting) for part in self.up_worker_sets.split(";"))
        named = [name for one in sets for name in one]
        twice = sorted({name for name in named if named.count(name) > 1}, key=WORKER_PROJECTIONS.index)
        missing = [name for name in WORKER_PROJECTIONS if name not in named]
        if twice or missing:
            what = "; ".join(
                part
                for part in (f"{', '.join(twice)} in two sets" if twice else "", f"{', '.join(missing)} in none")
                if part
            )
            raise ValueError(f"{setting}={self.up_worker_sets!r}: {what}; each projection runs in exactly one set")
        return sets

    @property
    def group_id(self) -> str:
        """Faust app id and consumer group: one per namespace, so a rebuilt namespace has offsets of its own,
        and one per set of projections when a worker runs only some (MEMLOG_WORKER_PROJECTIONS)."""
        which = self.worker_set()
        if which == WORKER_PROJECTIONS:
            return f"{self.app_id}-{self.namespace}"
        return f"{self.app_id}-{self.namespace}.{'.'.join(which)}"  # '.': never in a namespace

    @property
    def redis_prefix(self) -> str:
        return f"{self.app_id}:{self.namespace}"
