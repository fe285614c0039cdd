"""A Kafka broker of a test's own, on ports of its own, so the test may stop it without touching the shared stack."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memlog.config.settings import Settings
from memlog.dev.localstack import Kafka
from memlog.dev.processes import free_port


@contextmanager
def own_kafka(shared: Settings, home: Path) -> Iterator[tuple[Settings, Kafka]]:
    """Settings whose broker is a fresh single-node Kafka under `home`; Redis and MongoDB stay the shared ones.

    The jars are the shared home's (linked, never downloaded again); the data, the pid file and the
    log are `home`'s, so stopping this broker stops nothing else.
    """
    home.mkdir(parents=True, exist_ok=True)
    libs = f"libs-{shared.kafka_version}"
    (home / "kafka").mkdir(exist_ok=True)
    if not (home / "kafka" / libs).exists():
        (home / "kafka" / libs).symlink_to(shared.home / "kafka" / libs, target_is_directory=True)
    settings = shared.model_copy(
        update={
            "home": home,
            "kafka_bootstrap": None,
            "local_kafka_port": free_port(),
            "local_kafka_controller_port": free_port(),
            "kafka_heap": "384m",
            "master_key_file": shared.master_key_file or shared.home / "master.key",
        }
    )
    broker = Kafka(settings)
    broker.start()
    try:
        yield settings, broker
    finally:
        broker.stop()
