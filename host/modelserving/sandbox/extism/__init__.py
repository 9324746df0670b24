"""The Extism runtime: a module that imports ``extism:host/env``, called in a worker process
(``call`` is the controller's side, ``worker`` the process, which imports Extism itself)."""
