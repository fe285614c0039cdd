"""How every client reaches Kafka, Redis and MongoDB: credentials and TLS from the settings, in one place.

A secret comes from its setting (the environment, a Kubernetes Secret) or from the file its `*_file`
setting names (a mounted secret); never from the repository. Settings given here win over the same
option written into a URL.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import redis.asyncio as aioredis
from aiokafka.helpers import create_ssl_context
from pydantic import SecretStr
from pymongo import AsyncMongoClient
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import ConnectionPool, SSLConnection, parse_url

from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from schemas.errors import ServiceSetupError

REDIS_SOCKET_TIMEOUT_SECONDS = 10
REDIS_CONNECT_TIMEOUT_SECONDS = 5


def secret(value: SecretStr | None, file: Path | None, setting: str) -> str | None:
    """The secret's value: the setting itself, else the first line of the file the `_file` setting names."""
    if value is not None:
        return value.get_secret_value()
    if file is None:
        return None
    try:
        return file.read_text().strip()
    except OSError as exc:
        raise ServiceSetupError(f"MEMLOG_{setting.upper()}_FILE={file} cannot be read: {exc.strerror}") from exc


def _readable(path: Path | None, setting: str) -> str | None:
    if path is None:
        return None
    if not path.is_file():
        raise ServiceSetupError(f"MEMLOG_{setting.upper()}={path}: no such file")
    return str(path)


def kafka_ssl_context(settings: Settings) -> ssl.SSLContext:
    """The TLS context for the brokers: the CA file (default: the system's) and the client certificate, if any."""
    try:
        context: ssl.SSLContext = create_ssl_context(
            cafile=_readable(settings.kafka_ssl_cafile, "kafka_ssl_cafile"),
            certfile=_readable(settings.kafka_ssl_certfile, "kafka_ssl_certfile"),
            keyfile=_readable(settings.kafka_ssl_keyfile, "kafka_ssl_keyfile"),
        )
    except ssl.SSLError as exc:
        raise ServiceSetupError(f"the Kafka TLS files do not load: {exc}") from exc
    return context


def kafka_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments every aiokafka client (producer, consumer, admin) is built with."""
    protocol = settings.kafka_security_protocol
    options: dict[str, Any] = {"bootstrap_servers": settings.bootstrap, "security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = kafka_ssl_context(settings)
    if protocol.startswith("SASL_"):
        options["sasl_mechanism"] = settings.kafka_sasl_mechanism
        options["sasl_plain_username"] = settings.kafka_sasl_username
        options["sasl_plain_password"] = secret(
            settings.kafka_sasl_password, settings.kafka_sasl_password_file, "kafka_sasl_password"
        )
    return options


def faust_credentials(settings: Settings) -> Any:
    """The Faust app's broker credentials (None for PLAINTEXT); Faust hands them to aiokafka."""
    import faust

    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    context = kafka_ssl_context(settings) if protocol in ("SSL", "SASL_SSL") else None
    if protocol == "SSL":
        return faust.SSLCredentials(context)
    return faust.SASLCredentials(
        username=settings.kafka_sasl_username,
        password=secret(settings.kafka_sasl_password, settings.kafka_sasl_password_file, "kafka_sasl_password"),
        ssl_context=context,
        mechanism=settings.kafka_sasl_mechanism,
    )


def redis_options(settings: Settings) -> dict[str, Any]:
    """The Redis connection pool's options: the URL's, then the settings' credentials and TLS over them."""
    options: dict[str, Any] = {
        "socket_timeout": REDIS_SOCKET_TIMEOUT_SECONDS,
        "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_SECONDS,
        **parse_url(settings.redis),
    }
    if settings.redis_username is not None:
        options["username"] = settings.redis_username
    password = secret(settings.redis_password, settings.redis_password_file, "redis_password")
    if password is not None:
        options["password"] = password
    if settings.redis_tls:
        options["connection_class"] = SSLConnection
    if options.get("connection_class") is SSLConnection:
        options["ssl_cert_reqs"] = "required"
        options["ssl_ca_certs"] = _readable(settings.redis_tls_cafile, "redis_tls_cafile")
        options["ssl_certfile"] = _readable(settings.redis_tls_certfile, "redis_tls_certfile")
        options["ssl_keyfile"] = _readable(settings.redis_tls_keyfile, "redis_tls_keyfile")
    return options


def redis_client(settings: Settings) -> aioredis.Redis:
    """A client of the configured Redis; of a Redis Cluster with `MEMLOG_REDIS_CLUSTER`.

    The cluster client serves the same commands memlog issues (every key of one thread, and every key
    a script or a transaction touches, shares one hash slot: memlog/adapters/redis_store.py), so the stores
    take either as `aioredis.Redis`."""
    options = redis_options(settings)
    if not settings.redis_cluster:
        return aioredis.Redis.from_pool(ConnectionPool(**options))
    options.pop("db", None)  # a cluster has database 0 only
    if options.pop("connection_class", None) is SSLConnection:
        options["ssl"] = True
    cluster = RedisCluster(**options)
    # redis-py 7.4's cluster transactions (MULTI, which a session read uses for one consistent snapshot
    # of a thread's keys) call each reply's parser with the routing `keys=` it was given; most parsers
    # take no such argument. It only routes, so the parsers are called without it.
    cluster.response_callbacks = {name: _without_keys(parse) for name, parse in cluster.response_callbacks.items()}
    return cast(aioredis.Redis, cluster)


def _without_keys(parse: Callable[..., Any]) -> Callable[..., Any]:
    def call(response: Any, **options: Any) -> Any:
        options.pop("keys", None)
        return parse(response, **options)

    return call


def mongo_options(settings: Settings) -> dict[str, Any]:
    """pymongo's keyword options from the settings; they take precedence over the URL's."""
    options: dict[str, Any] = {}
    if settings.mongo_username is not None:
        options["username"] = settings.mongo_username
    password = secret(settings.mongo_password, settings.mongo_password_file, "mongo_password")
    if password is not None:
        options["password"] = password
    if settings.mongo_auth_source is not None:
        options["authSource"] = settings.mongo_auth_source
    if settings.mongo_tls:
        options["tls"] = True
        if settings.mongo_tls_cafile is not None:
            options["tlsCAFile"] = _readable(settings.mongo_tls_cafile, "mongo_tls_cafile")
        if settings.mongo_tls_certfile is not None:
            options["tlsCertificateKeyFile"] = _readable(settings.mongo_tls_certfile, "mongo_tls_certfile")
    return options


def mongo(settings: Settings) -> AsyncMongoClient[dict[str, Any]]:
    return mongo_client(settings.mongo, **mongo_options(settings))
