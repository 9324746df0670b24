//! Hook responses: `{"patch": [...]}`, `{"observations": [...]}` (ABI v2),
//! `{"objects": [...]}` (ABI v3), `{"error": "..."}` or nothing at all.

use crate::group::Object;
use crate::msgpack::{encode_into, write_array_len, write_map_len, write_str};
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

/// One measurement of an OnPodReady hook: a name (matching `[a-z][a-z0-9_]{0,62}` and ending in
/// `_seconds`) and a number of seconds (finite, 0 to 604800). The host checks both: a broken
/// observation fails the call (`InvalidResponse`).
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub name: String,
    pub seconds: f64,
}

impl Observation {
    pub fn new(name: impl Into<String>, seconds: f64) -> Observation {
        Observation {
            name: name.into(),
            seconds,
        }
    }
}

/// The response to a successful OnPodReady of ABI `version`: empty when there are no
/// observations; under v2 `{"observations": [{"name": ..., "seconds": ...}, ...]}`; under v1
/// (a host that knows no `observations` key) the empty response, each observation written as
/// the info line `observe <name> <seconds>` instead.
pub fn observations_response(observations: &[Observation], version: i64) -> Vec<u8> {
    if observations.is_empty() {
        return Vec::new();
    }
    if version < 2 {
        for o in observations {
            crate::log::info(format!("observe {} {:.3}", o.name, o.seconds));
        }
        return Vec::new();
    }
    let mut out = Vec::with_capacity(16 + 40 * observations.len());
    write_map_len(1, &mut out);
    write_str("observations", &mut out);
    write_array_len(observations.len(), &mut out);
    for o in observations {
        write_map_len(2, &mut out);
        write_str("name", &mut out);
        write_str(&o.name, &mut out);
        write_str("seconds", &mut out);
        encode_into(&Value::Float(o.seconds), &mut out);
    }
    out
}

/// The response to a successful OnServingGroupChange: empty when there are no objects (the
/// host then deletes those the plugin owned in the group), otherwise `{"objects": [...]}`.
pub fn objects_response(objects: &[Object]) -> Vec<u8> {
    if objects.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(16 + 128 * objects.len());
    write_map_len(1, &mut out);
    write_str("objects", &mut out);
    write_array_len(objects.len(), &mut out);
    for object in objects {
        object.encode_into(&mut out);
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
    /// The observations (ABI v2), as `(name, seconds)`.
    pub observations: Vec<(String, f64)>,
    /// The owned objects (ABI v3) as maps (empty when none).
    pub objects: Vec<Value>,
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
                ("objects", Value::Array(objects)) => r.objects = objects,
                ("error", Value::Str(s)) => r.error = Some(s),
                ("observations", Value::Array(items)) => {
                    for item in items {
                        let name = item.get("name").and_then(Value::as_str).map(str::to_owned);
                        let seconds = item.get("seconds").and_then(Value::as_f64);
                        match (name, seconds) {
                            (Some(n), Some(s)) => r.observations.push((n, s)),
                            _ => return Err("response: observations: {name, seconds} expected".into()),
                        }
                    }
                }
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

    #[test]
    fn observations_v2_in_the_response() {
        let obs = [Observation::new("pod_ready_seconds", 61.25), Observation::new("a_seconds", 2.0)];
        let r = Response::decode(&observations_response(&obs, 2)).unwrap();
        assert_eq!(
            r.observations,
            vec![("pod_ready_seconds".to_owned(), 61.25), ("a_seconds".to_owned(), 2.0)]
        );
        assert!(observations_response(&[], 2).is_empty());
    }

    #[test]
    fn observations_v1_as_log_lines() {
        crate::log::take_logs();
        let obs = [Observation::new("pod_ready_seconds", 61.25)];
        assert!(observations_response(&obs, 1).is_empty());
        let lines: Vec<String> = crate::log::take_logs().into_iter().map(|(_, l)| l).collect();
        assert_eq!(lines, vec!["observe pod_ready_seconds 61.250".to_owned()]);
    }
}
