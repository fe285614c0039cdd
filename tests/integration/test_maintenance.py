"""`memlog compact` on the local stack: SecantusDB has no `compact`, so it checkpoints and prunes its
oplog instead; Redis rewrites its append-only file (or snapshots)."""

from __future__ import annotations

from memlog.adapters import connections
from memlog.adapters.maintenance import compact_mongo, rewrite_redis
from memlog.adapters.wiring import open_privacy
from memlog.cli.operators import compact_storage
from memlog.config.settings import Settings


async def test_compaction_reaches_every_database_of_the_app_and_redis(settings: Settings) -> None:
    settings = settings.model_copy(update={"privacy_database": f"memlogprivacy_{settings.namespace}"})
    mongo, redis = connections.mongo(settings), connections.redis_client(settings)
    rebuilt = f"{settings.mongo_db_name}-r20261130000000"
    try:
        for name in (settings.mongo_db_name, rebuilt, settings.privacy_database):
            await mongo[name]["probe"].insert_one({"gone": "soon"})
            await mongo[name]["probe"].delete_many({})
        lines = await compact_mongo(mongo, [settings.mongo_db_name, "no-such-database"])
        assert len(lines) == 1 and lines[0].startswith(f"mongodb {settings.mongo_db_name}: ")
        assert "compacted" in lines[0] or "checkpoint taken" in lines[0]
        assert (await rewrite_redis(redis)).startswith("redis: ")
        await open_privacy(settings, mongo).namespaces.building(settings.namespace + "-r20261130000000")
        done = await compact_storage(settings)
        assert [line.split(":")[0] for line in done] == [
            f"mongodb {settings.privacy_database}",
            f"mongodb {settings.mongo_db_name}",
            f"mongodb {rebuilt}",
            "redis",
        ]
    finally:
        await mongo.drop_database(settings.mongo_db_name)
        await mongo.drop_database(rebuilt)
        await mongo.drop_database(settings.privacy_database)
        await mongo.close()
        await redis.aclose()
