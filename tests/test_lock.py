"""The store's lock (``ackstore/lock.py``): the compiled ``StoreLock`` keeps
``threading.RLock``'s rule, tested side by side with it on the same steps. Nothing here
depends on how fast the machine is: threads meet on events, and a wait that must fail is
one another thread holds the lock through."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ackstore.fields import native
from ackstore.lock import new_lock

LOCKS: list[Any] = [pytest.param(threading.RLock, id="RLock")]
LOCKS.append(
    pytest.param(
        None if native is None else native.StoreLock,
        id="StoreLock",
        marks=pytest.mark.skipif(native is None, reason="the compiled module is not in use"),
    )
)
JOIN = 60  # seconds a thread that should end at once may take on a busy machine


@pytest.fixture(params=LOCKS)
def make(request: pytest.FixtureRequest) -> Callable[[], Any]:
    made: Callable[[], Any] = request.param
    return made


def _in_thread(fn: Callable[[], object]) -> Any:
    """fn's result (or its exception, raised here), run in a thread of its own."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # (handed to the caller)
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(JOIN)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.fixture
def held_elsewhere() -> Iterator[Callable[[Any], None]]:
    """hold(lock): another thread takes the lock and keeps it until the test ends."""
    done = threading.Event()
    threads: list[threading.Thread] = []

    def hold(lock: Any) -> None:
        taken = threading.Event()

        def run() -> None:
            with lock:
                taken.set()
                done.wait(JOIN)

        t = threading.Thread(target=run)
        t.start()
        threads.append(t)
        assert taken.wait(JOIN)

    yield hold
    done.set()
    for t in threads:
        t.join(JOIN)


def test_the_package_makes_the_compiled_lock_where_it_is_built() -> None:
    assert type(new_lock()) is (type(threading.RLock()) if native is None else native.StoreLock)


def test_a_thread_takes_it_again_and_gives_it_back_as_often(make: Callable[[], Any]) -> None:
    lock = make()
    assert lock.acquire() is True and lock.acquire(blocking=False) is True
    with lock:
        assert lock._is_owned()
    lock.release()
    assert lock._is_owned()
    lock.release()
    assert not lock._is_owned()
    with pytest.raises(RuntimeError, match="cannot release un-acquired lock"):
        lock.release()


def test_another_thread_waits_while_it_is_held(make: Callable[[], Any], held_elsewhere: Any) -> None:
    lock = make()
    held_elsewhere(lock)
    assert lock.acquire(blocking=False) is False
    assert lock.acquire(timeout=0.01) is False
    assert not lock._is_owned()
    with pytest.raises(RuntimeError, match="cannot release un-acquired lock"):
        lock.release()  # (held, but by the other thread)


def test_a_waiting_thread_takes_it_once_it_is_given_back(make: Callable[[], Any]) -> None:
    lock = make()
    lock.acquire()
    lock.acquire()
    waiting, order = threading.Event(), []

    def waiter() -> None:
        waiting.set()
        with lock:
            order.append("waiter")

    t = threading.Thread(target=waiter)
    t.start()
    assert waiting.wait(JOIN)
    order.append("owner")
    lock.release()
    assert t.is_alive() or order == ["owner"]  # still held once: the waiter cannot have it yet
    lock.release()
    t.join(JOIN)
    assert not t.is_alive() and order == ["owner", "waiter"]
    assert _in_thread(lambda: lock.acquire(blocking=False))  # free again (the thread's take, given back below)


def test_it_keeps_threads_apart(make: Callable[[], Any]) -> None:
    """Three threads add to one count under the lock, one of them taking it twice with a
    timeout it never runs out of: no addition is lost."""
    lock, box, n = make(), [0], 20_000

    def add() -> None:
        for _ in range(n):
            with lock:
                v = box[0]
                threading.Event().is_set()  # (a call between the read and the write)
                box[0] = v + 1

    def add_twice_taken() -> None:
        for i in range(n):
            assert lock.acquire(timeout=JOIN)
            assert lock.acquire(blocking=False)
            v = box[0]
            if i % 100 == 0:
                time.sleep(0)  # (the interpreter lock handed on while this thread holds it)
            box[0] = v + 1
            lock.release()
            lock.release()

    threads = [threading.Thread(target=add), threading.Thread(target=add), threading.Thread(target=add_twice_taken)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN)
    assert box[0] == 3 * n and not lock._is_owned()


def test_a_signal_handler_runs_while_a_thread_waits_and_its_error_ends_the_wait(
    make: Callable[[], Any], held_elsewhere: Any
) -> None:
    class Woken(Exception):
        pass

    def handler(signum: int, frame: object) -> None:
        raise Woken

    lock = make()
    held_elsewhere(lock)
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Woken):
            lock.acquire()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not lock._is_owned()


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda lock: lock.acquire(False, 1), ValueError, "can't specify a timeout for a non-blocking call"),
        (lambda lock: lock.acquire(timeout=-2), ValueError, "timeout value must be"),
        (lambda lock: lock.acquire(timeout="x"), TypeError, "str"),
    ],
)
def test_a_bad_acquire_is_refused_as_rlock_refuses_it(
    make: Callable[[], Any], call: Callable[[Any], object], error: type[Exception], words: str
) -> None:
    lock = make()
    with pytest.raises(error, match=words):
        call(lock)
    assert not lock._is_owned()


@pytest.mark.skipif(native is None, reason="the compiled module is not in use")
def test_a_thread_giving_it_back_while_another_waits_lets_that_one_in_before_it_takes_it_again() -> None:
    """The store's lock is handed over: a thread that gives it back while another waits and
    takes it again at once (a group flush between two chunks) takes it after the waiter,
    not before (threading.RLock lets it barge in, as often as it comes back: an ack
    waited for every chunk of a flush)."""
    assert native is not None
    lock, order = native.StoreLock(), []
    lock.acquire()

    def waiter() -> None:
        with lock:
            order.append("waiter")

    t = threading.Thread(target=waiter)
    t.start()
    deadline = time.monotonic() + JOIN
    while lock.waiters == 0 and time.monotonic() < deadline:  # (the waiter is in its wait)
        time.sleep(0.001)
    assert lock.waiters == 1
    lock.release()
    with lock:
        order.append("giver")
    t.join(JOIN)
    assert not t.is_alive() and order == ["waiter", "giver"] and lock.waiters == 0
    assert lock.acquire(blocking=False)  # free, and a take that does not wait is never kept out
    lock.release()
