"""kombu's Redis transport as taskyard's workers run it, on a real Redis: the ack emulation
records every job taken as one sorted-set member and removes it on the ack, one command each
and no MULTI/EXEC, the ack sent with the next job's record (or before the worker waits, or as
its channel closes), and the job not waiting for that write's reply, which the next write
reads: a worker killed as its job starts has left the record, and a write that failed is
written again with every record held; a job never acked, rejected to be requeued, or held by a
channel that closes goes back to its queue, once however many restore it, and never after its
ack; kombu's own keys stay empty."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar

import kombu
import pytest
import redis

from taskyard.plumbing import keys
from taskyard.plumbing.broker import ACK_LAG_S, Transport

QUEUE = kombu.Queue("jobs", routing_key="jobs")
TAKEN = keys.celery_taken()
KOMBU_KEYS = ("unacked", "unacked_index")  # kombu's own record of the jobs taken
T = TypeVar("T")


@pytest.fixture
def broker(redis_server: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(f"{redis_server}/1")
    client.flushdb()
    yield client
    assert client.exists(*KOMBU_KEYS) == 0
    client.close()


@pytest.fixture
def connection(redis_server: str, broker: redis.Redis) -> Iterator[kombu.Connection]:
    options = {"visibility_timeout": 1}
    with kombu.Connection(f"{redis_server}/1", transport=Transport,
                          transport_options=options) as conn:  # fmt: skip
        yield conn


def _commands(client: redis.Redis, action: Callable[[], T]) -> tuple[T, Counter[str]]:
    """What `action` returned, and the commands Redis ran (from any client) meanwhile."""

    def calls() -> Counter[str]:
        stats = client.info("commandstats")
        return Counter({name[len("cmdstat_") :]: stat["calls"] for name, stat in stats.items()})

    before = calls()
    result = action()
    return result, calls() - before - Counter(info=1)


def _publish(connection: kombu.Connection, body: dict[str, int]) -> None:
    connection.Producer().publish(body, routing_key="jobs", declare=[QUEUE])


def _take(connection: kombu.Connection) -> kombu.Message:
    """A job taken, its record's write done by Redis."""
    return _settled(QUEUE(connection.channel()).get(no_ack=False))


def _settled(message: kombu.Message | None) -> kombu.Message:
    """`message`, once Redis has done its channel's writes (they go unwaited)."""
    assert message is not None
    message.channel.qos.settle()
    return message


def _acked(message: kombu.Message) -> None:
    """`message` acked, and its record's removal done, as its worker's next write would."""
    message.ack()
    message.channel.qos.send_acks()
    message.channel.qos.settle()


def _past_the_visibility_timeout() -> None:
    time.sleep(1.2)


def test_a_taken_job_is_one_write_and_its_ack_one_more(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    consumer = QUEUE(connection.channel())
    assert consumer.get() is None  # its connection made, the queue declared
    _publish(connection, {"n": 1})
    message, commands = _commands(broker, lambda: _settled(consumer.get(no_ack=False)))
    assert commands == {"rpop": 1, "zadd": 1}
    # The whole record, so any worker can restore the job from the set alone.
    [member] = broker.zrange(TAKEN, 0, -1)
    assert json.loads(member)[0]["properties"]["delivery_tag"] == message.delivery_tag
    assert _commands(broker, message.ack)[1] == {}  # held for the next write
    qos = message.channel.qos
    assert _commands(broker, lambda: (qos.send_acks(), qos.settle()))[1] == {"zrem": 1}
    assert broker.zcard(TAKEN) == 0


def _round_trips(action: Callable[[], T]) -> tuple[T, int, int]:
    """What `action` returned, how many times it sent commands to Redis, and how many replies
    it read."""
    sent = read = 0
    connection = redis.connection.AbstractConnection
    send, receive = connection.send_packed_command, connection.read_response

    def counted_send(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal sent
        sent += 1
        send(self, *args, **kwargs)

    def counted_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal read
        read += 1
        return receive(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(connection, "send_packed_command", counted_send)
        patch.setattr(connection, "read_response", counted_read)
        return action(), sent, read


def test_an_ack_goes_out_with_the_next_jobs_record_in_one_write_not_waited_on(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    consumer = QUEUE(connection.channel())
    for n in range(3):
        _publish(connection, {"n": n})
    first = consumer.get(no_ack=False)
    assert first is not None
    first.ack()
    take = partial(consumer.get, no_ack=False)
    (second, sent, read), commands = _commands(
        broker, lambda: _settled_after(_round_trips(take), first.channel.qos)
    )
    assert second is not None and second.payload == {"n": 1}
    assert sent == 2  # the RPOP, then the ZREM and the ZADD together
    # The RPOP's reply, and the first job's record's (here long since): the second job waits
    # for no reply of its own record's write, nor of the first's ack.
    assert read == 2
    assert commands == {"rpop": 1, "zrem": 1, "zadd": 1}
    assert broker.zcard(TAKEN) == 1  # the second's record only


def _settled_after(result: T, qos: Any) -> T:
    qos.settle()
    return result


def test_an_ack_held_goes_out_alone_once_no_job_came_for_a_while(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    consumer = kombu.Consumer(connection.channel(), [QUEUE], callbacks=[lambda _, m: m.ack()])
    with consumer:
        _publish(connection, {"n": 8})
        connection.drain_events(timeout=5)  # taken (BRPOP) and acked
        settle = consumer.channel.qos.settle
        settle()
        assert broker.zcard(TAKEN) == 1  # the ack held, for the next job's record
        poll_round = connection.transport.cycle.on_poll_start  # a hub's every tick too
        poll_round()
        settle()
        assert broker.zcard(TAKEN) == 1  # no job yet, but the ack is young
        time.sleep(ACK_LAG_S)
        poll_round()
        settle()
        assert broker.zcard(TAKEN) == 0


def test_acks_held_go_out_when_their_channel_closes(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    _publish(connection, {"n": 9})
    message = _take(connection)
    message.ack()
    assert broker.zcard(TAKEN) == 1
    message.channel.close()
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (0, 0)  # sent, and nothing restored


def test_a_job_taken_and_never_acked_is_restored_after_the_visibility_timeout(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    _publish(connection, {"n": 2})
    _take(connection)  # its worker dies holding it
    restorer = connection.channel().qos
    restorer.restore_visible(num=10, interval=1)
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (0, 1)  # not overdue yet
    _past_the_visibility_timeout()
    restorer.restore_visible(num=10, interval=1)
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (1, 0)
    again = _take(connection)
    assert again.payload == {"n": 2} and again.delivery_info["redelivered"]


def test_a_job_rejected_to_be_requeued_returns_at_once(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    _publish(connection, {"n": 3})
    _take(connection).reject(requeue=True)
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (1, 0)
    assert _take(connection).payload == {"n": 3}


def test_a_job_rejected_for_good_leaves_no_record(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    _publish(connection, {"n": 4})
    message = _take(connection)
    message.reject(requeue=False)
    message.channel.qos.settle()  # its record's removal went as the records go, unwaited
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (0, 0)


def test_a_closing_channel_returns_the_jobs_it_holds(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    for n in range(3):
        _publish(connection, {"n": n})
    channel = connection.channel()
    held = [_settled(QUEUE(channel).get(no_ack=False)) for _ in range(3)]
    assert broker.zcard(TAKEN) == 3
    held[0].ack()
    channel.close()  # restores the two it still holds (restore_unacked)
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (2, 0)
    assert sorted(_take(connection).payload["n"] for _ in range(2)) == [1, 2]


def _sweep_with(
    monkeypatch: pytest.MonkeyPatch, connection: kombu.Connection, interloper: Callable[[], Any]
) -> None:
    """A channel of its own restores what is past the visibility timeout, `interloper` run
    once inside its restore transaction: after its read that the record is there, before its
    EXEC."""
    _past_the_visibility_timeout()
    channel = connection.channel()
    restore = channel._do_restore_message

    def interrupted(*args: Any) -> None:
        monkeypatch.setattr(channel, "_do_restore_message", restore)
        interloper()
        restore(*args)

    monkeypatch.setattr(channel, "_do_restore_message", interrupted)
    channel.qos.restore_visible(num=10, interval=1)


def test_two_restorers_racing_restore_a_job_once(
    connection: kombu.Connection, broker: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish(connection, {"n": 5})
    holder = connection.channel()
    assert QUEUE(holder).get(no_ack=False) is not None
    # The holder, closing, restores the job while a sweep is about to.
    _sweep_with(monkeypatch, connection, holder.close)
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (1, 0)


def test_a_job_acked_while_being_restored_stays_acked(
    connection: kombu.Connection, broker: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish(connection, {"n": 6})
    message = _take(connection)

    _sweep_with(monkeypatch, connection, partial(_acked, message))
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (0, 0)


def test_a_job_acked_after_its_restore_runs_again(
    connection: kombu.Connection, broker: redis.Redis
) -> None:
    # A duplicate, which taskyard's idempotent steps tolerate; never a job lost.
    _publish(connection, {"n": 7})
    message = _take(connection)
    _past_the_visibility_timeout()
    connection.channel().qos.restore_visible(num=10, interval=1)
    again = _take(connection)
    _acked(message)  # its first worker was slow, not dead
    assert broker.zcard(TAKEN) == 1  # the second take's record stays until its own ack
    _acked(again)
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (0, 0)


def test_a_worker_killed_as_its_job_starts_has_left_the_jobs_record(
    redis_server: str, broker: redis.Redis
) -> None:
    """The record's write is not waited on, but it is on the socket before the job starts."""
    script = (
        "import os, signal, sys, kombu\n"
        "from taskyard.plumbing.broker import Transport\n"
        "with kombu.Connection(sys.argv[1], transport=Transport) as conn:\n"
        "    queue = kombu.Queue('jobs', routing_key='jobs')\n"
        "    conn.Producer().publish({'n': 10}, routing_key='jobs', declare=[queue])\n"
        "    message = queue(conn.channel()).get(no_ack=False)\n"
        "    assert message is not None\n"
        "    os.kill(os.getpid(), signal.SIGKILL)  # the job's first instant\n"
    )
    worker = subprocess.run([sys.executable, "-c", script, f"{redis_server}/1"], timeout=60)
    assert worker.returncode == -signal.SIGKILL
    assert (broker.llen("jobs"), broker.zcard(TAKEN)) == (0, 1)  # recorded: it will be restored


def _refused(broker: redis.Redis, consumer: kombu.Queue) -> kombu.Message | None:
    """A job taken whose record Redis refuses (the key not a sorted set)."""
    broker.set(TAKEN, "not a sorted set")
    first = consumer.get(no_ack=False)  # the job goes on: its write's reply is not waited for
    broker.delete(TAKEN)
    return first


def _lost(broker: redis.Redis, consumer: kombu.Queue) -> kombu.Message | None:
    """A job taken whose record is lost with its connection."""
    first = _settled(consumer.get(no_ack=False))
    broker.delete(TAKEN)  # as if that write had been lost with its connection
    broker.client_kill_filter(_type="normal", skipme=True)  # every client's connection
    return first


@pytest.mark.parametrize("fault", [_refused, _lost])
def test_a_record_not_written_is_written_again_with_every_record_held(
    connection: kombu.Connection,
    broker: redis.Redis,
    fault: Callable[[redis.Redis, kombu.Queue], kombu.Message | None],
) -> None:
    for n in range(2):
        _publish(connection, {"n": n})
    consumer = QUEUE(connection.channel())
    first = fault(broker, consumer)
    assert first is not None
    second = _settled(consumer.get(no_ack=False))  # its write finds the fault: all again
    assert _recorded(broker) == sorted([first.delivery_tag, second.delivery_tag])


def _recorded(broker: redis.Redis) -> list[str]:
    """The delivery tags of the jobs recorded as taken."""
    members = broker.zrange(TAKEN, 0, -1)
    return sorted(json.loads(member)[0]["properties"]["delivery_tag"] for member in members)
