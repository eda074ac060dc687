"""The API's front: one event-driven process (asyncio and h11) that holds every client
connection and hands gunicorn only whole requests.

gunicorn answers a request in a thread that also reads it: a client that sends its request a
byte at a time, or reconnects as soon as it is closed, holds a thread, and a few such clients
hold them all (the read timeout of service/server.py frees a thread, but the same client
takes it straight back). Here a connection costs a coroutine until its request has arrived
whole (line, headers and body within the read timeout of its first byte); only then is it sent
to gunicorn, over a private Unix socket, and gunicorn's answer is read at once and written to
the client from memory, however slowly the client reads. A client, known by its address as a
submitter is (an IPv6 client by its /64), may hold at most `per_client` connections and
`per_client_bytes` of bodies in flight; the front at most `connections` in all.

`tvmrepro serve` and `up` run it in front of gunicorn (TVMREPRO_FRONT=0 turns it off, e.g.
behind a proxy that does this work: compose's nginx). The front tells gunicorn each request's
client in FRONT_CLIENT_HEADER, the one header it trusts, removing any copy a client sent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import socket
from collections import Counter
from dataclasses import dataclass

import h11

from tvmrepro.submitters import address_submitter

FRONT_CLIENT_HEADER = "X-Tvmrepro-Client"
READ_CHUNK = 65536
MAX_HEAD_BYTES = 64 << 10  # request line and headers
IDLE_S = 15.0  # a kept-alive connection with no request for this long is closed
BACKEND_CONNECT_S = 10.0  # gunicorn still starting, or between its processes' restarts
RESPONSE_S = 90.0  # above gunicorn's own request timeout (service/server.py)
# Headers of one connection, not of the request (RFC 9110 7.6.1), and the front's own.
# (h11 gives header names in lower case, as bytes.)
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                        b"transfer-encoding", b"upgrade", b"content-length",
                        FRONT_CLIENT_HEADER.lower().encode()})


@dataclass(frozen=True)
class FrontLimits:
    """What one client, and all of them, may hold of the front."""

    read_timeout_s: float
    max_request_bytes: int
    per_client: int
    connections: int
    # The header a proxy in front of this one sets to the client's address (the deployment's
    # TVMREPRO_CLIENT_HEADER); empty: the connection's address is the client.
    client_header: str = ""

    @property
    def per_client_bytes(self) -> int:
        """Bodies one client may have in flight at once: two of the largest."""
        return 2 * self.max_request_bytes


class Refused(Exception):
    """A request answered by the front itself, with this status and message, then closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error_response(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 answer in the API's error shape, closing the connection."""
    body = json.dumps({"error": {"status": status, "message": message, "field": None}}).encode()
    reason = {400: "Bad Request", 408: "Request Timeout", 413: "Content Too Large",
              429: "Too Many Requests", 502: "Bad Gateway", 503: "Service Unavailable"}
    return (f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


class Front:
    """The connections of one front process, and what each client holds."""

    def __init__(self, backend: str, limits: FrontLimits) -> None:
        self.backend, self.limits = backend, limits
        self.open: Counter[str] = Counter()
        self.buffered: Counter[str] = Counter()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client connection, from its first byte to its close."""
        peer = writer.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) else None
        client = address_submitter(address)
        try:
            if sum(self.open.values()) >= self.limits.connections:
                raise Refused(503, f"the service holds {self.limits.connections} connections, "
                                   "its most; try again shortly")
            if self.open[client] >= self.limits.per_client:
                raise Refused(429, f"this client holds {self.limits.per_client} connections "
                                   "to the service, the most one client may; close one first")
            self.open[client] += 1
            try:
                await self._serve(reader, writer, client, address or "")
            finally:
                self.open[client] -= 1
        except Refused as refused:
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                writer.write(error_response(refused.status, str(refused)))
                await asyncio.wait_for(writer.drain(), self.limits.read_timeout_s)
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            pass  # the client went away, or stopped reading its answer
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     client: str, address: str) -> None:
        """The requests of one kept-alive connection, one after another."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        while True:
            asked = await self._request(conn, reader, writer, client)
            if asked is None:
                return
            request, body = asked
            answer = await self._forward(request, body, self._client_of(request, address))
            await self._answer(conn, writer, request, *answer)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    def _client_of(self, request: h11.Request, address: str) -> str:
        """The address gunicorn is told: the trusted proxy's header's last, else the peer's."""
        wanted = self.limits.client_header.lower().encode()
        if wanted:
            for name, value in request.headers:
                if name == wanted and value.strip():
                    return value.decode("latin-1").split(",")[-1].strip()
        return address

    async def _request(self, conn: h11.Connection, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter,
                       client: str) -> tuple[h11.Request, bytes] | None:
        """The next request, whole within the read timeout of its first byte; None when the
        client closed, or stayed idle IDLE_S."""
        event = _event(conn)  # a request the client sent behind the last one, if any
        if event is h11.NEED_DATA:
            try:
                first = await asyncio.wait_for(reader.read(READ_CHUNK), IDLE_S)
            except TimeoutError:
                return None
            if not first:
                return None
            conn.receive_data(first)
        try:
            async with asyncio.timeout(self.limits.read_timeout_s):
                if event is h11.NEED_DATA:
                    event = await _next_event(conn, reader)
                if event is None or isinstance(event, h11.ConnectionClosed):
                    return None
                if not isinstance(event, h11.Request):
                    raise Refused(400, "a malformed request")
                return event, await self._body(conn, reader, writer, event, client)
        except TimeoutError:
            raise Refused(408, f"the request did not arrive within "
                               f"{self.limits.read_timeout_s:g} s of its first byte; the "
                               "connection is closed") from None

    async def _body(self, conn: h11.Connection, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter, request: h11.Request, client: str) -> bytes:
        """The request's body, counted against the size cap and the client's bytes in flight."""
        cap = self.limits.max_request_bytes
        length = dict(request.headers).get(b"content-length")
        if length is not None and int(length) > cap:
            raise Refused(413, f"the request is over the service's cap of {cap} bytes")
        if conn.they_are_waiting_for_100_continue:
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        body = bytearray()
        try:
            while not isinstance(event := await _next_event(conn, reader),
                                 h11.EndOfMessage):
                if not isinstance(event, h11.Data):
                    raise Refused(400, "the request ended before its body")
                body += event.data
                self.buffered[client] += len(event.data)
                if len(body) > cap:
                    raise Refused(413, f"the request is over the service's cap of {cap} bytes")
                if self.buffered[client] > self.limits.per_client_bytes:
                    raise Refused(429, "this client's requests in flight hold more than "
                                       f"{self.limits.per_client_bytes} bytes; send one at a time")
            return bytes(body)
        finally:
            self.buffered[client] -= len(body)

    async def _forward(self, request: h11.Request, body: bytes,
                       client: str) -> tuple[h11.Response, bytes]:
        """gunicorn's whole answer to the request (its own connection, closed after it)."""
        reader, writer = await self._connect()
        backend = h11.Connection(h11.CLIENT)
        headers = [(n, v) for n, v in request.headers if n not in HOP_BY_HOP]
        headers += [(b"content-length", str(len(body)).encode()), (b"connection", b"close"),
                    (FRONT_CLIENT_HEADER.encode(), client.encode())]
        try:
            writer.write(backend.send(h11.Request(method=request.method, target=request.target,
                                                  headers=headers)))
            writer.write(backend.send(h11.Data(data=body)) + backend.send(h11.EndOfMessage()))
            async with asyncio.timeout(RESPONSE_S):
                await writer.drain()
                response = await _next_event(backend, reader)
                while isinstance(response, h11.InformationalResponse):
                    response = await _next_event(backend, reader)
                if not isinstance(response, h11.Response):
                    raise Refused(502, "the API closed the connection without an answer")
                data = bytearray()
                while isinstance(event := await _next_event(backend, reader), h11.Data):
                    data += event.data
            return response, bytes(data)
        except (TimeoutError, OSError, h11.ProtocolError) as exc:
            raise Refused(502, f"the API did not answer: {exc or type(exc).__name__}") from exc
        finally:
            writer.close()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to gunicorn's socket, waiting a little while it (re)starts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + BACKEND_CONNECT_S
        while True:
            try:
                return await asyncio.open_unix_connection(self.backend)
            except (FileNotFoundError, ConnectionRefusedError):
                if loop.time() >= deadline:
                    raise Refused(502, "the API is not answering; try again shortly") from None
                await asyncio.sleep(0.1)

    async def _answer(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                      request: h11.Request, response: h11.Response, body: bytes) -> None:
        """gunicorn's answer, written to the client from memory within RESPONSE_S."""
        # A HEAD's or a bodiless status's length is the backend's (that of the body not sent).
        keep = request.method == b"HEAD" or response.status_code in (204, 304)
        headers = [(n, v) for n, v in response.headers
                   if n not in HOP_BY_HOP or (keep and n == b"content-length")]
        if not keep:
            headers.append((b"content-length", str(len(body)).encode()))
        writer.write(conn.send(h11.Response(status_code=response.status_code, headers=headers,
                                            reason=response.reason)))
        if body and request.method != b"HEAD":
            writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await asyncio.wait_for(writer.drain(), RESPONSE_S)


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> object | None:
    """h11's next event, reading as it needs; None at the peer's close."""
    while (event := _event(conn)) is h11.NEED_DATA:
        conn.receive_data(await reader.read(READ_CHUNK))  # b"" at the close: h11 reads it so
    if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
        return None
    return event


def _event(conn: h11.Connection) -> object:
    """conn.next_event(), a malformed request refused as a 400 (h11's own words)."""
    try:
        return conn.next_event()
    except h11.RemoteProtocolError as exc:
        raise Refused(exc.error_status_hint, f"a malformed request: {exc}") from None


async def serve_front(listener: socket.socket, backend: str, limits: FrontLimits) -> None:
    """Serve the listener until SIGTERM (SIGINT is the parent's: it stops gunicorn first)."""
    front = Front(backend, limits)
    server = await asyncio.start_server(front.handle, sock=listener, limit=READ_CHUNK)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    loop.add_signal_handler(signal.SIGINT, lambda: None)
    async with server:
        await stopped.wait()


def main(argv: list[str] | None = None) -> None:
    """`python -m service.front --fd N --backend PATH ...` (service/server.py starts it)."""
    parser = argparse.ArgumentParser(prog="service.front")
    parser.add_argument("--fd", type=int, required=True, help="the listening socket")
    parser.add_argument("--backend", required=True, help="gunicorn's Unix socket")
    parser.add_argument("--read-timeout", type=float, required=True)
    parser.add_argument("--max-request-bytes", type=int, required=True)
    parser.add_argument("--per-client", type=int, required=True)
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--client-header", default="")
    args = parser.parse_args(argv)
    listener = socket.socket(fileno=args.fd)
    limits = FrontLimits(args.read_timeout, args.max_request_bytes, args.per_client,
                         args.connections, args.client_header)
    asyncio.run(serve_front(listener, args.backend, limits))


if __name__ == "__main__":
    main()
