"""Calls to Dask actors over the fit process's own connections to their workers.

An actor proxy's call (``distributed.actor.Actor``) is run by the client's event loop, which
lives in another thread of this process: the caller's thread hands the call to that loop and
waits to be handed the answer back, and unless the client is ``direct_to_workers`` (off by
Dask's default, and in the service's client) the call and its answer are relayed by the
scheduler, a further process on the way there and back. An out-of-core boosting fit makes a
call to every actor per tree level (``engine.parallel._dask_parts``), so these hand-offs,
each a wake-up of a thread on a busy machine, are much of a level's time.

:class:`ActorComms` sends the same ``actor_execute`` message the proxy sends (the worker's
own handler runs the method, in the worker's actor thread, as for a proxy) over one
connection per worker that this process opens itself, with Dask's own ``connect`` (its
protocol, serialisation and the client's TLS settings), and reads the answers on a private
event loop run by the calling thread: every actor's call is written before any answer is
read, and no other thread of this process takes part.

A call may ask to be run on the worker's event loop itself rather than handed to its actor
thread and back (Dask's ``separate_thread=False``): two thread wake-ups fewer on the worker,
for calls short enough not to hold up the worker's other messages.

A call's outcome is its result, the method's exception, or :class:`ActorUnreachable` (an
``OSError``, as a proxy's "Unable to contact Actor's worker") when the connection fails or
closes: the worker died or is dying. A worker this process cannot reach directly (behind the
scheduler only) is found at the first connection, and the caller keeps to the proxies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from distributed import Client
from distributed.comm import Comm, connect
from distributed.protocol import to_serialize

__all__ = ["CONNECT_SECONDS", "ActorComms", "ActorUnreachable"]

# One call: (worker address, actor key, method, args), and optionally whether the worker runs
# it on its event loop (a short call, see the module's docstring).
Call = tuple[str, str, str, Sequence[Any]] | tuple[str, str, str, Sequence[Any], bool]
T = TypeVar("T")

# How long opening a connection to a worker may take: a live worker on the cluster's network
# answers in milliseconds; past this it is taken to be unreachable from here.
CONNECT_SECONDS = 10.0


class ActorUnreachable(OSError):
    """A call could not reach its actor's worker, or the worker closed the connection."""


class ActorComms:
    """This process's connections to the workers holding actors, on a private event loop."""

    def __init__(self, connection_args: dict[str, Any]) -> None:
        self.connection_args = connection_args
        self.loop = asyncio.new_event_loop()
        self.comms: dict[str, Comm] = {}

    @classmethod
    def of_client(cls, client: Client) -> ActorComms:
        """Connections as ``client``'s (its TLS settings)."""
        return cls(client.security.get_connection_args("client"))

    @classmethod
    def of_worker(cls) -> ActorComms:
        """Connections from the Dask worker this runs in to its peers (their TLS settings)."""
        from distributed import get_worker

        return cls(get_worker().security.get_connection_args("worker"))

    def reachable(self, address: str, key: str) -> bool:
        """Whether the worker at ``address`` takes a connection from this process for the
        actor ``key``."""
        try:
            self.loop.run_until_complete(self._comm(address, key))
        except (TimeoutError, OSError):
            return False
        return True

    async def _comm(self, address: str, key: str) -> Comm:
        # One connection per actor: a worker answers a connection's messages one after the
        # other, and two actors on one worker (a replacement's) are asked at once.
        comm = self.comms.get(key)
        if comm is None or comm.closed():
            comm = await connect(address, timeout=CONNECT_SECONDS, **self.connection_args)
            self.comms[key] = comm
        return comm

    def call(self, calls: Sequence[Call]) -> list[Any]:
        """Run each ``(address, actor key, method, args)`` at once; per call its result, or
        the exception it raised (the method's, or :class:`ActorUnreachable`), in order."""
        return self.exchange(calls, lambda: None)[0]

    def exchange(self, calls: Sequence[Call], meanwhile: Callable[[], T]) -> tuple[list[Any], T]:
        """:meth:`call`'s outcomes, and ``meanwhile()`` run here after every call is sent
        and before any answer is read (this process's own share of the work)."""
        sent = self.loop.run_until_complete(self._send(calls))
        try:
            local = meanwhile()
        finally:  # read every answer even so: a connection is left with none unread
            outcomes = self.loop.run_until_complete(self._receive(calls, sent))
        return outcomes, local

    async def _send(self, calls: Sequence[Call]) -> list[Comm | BaseException]:
        return list(await asyncio.gather(*(self._write(*call) for call in calls)))

    async def _write(
        self, address: str, key: str, method: str, args: Sequence[Any], inline: bool = False
    ) -> Any:
        try:
            comm = await self._comm(address, key)
            await comm.write(
                {
                    "op": "actor_execute",
                    "actor": key,
                    "function": method,
                    "args": [to_serialize(arg) for arg in args],
                    # Popped by the worker's handler, never passed to the method.
                    "kwargs": {"separate_thread": False} if inline else {},
                    "reply": True,
                }
            )
        except (TimeoutError, OSError) as error:
            return self._unreachable(address, key, error)
        except Exception as error:  # an argument that does not serialise, say
            self._drop(key)
            return error
        return comm

    def _unreachable(self, address: str, key: str, error: BaseException) -> ActorUnreachable:
        self._drop(key)
        return ActorUnreachable(f"Unable to reach the actor's worker {address}: {error}")

    def _drop(self, key: str) -> None:
        """Close ``key``'s connection: after a failed write or read it may hold half a
        message, or an answer nobody read, which the next call would take for its own."""
        comm = self.comms.pop(key, None)
        if comm is not None:
            comm.abort()

    async def _receive(
        self, calls: Sequence[Call], sent: Sequence[Comm | BaseException]
    ) -> list[Any]:
        return list(
            await asyncio.gather(
                *(self._read(*call[:2], comm) for call, comm in zip(calls, sent, strict=True))
            )
        )

    async def _read(self, address: str, key: str, comm: Comm | BaseException) -> Any:
        if isinstance(comm, BaseException):
            return comm
        try:
            answer = await comm.read()
        except (TimeoutError, OSError) as error:
            return self._unreachable(address, key, error)
        except Exception as error:  # an answer that does not deserialise, say
            self._drop(key)
            return error
        status = answer.get("status") if isinstance(answer, dict) else None
        if status == "OK":
            return answer["result"]
        if status == "error":
            exception = answer["exception"]
            return exception if isinstance(exception, BaseException) else RuntimeError(exception)
        # The worker's handler failed outside the method (the actor gone from the worker).
        return RuntimeError(f"The actor's worker {address} answered {answer!r}")

    def close(self) -> None:
        """Close the connections and the loop (the workers and actors stay)."""
        if self.loop.is_closed():
            return
        comms, self.comms = list(self.comms.values()), {}
        for comm in comms:
            comm.abort()
        self.loop.close()
