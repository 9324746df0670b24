"""Stopping the controller's HTTP servers releases their listening sockets."""

from __future__ import annotations

import threading

from modelserving.controller.manager import Controller, Health


def test_stopping_the_health_server_closes_its_socket() -> None:
    leading = threading.Event()
    server = Health(leading).serve(0, "127.0.0.1")
    assert server.socket.fileno() != -1
    Controller._close([server])
    assert server.socket.fileno() == -1
