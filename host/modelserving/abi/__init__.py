"""The plugin ABI: names of the module contract, and msgpack encoding of requests and responses."""

from modelserving.abi.codec import RequestEncoder, Response, decode_response, encode_request
from modelserving.abi.contract import (
    ABI_VERSION,
    HOOK_EXPORTS,
    MARKERS,
    ResponseError,
)

__all__ = [
    "ABI_VERSION",
    "HOOK_EXPORTS",
    "MARKERS",
    "RequestEncoder",
    "Response",
    "ResponseError",
    "decode_response",
    "encode_request",
]
