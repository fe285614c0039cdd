"""Driver exceptions become memlog's at the adapter edge: outages are retried, refusals are poison."""

from __future__ import annotations

import pytest
from bson.errors import InvalidDocument
from pymongo.errors import AutoReconnect, DocumentTooLarge, OperationFailure, ServerSelectionTimeoutError
from redis.exceptions import BusyLoadingError, ConnectionError, ReadOnlyError, ResponseError, TimeoutError

from memlog.adapters.mongo_store import mongo_errors
from memlog.adapters.redis_store import redis_errors
from schemas.errors import StoreRefused, StoreUnavailable


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (ConnectionError("refused"), StoreUnavailable),
        (TimeoutError("slow"), StoreUnavailable),
        (BusyLoadingError("loading"), StoreUnavailable),
        (ReadOnlyError("a replica"), StoreUnavailable),
        (ResponseError("LOADING Redis is loading the dataset in memory"), StoreUnavailable),
        (ResponseError("OOM command not allowed when used memory > 'maxmemory'"), StoreUnavailable),
        (OSError("reset by peer"), StoreUnavailable),
        (ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), StoreRefused),
        (ResponseError("ERR Error running script (call to f_1): user_script:9: bad argument"), StoreRefused),
    ],
)
def test_redis_errors_are_outages_or_refusals(raised: Exception, expected: type[Exception]) -> None:
    with pytest.raises(expected), redis_errors():
        raise raised


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (AutoReconnect("primary went away"), StoreUnavailable),
        (ServerSelectionTimeoutError("no server"), StoreUnavailable),
        (OperationFailure("write conflict", code=112), StoreUnavailable),
        (OperationFailure("shutting down", code=91), StoreUnavailable),
        (OperationFailure("labelled", code=2, details={"errorLabels": ["RetryableWriteError"]}), StoreUnavailable),
        (InvalidDocument("cannot encode object"), StoreRefused),
        (DocumentTooLarge("BSON document too large (17000000 bytes)"), StoreRefused),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), StoreRefused),
        (OperationFailure("bad value", code=2), StoreRefused),
        (OperationFailure("object to insert exceeds the maximum size", code=10334), StoreRefused),
    ],
)
def test_mongodb_errors_are_outages_or_refusals(raised: Exception, expected: type[Exception]) -> None:
    with pytest.raises(expected), mongo_errors():
        raise raised
