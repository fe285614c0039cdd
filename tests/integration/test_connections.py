"""Credentials and TLS settings reach every client: Kafka (aiokafka and Faust), Redis and MongoDB."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faust
import pytest
from pydantic import ValidationError
from redis.asyncio.connection import SSLConnection

from memlog.adapters.connections import faust_credentials, kafka_options, mongo_options, redis_client, redis_options
from memlog.adapters.redis_store import RedisSessionStore
from memlog.config.settings import Settings
from memlog.dev.localstack import port_open
from memlog.dev.processes import free_port
from schemas.errors import ServiceSetupError, StoreUnavailable


def settings(**values: Any) -> Settings:
    return Settings(home=Path("/nonexistent"), **values)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, and a client certificate with its key, made with the openssl command line."""
    folder = tmp_path_factory.mktemp("tls")
    openssl = shutil.which("openssl")
    assert openssl is not None, "the TLS tests need the openssl command"
    files = {"ca": folder / "ca.pem", "ca_key": folder / "ca.key", "cert": folder / "client.pem"}
    files["key"] = folder / "client.key"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=memlog-test-ca",
            "-keyout",
            str(files["ca_key"]),
            "-out",
            str(files["ca"]),
        ],
        check=True,
        capture_output=True,
    )
    request = folder / "client.csr"
    subprocess.run(
        [
            openssl,
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=memlog-client",
            "-keyout",
            str(files["key"]),
            "-out",
            str(request),
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            openssl,
            "x509",
            "-req",
            "-in",
            str(request),
            "-CA",
            str(files["ca"]),
            "-CAkey",
            str(files["ca_key"]),
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            str(files["cert"]),
        ],
        check=True,
        capture_output=True,
    )
    return files


def test_plaintext_kafka_gets_no_tls_and_no_sasl() -> None:
    assert kafka_options(settings(kafka_bootstrap="k:9092")) == {
        "bootstrap_servers": "k:9092",
        "security_protocol": "PLAINTEXT",
    }
    assert faust_credentials(settings()) is None


def test_sasl_ssl_kafka_trusts_the_ca_file_and_reads_the_password_from_its_file(
    tls_files: dict[str, Path], tmp_path: Path
) -> None:
    password_file = tmp_path / "kafka-password"
    password_file.write_text("s3cret-from-a-file\n")
    configured = settings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="memlog",
        kafka_sasl_password_file=password_file,
        kafka_ssl_cafile=tls_files["ca"],
        kafka_ssl_certfile=tls_files["cert"],
        kafka_ssl_keyfile=tls_files["key"],
    )
    options = kafka_options(configured)
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("memlog", "s3cret-from-a-file")
    trusted = options["ssl_context"].get_ca_certs()
    assert [dict(item[0] for item in cert["subject"]) for cert in trusted] == [{"commonName": "memlog-test-ca"}]
    assert options["ssl_context"].check_hostname is True

    credentials = faust_credentials(configured)
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.mechanism.value == "SCRAM-SHA-512" and credentials.password == "s3cret-from-a-file"
    assert credentials.ssl_context is not None and credentials.protocol.value == "SASL_SSL"


def test_ssl_only_kafka_gives_faust_ssl_credentials(tls_files: dict[str, Path]) -> None:
    credentials = faust_credentials(settings(kafka_security_protocol="SSL", kafka_ssl_cafile=tls_files["ca"]))
    assert isinstance(credentials, faust.SSLCredentials)
    assert credentials.context.get_ca_certs()


def test_sasl_without_a_password_is_refused_naming_the_settings() -> None:
    with pytest.raises(ValidationError, match="MEMLOG_KAFKA_SASL_PASSWORD"):
        settings(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_username="memlog")


def test_a_missing_ca_file_is_named() -> None:
    with pytest.raises(ServiceSetupError, match=r"MEMLOG_KAFKA_SSL_CAFILE=/no/such/ca\.pem"):
        kafka_options(settings(kafka_security_protocol="SSL", kafka_ssl_cafile=Path("/no/such/ca.pem")))


def test_an_unreadable_password_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(ServiceSetupError, match="MEMLOG_REDIS_PASSWORD_FILE"):
        redis_options(settings(redis_password_file=missing))


def test_redis_credentials_and_tls_settings_win_over_the_url(tls_files: dict[str, Path]) -> None:
    options = redis_options(
        settings(
            redis_url="redis://olduser:oldpass@cache:6380/2",
            redis_username="memlog",
            redis_password="new-secret",
            redis_tls=True,
            redis_tls_cafile=tls_files["ca"],
            redis_tls_certfile=tls_files["cert"],
            redis_tls_keyfile=tls_files["key"],
        )
    )
    assert (options["host"], options["port"], options["db"]) == ("cache", 6380, 2)
    assert (options["username"], options["password"]) == ("memlog", "new-secret")
    assert options["connection_class"] is SSLConnection
    assert options["ssl_ca_certs"] == str(tls_files["ca"]) and options["ssl_cert_reqs"] == "required"
    assert (options["ssl_certfile"], options["ssl_keyfile"]) == (str(tls_files["cert"]), str(tls_files["key"]))


def test_a_rediss_url_alone_still_means_tls() -> None:
    options = redis_options(settings(redis_url="rediss://cache:6380/0"))
    assert options["connection_class"] is SSLConnection and "password" not in options


def test_mongo_credentials_and_tls_settings(tls_files: dict[str, Path], tmp_path: Path) -> None:
    password_file = tmp_path / "mongo-password"
    password_file.write_text("m0ngo")
    options = mongo_options(
        settings(
            mongo_username="memlog",
            mongo_password_file=password_file,
            mongo_auth_source="admin",
            mongo_tls=True,
            mongo_tls_cafile=tls_files["ca"],
        )
    )
    assert options == {
        "username": "memlog",
        "password": "m0ngo",
        "authSource": "admin",
        "tls": True,
        "tlsCAFile": str(tls_files["ca"]),
    }
    assert mongo_options(settings()) == {}


def test_secrets_never_show_in_the_settings_repr() -> None:
    configured = settings(redis_password="hunter2", mongo_password="hunter3")
    assert "hunter2" not in repr(configured) and "hunter3" not in str(configured)


@pytest.fixture(scope="module")
def redis_with_password(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A redis-server of this test's own that requires a password (requirepass)."""
    server = shutil.which("redis-server")
    assert server is not None, "redis-server is missing: `memlog dev up` installs it"
    port = free_port()
    folder = tmp_path_factory.mktemp("redis-auth")
    process = subprocess.Popen(
        [
            server,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--requirepass",
            "only-with-this",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_open(port):
            assert process.poll() is None and time.monotonic() < deadline, "redis-server with requirepass did not start"
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_redis_with_a_password_takes_memlog_with_the_password_setting(redis_with_password: int) -> None:
    url = f"redis://127.0.0.1:{redis_with_password}/0"
    client = redis_client(settings(redis_url=url, redis_password="only-with-this"))
    try:
        assert await RedisSessionStore(client, "auth").applied("threads", 0) == -1
    finally:
        await client.aclose()


async def test_redis_with_a_password_refuses_memlog_without_it_clearly(redis_with_password: int) -> None:
    client = redis_client(settings(redis_url=f"redis://127.0.0.1:{redis_with_password}/0"))
    try:
        with pytest.raises(StoreUnavailable, match=r"(?i)authentication required"):
            await RedisSessionStore(client, "auth").applied("threads", 0)
    finally:
        await client.aclose()
