"""The plugin ABI: its versions (each declared once), the module's shape (markers, exports,
imports) and the msgpack encoding of requests and responses."""

from modelserving.abi.codec import RequestEncoder, Response, decode_response, encode_request
from modelserving.abi.contract import ABI_VERSION, ResponseError
from modelserving.abi.shape import MARKERS
from modelserving.abi.versions import VERSIONS, AbiVersion

__all__ = [
    "ABI_VERSION",
    "MARKERS",
    "VERSIONS",
    "AbiVersion",
    "RequestEncoder",
    "Response",
    "ResponseError",
    "decode_response",
    "encode_request",
]
