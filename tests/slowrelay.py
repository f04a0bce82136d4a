#!/usr/bin/env python3
"""slowrelay: a TCP relay to PostgreSQL's unix socket that holds every byte
DELAY_MS in each direction, in order: the server as the daemon sees it when
it is far away or starved (every round trip 2 x DELAY_MS longer), for
tests/flood.test.

    slowrelay.py PORTFILE UNIX-SOCKET DELAY_MS

Listens on 127.0.0.1 (a free port, written to PORTFILE once listening).
SIGTERM exits.
"""
import asyncio
import socket
import sys
import time


async def pipe(reader, writer, delay):
    """Copy reader to writer, each chunk sent DELAY after it was read."""
    q = asyncio.Queue()

    async def feed():
        while True:
            try:
                data = await reader.read(65536)
            except OSError:
                data = b""
            await q.put((time.monotonic() + delay, data))
            if not data:
                return

    async def drain():
        while True:
            due, data = await q.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.close()
                return
            try:
                writer.write(data)
                await writer.drain()
            except OSError:
                return

    await asyncio.gather(feed(), drain())


async def main():
    portfile, target, delay = sys.argv[1], sys.argv[2], float(sys.argv[3]) / 1000

    async def serve(cr, cw):
        try:
            sr, sw = await asyncio.open_unix_connection(target)
        except OSError:
            cw.close()
            return
        sock = cw.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(pipe(cr, sw, delay), pipe(sr, cw, delay))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(portfile + ".tmp", "w") as f:
        f.write(f"{port}\n")
    import os
    os.rename(portfile + ".tmp", portfile)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: slowrelay.py PORTFILE UNIX-SOCKET DELAY_MS")
    asyncio.run(main())
