"""The plugin ABI: msgpack encoding of hook requests and responses, version checks."""
