"""How `memlog replay --workers N` shares the partitions among its processes (streams.replay.share_partitions)."""

from __future__ import annotations

from aiokafka import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from streams.replay import share_partitions

TOPICS = ("m.threads", "m.facts", "m.traces")


def partitions_of(count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, number) for topic in TOPICS for number in range(count)]


def load(group: list[TopicPartition], records: dict[TopicPartition, int]) -> int:
    return sum(records[tp] for tp in group)


def test_busy_partitions_are_spread_where_the_partition_numbers_alone_would_pile_them_up() -> None:
    partitions = partitions_of(6)
    # two busy tenants whose keys hash to the even numbers 0 and 2: by number modulo 2, one process
    # would get 2,000,020 records and the other 30
    records = {tp: 0 for tp in partitions}
    records[TopicPartition("m.threads", 0)] = 1_000_000
    records[TopicPartition("m.threads", 2)] = 1_000_000
    for number in (1, 3, 4, 5):
        records[TopicPartition("m.threads", number)] = 10
    groups = share_partitions(partitions, records, 2)
    assert sorted(load(group, records) for group in groups) == [1_000_020, 1_000_020]


def test_one_number_goes_whole_to_one_process_with_every_topic() -> None:
    partitions = partitions_of(4)
    records = {tp: 100 * (tp.partition + 1) for tp in partitions}
    for group in share_partitions(partitions, records, 3):
        numbers = {tp.partition for tp in group}
        assert sorted(group, key=lambda tp: (tp.partition, tp.topic)) == sorted(
            (TopicPartition(topic, number) for number in numbers for topic in TOPICS),
            key=lambda tp: (tp.partition, tp.topic),
        )


def test_more_processes_than_partition_numbers_leaves_none_empty() -> None:
    partitions = partitions_of(2)
    groups = share_partitions(partitions, {tp: 5 for tp in partitions}, 8)
    assert len(groups) == 2 and all(groups)


def test_partitions_with_nothing_left_are_still_shared_out() -> None:
    partitions = partitions_of(3)
    groups = share_partitions(partitions, {tp: 0 for tp in partitions}, 2)
    assert sorted(tp for group in groups for tp in group) == sorted(partitions)
    assert sorted(len({tp.partition for tp in group}) for group in groups) == [1, 2]


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=64),
    workers=st.integers(min_value=1, max_value=12),
)
def test_every_partition_once_and_no_process_above_its_share_plus_one_partition(sizes: list[int], workers: int) -> None:
    partitions = [TopicPartition("m.threads", number) for number in range(len(sizes))]
    records = dict(zip(partitions, sizes, strict=True))
    groups = share_partitions(partitions, records, workers)
    shared = [tp for group in groups for tp in group]
    assert sorted(shared) == sorted(partitions) and len(shared) == len(set(shared))
    assert len(groups) == min(workers, len(sizes)) and all(groups)
    # each partition went to the least loaded group: none ends above the mean by more than one partition
    assert max(load(group, records) for group in groups) <= sum(sizes) / len(groups) + max(sizes)
    again = share_partitions(list(reversed(partitions)), records, workers)
    assert sorted(map(sorted, again)) == sorted(map(sorted, groups))
