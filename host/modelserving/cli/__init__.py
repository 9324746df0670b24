"""The ``modelserving`` command line."""
