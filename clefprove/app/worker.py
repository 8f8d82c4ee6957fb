"""A worker process and the pipe to it, read by the serving process's event loop itself.

The serving process hands work to a worker (the gate, the behaviour diff) over a Unix
socketpair, one length-prefixed frame each way: no executor, no helper thread in the serving
process, so during a reload nothing but the event-loop thread takes the interpreter lock
there (docs/serve.md, "Reload latency jitter").  The loop sends a request with
``sock_sendall`` and reads the answer with ``add_reader`` on the non-blocking socket; before
the loop runs (start-up), the same socket is used blocking.

A frame: ``<QI`` (payload bytes, number of parts), then one ``<Q`` length per part, then the
parts, each padded to 8 bytes (so that ``numpy.frombuffer`` views of them are aligned).  Part
0 is a small pickle (the function and its arguments; the answer's metadata); the others are
raw bytes: the model's bytes on the way there, the encoded answer and the evaluator's tables
on the way back, never a pickle of the model or of Python lists.

**The doorbell.**  The worker does not wait on the socket for a request but on an
``eventfd`` of its own (sent to it over the socket once, at start), and on the socket only for
its hang-up (``POLLRDHUP``).  A write to a Unix socket wakes its reader *synchronously* (the
kernel's hint that the writer is about to sleep), which places the woken worker on the
writer's core: the event loop's, which goes on serving decisions, and the worker then took
that core for a slice now and then.  The loop now writes the frame into the socket buffer,
where no reader waits, and rings the eventfd, whose wake-up carries no such hint: the
scheduler places the worker on an idle core when there is one.  The answer comes back on the
socket, which the loop reads (waking the loop is harmless: the worker sleeps right after).

A worker that dies (killed, out of memory, a crash in native code) closes its end: the call
waiting on it raises :class:`WorkerDied` and the caller starts a new worker with
:meth:`Worker.restart`.  A worker whose serving process is gone sees the hang-up and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

from clefprove.frozen import frozen

HEADER = struct.Struct("<QI")
#: Bytes read per ``recv_into`` at most.
CHUNK = 1 << 20
#: The pipe's socket buffers (bytes; the kernel caps them at ``net.core.wmem_max``): the
#: worker's answer for the depth-12 example (about 290 KB) fits, so the loop reads it at once.
SOCKET_BUFFER = 4 << 20

Buffer = bytes | bytearray | memoryview


class WorkerDied(Exception):
    """The worker process closed its end of the pipe before answering (it died)."""


class WorkerError(Exception):
    """The function raised in the worker (a bug: the message is its ``repr``)."""


def _pad(n: int) -> int:
    return -n % 8


def encode(meta: Any, parts: Sequence[Buffer] = ()) -> list[Buffer]:
    """The pieces of one frame (to be sent in order)."""
    views = [memoryview(pickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL))]
    views += [memoryview(p).cast("B") for p in parts]
    lengths = struct.pack(f"<{len(views)}Q", *(v.nbytes for v in views))
    pieces: list[Buffer] = [b"", lengths]
    total = len(lengths)
    for v in views:
        pieces.append(v)
        pad = _pad(v.nbytes)
        if pad:
            pieces.append(bytes(pad))
        total += v.nbytes + pad
    pieces[0] = HEADER.pack(total, len(views))
    return pieces


def decode(payload: bytearray, n_parts: int) -> tuple[Any, list[memoryview]]:
    """Metadata and raw parts (views of *payload*) of one received frame."""
    if n_parts < 1:
        raise WorkerError("a frame without metadata")
    view = memoryview(payload)
    lengths = struct.unpack_from(f"<{n_parts}Q", payload, 0)
    at = 8 * n_parts
    parts = []
    for n in lengths:
        if at + n > len(payload):
            raise WorkerError("a frame shorter than its parts")
        parts.append(view[at : at + n])
        at += n + _pad(n)
    return pickle.loads(parts[0]), parts[1:]


def _recv_exactly(sock: socket.socket, into: memoryview) -> None:
    got = 0
    while got < into.nbytes:
        n = sock.recv_into(into[got:], min(CHUNK, into.nbytes - got))
        if n == 0:
            raise WorkerDied
        got += n


def read_frame(sock: socket.socket) -> tuple[Any, list[memoryview]]:
    """One frame from the blocking socket *sock* (:class:`WorkerDied` at end of file)."""
    head = bytearray(HEADER.size)
    _recv_exactly(sock, memoryview(head))
    total, n_parts = HEADER.unpack(head)
    payload = bytearray(total)
    _recv_exactly(sock, memoryview(payload))
    return decode(payload, n_parts)


def write_frame(sock: socket.socket, meta: Any, parts: Sequence[Buffer] = ()) -> None:
    """One frame on the blocking socket *sock*, gathered into as few ``sendmsg`` calls as
    the socket's buffer allows (one, for a frame that fits): each write wakes the reader,
    and the event loop would otherwise be woken once per part (16 times for the depth-12
    example's answer)."""
    pieces = [memoryview(p).cast("B") for p in encode(meta, parts) if len(p)]
    while pieces:
        sent = sock.sendmsg(pieces)
        while pieces and sent >= pieces[0].nbytes:
            sent -= pieces[0].nbytes
            pieces.pop(0)
        if sent:
            pieces[0] = pieces[0][sent:]


#: What a function run in a worker returns: metadata (pickled) and raw parts.
Answer = tuple[Any, Sequence[Buffer]]


def _receive_doorbell(sock: socket.socket) -> int:
    """In the worker: the eventfd the serving process rings for each request (sent first)."""
    msg, fds, _, _ = socket.recv_fds(sock, 1, 1)
    if not msg or len(fds) != 1:
        raise WorkerDied("no doorbell")
    os.set_inheritable(fds[0], False)  # not into the processes the gate may start
    return fds[0]


def _poller(doorbell: int, sock: socket.socket) -> select.poll:
    """In the worker: what it waits on between requests (built once): the doorbell, and the
    socket for its hang-up only: a frame written into the socket wakes nobody
    (:data:`select.POLLRDHUP`, no ``POLLIN``: the kernel filters that wake-up out)."""
    poller = select.poll()
    poller.register(doorbell, select.POLLIN)
    poller.register(sock, select.POLLRDHUP)
    return poller


def _await_request(doorbell: int, poller: select.poll) -> bool:
    """In the worker: block until the doorbell rings (True) or the serving process hangs up
    (False)."""
    while True:
        try:
            events = poller.poll()
        except InterruptedError:  # pragma: no cover - retried by Python itself (PEP 475)
            continue
        for fd, event in events:
            if fd == doorbell and event & select.POLLIN:
                os.eventfd_read(doorbell)  # back to 0 (one request at a time)
                return True
        if events:
            return False  # the hang-up (or an error) of the socket


def worker_main(sock: socket.socket, init: Callable[..., None], initargs: tuple[Any, ...]) -> None:
    """The worker process: ``init(*initargs)``, then answer requests until the pipe closes.

    A request is ``(function, args)`` with raw parts; the function is called as
    ``function(*args, *parts)`` and returns an :data:`Answer`.  Each request is announced by
    the doorbell (the module's docstring)."""
    init(*initargs)
    sock.setblocking(True)
    try:
        doorbell = _receive_doorbell(sock)
    except (OSError, WorkerDied):
        return  # the serving process is gone already
    poller = _poller(doorbell, sock)
    while True:
        try:
            if not _await_request(doorbell, poller):
                return
            (function, args), parts = read_frame(sock)
        except WorkerDied:
            return  # the serving process is gone, or closed the pipe
        try:
            meta, out = function(*args, *parts)
            reply: tuple[str, Any] = ("ok", meta)
        except Exception as exc:  # a bug in the function: reported, the worker lives on
            reply, out = ("error", repr(exc)), ()
        del parts, function, args
        # the answer last: it wakes the event loop, and the worker then only goes back to
        # waiting (anything it did after, it would take the CPU back for)
        write_frame(sock, reply, out)


class _Reply:
    """The answer being read by the event loop (an ``add_reader`` callback)."""

    def __init__(self, sock: socket.socket, future: asyncio.Future[tuple[Any, list[memoryview]]]):
        self.sock = sock
        self.future = future
        self.head = bytearray(HEADER.size)
        self.view = memoryview(self.head)
        self.got = 0
        self.payload: bytearray | None = None
        self.n_parts = 0
        self.read_seconds = 0.0  # the loop's time in this callback, the decode excluded
        self.decode_seconds = 0.0

    def readable(self) -> None:
        if self.future.done():
            return
        t0 = time.perf_counter()
        try:
            while True:
                left = self.view.nbytes - self.got
                n = self.sock.recv_into(self.view[self.got :], min(CHUNK, left))
                if n == 0:
                    self.future.set_exception(WorkerDied())
                    return
                self.got += n
                if self.got < self.view.nbytes:
                    continue
                if self.payload is None:
                    total, self.n_parts = HEADER.unpack(self.head)
                    self.payload = bytearray(total)
                    self.view, self.got = memoryview(self.payload), 0
                    if total:
                        continue
                self.view.release()
                t1 = time.perf_counter()
                self.read_seconds += t1 - t0
                t0 = t1
                answer = decode(self.payload, self.n_parts)
                self.decode_seconds = time.perf_counter() - t1
                self.future.set_result(answer)
                return
        except (BlockingIOError, InterruptedError):
            self.read_seconds += time.perf_counter() - t0
            return
        except Exception as exc:  # a reset pipe, or a frame that does not decode
            self.future.set_exception(WorkerDied(repr(exc)) if isinstance(exc, OSError) else exc)


class Worker:
    """One worker process (``spawn``), at *niceness* via *init*, and the pipe to it.

    One call at a time: the caller serialises them (the service's admission lock)."""

    def __init__(self, name: str, init: Callable[..., None], initargs: tuple[Any, ...]) -> None:
        self.name = name
        self._init = init
        self._initargs = initargs
        self.process: Any = None
        self.sock: socket.socket | None = None
        self.doorbell: int | None = None  # the eventfd rung for each request
        self._closed = False
        #: the event loop's share of the last :meth:`acall` (seconds): encoding and sending
        #: the request, reading the answer off the pipe, decoding it
        self.timing: Timing = Timing()
        self._start()

    def _start(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        for end in (mine, theirs):  # an answer in one write, read in one wake-up of the loop
            for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                with contextlib.suppress(OSError):  # capped at net.core.wmem_max silently
                    end.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        ctx = multiprocessing.get_context("spawn")  # no fork of a process running a loop
        process = ctx.Process(
            target=worker_main, args=(theirs, self._init, self._initargs), name=self.name
        )
        try:
            process.start()
        finally:
            theirs.close()
        doorbell = os.eventfd(0, os.EFD_CLOEXEC)
        with contextlib.suppress(OSError):  # the worker died at once: the first call says so
            socket.send_fds(mine, [b"d"], [doorbell])  # the worker keeps its own copy
        self.process, self.sock, self.doorbell = process, mine, doorbell

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def close(self) -> None:
        """Stop the worker now (a call still running is of no use to anyone), for good."""
        self._closed = True
        self._stop()

    def _stop(self) -> None:
        process, sock, doorbell = self.process, self.sock, self.doorbell
        self.process = self.sock = self.doorbell = None
        if sock is not None:
            sock.close()
        if doorbell is not None:
            os.close(doorbell)
        if process is not None:
            if process.is_alive():
                process.terminate()
            process.join(5)
            if process.is_alive():  # pragma: no cover - ignored SIGTERM
                process.kill()
                process.join(5)
            with contextlib.suppress(ValueError):
                process.close()

    def restart(self) -> None:
        self._stop()
        self._start()

    def call(self, function: Callable[..., Answer], args: tuple[Any, ...],
             parts: Sequence[Buffer] = ()) -> tuple[Any, list[memoryview]]:  # fmt: skip
        """Blocking: run ``function(*args, *parts)`` in the worker (before the loop runs)."""
        sock = self._socket()
        try:
            frame = b"".join(encode((function, args), parts))
            sock.setblocking(False)
            sent = self._post(sock, frame)
            sock.setblocking(True)
            if sent < len(frame):
                sock.sendall(memoryview(frame)[sent:])
            status, meta = None, None
            (status, meta), out = read_frame(sock)
        except OSError as exc:
            raise WorkerDied(repr(exc)) from None
        return _result(status, meta), out

    async def acall(self, function: Callable[..., Answer], args: tuple[Any, ...],
                    parts: Sequence[Buffer] = ()) -> tuple[Any, list[memoryview]]:  # fmt: skip
        """The same from the event loop, which reads the pipe itself (``add_reader``).

        Cancelled midway, the worker's answer would arrive during the next call: the worker
        is stopped, and the next call starts a new one."""
        sock = self._socket()
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[Any, list[memoryview]]] = loop.create_future()
        reply = _Reply(sock, future)
        fd = sock.fileno()
        loop.add_reader(fd, reply.readable)
        try:
            try:
                t0 = time.perf_counter()
                frame = b"".join(encode((function, args), parts))
                done = self._post(sock, frame)
                if done < len(frame):  # more than the socket's buffer: the worker reads it
                    await loop.sock_sendall(sock, memoryview(frame)[done:])
                sent = time.perf_counter() - t0  # the pipe's buffer takes it at once
                (status, meta), out = await future
                self.timing = Timing(sent, reply.read_seconds, reply.decode_seconds)
            finally:
                loop.remove_reader(fd)  # before any close: the number may be reused
        except asyncio.CancelledError:
            self._stop()  # its answer would come during the next call: the next starts anew
            raise
        except OSError as exc:
            raise WorkerDied(repr(exc)) from None
        return _result(status, meta), out

    def _post(self, sock: socket.socket, frame: bytes) -> int:
        """Write what of *frame* the non-blocking *sock*'s buffer takes, then ring the
        doorbell: the worker wakes without the synchronous wake-up of a socket write (the
        module's docstring).  Returns how many bytes were written: the caller sends the rest
        (a frame larger than the buffer, which the woken worker drains)."""
        try:
            done = sock.send(frame)
        except (BlockingIOError, InterruptedError):
            done = 0
        assert self.doorbell is not None
        os.eventfd_write(self.doorbell, 1)
        return done

    def _socket(self) -> socket.socket:
        if self.sock is None:
            if self._closed:
                raise WorkerDied("the worker is stopped")
            self._start()
        assert self.sock is not None
        return self.sock


@frozen
class Timing:
    """The event loop's time in one :meth:`Worker.acall` (seconds), the wait excluded."""

    send: float = 0.0
    read: float = 0.0
    decode: float = 0.0


def _result(status: str, meta: Any) -> Any:
    if status != "ok":
        raise WorkerError(str(meta))
    return meta
