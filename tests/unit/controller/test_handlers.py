"""Closing kopf's event loop: no connection is left for a finalizer to close."""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings

from modelserving.controller.handlers import _close_loop


def test_a_connection_left_open_is_closed_with_the_loop() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    loop = asyncio.new_event_loop()
    try:

        async def leave_open() -> asyncio.StreamWriter:
            # A connection nobody closes: what a cancelled watch can leave behind.
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            return writer

        writer = loop.run_until_complete(leave_open())
        peer, _ = server.accept()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _close_loop(loop)
            del writer
            gc.collect()
        assert loop.is_closed()
        assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
        peer.settimeout(5)
        assert peer.recv(1) == b""  # the other end sees the connection closed
        peer.close()
    finally:
        server.close()
