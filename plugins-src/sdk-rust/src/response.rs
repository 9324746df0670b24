//! Hook responses: `{"patch": [...]}`, `{"error": "..."}` or nothing at all.

use crate::msgpack::{write_array_len, write_map_len, write_str};
use crate::patch::Op;
use crate::value::Value;

/// The message used when a plugin fails with an empty one (an empty `error` would mean
/// success to nobody).
pub const EMPTY_ERROR: &str = "plugin failed without a message";

/// The response to a successful OnPodCreate: empty (no change) when `ops` is empty, otherwise
/// `{"patch": [ops...]}`.
pub fn patch_response(ops: &[Op]) -> Vec<u8> {
    if ops.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(64 * ops.len());
    write_map_len(1, &mut out);
    write_str("patch", &mut out);
    write_array_len(ops.len(), &mut out);
    for op in ops {
        op.encode_into(&mut out);
    }
    out
}

/// The response of a failed hook or an invalid config: `{"error": message}`.
pub fn error_response(message: &str) -> Vec<u8> {
    let message = if message.is_empty() {
        EMPTY_ERROR
    } else {
        message
    };
    let mut out = Vec::with_capacity(8 + message.len());
    write_map_len(1, &mut out);
    write_str("error", &mut out);
    write_str(message, &mut out);
    out
}

/// A decoded response, for tests of plugins (the host has its own, stricter decoder).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Response {
    /// The patch operations as maps (empty when none).
    pub patch: Vec<Value>,
    pub error: Option<String>,
}

impl Response {
    /// Decode response bytes; empty bytes are the empty response.
    pub fn decode(bytes: &[u8]) -> Result<Response, String> {
        let mut r = Response::default();
        if bytes.is_empty() {
            return Ok(r);
        }
        let v = crate::msgpack::decode(bytes).map_err(|e| format!("response: {e}"))?;
        let entries = match v {
            Value::Map(m) => m,
            other => {
                return Err(format!(
                    "response: must be a map, got {}",
                    other.type_name()
                ))
            }
        };
        for (k, v) in entries {
            match (k.as_str(), v) {
                ("patch", Value::Array(ops)) => r.patch = ops,
                ("error", Value::Str(s)) => r.error = Some(s),
                (k, v) => return Err(format!("response: unexpected '{k}' ({})", v.type_name())),
            }
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert!(patch_response(&[]).is_empty());
        // msgpack.packb({"patch": [{"op": "remove", "path": "/a"}]}, use_bin_type=True).hex()
        let want = "81a5706174636891".to_owned() + "82a26f70a672656d6f7665a470617468a22f61";
        let got: String = patch_response(&[Op::remove("/a")])
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, want);
        let r = Response::decode(&error_response("")).unwrap();
        assert_eq!(r.error.as_deref(), Some(EMPTY_ERROR));
        let r = Response::decode(&patch_response(&[Op::add("/x", 1)])).unwrap();
        assert_eq!(r.patch, vec![Op::add("/x", 1).to_value()]);
        assert!(Response::decode(&Value::map([("other", 1)]).to_msgpack()).is_err());
    }
}
