//! `ready-reporter`: how long each Pod took to become Ready, as a metric and a log line.
//!
//! The WebAssembly twin of the Python built-in
//! `host/modelserving/plugins/builtins/ready_reporter.py`: both accept the same configs, answer
//! with the same (empty) responses and log byte-identical lines.
//!
//! An OnPodReady plugin that changes nothing. The latency is the Pod's Ready condition's
//! `lastTransitionTime` minus `metadata.creationTimestamp`, in whole milliseconds (a negative
//! difference counts as 0). It is returned as the observation `pod_ready_seconds` (in the
//! response for an ABI v2 host, as the line `observe pod_ready_seconds <s.mmm>` for a v1 one;
//! the host turns it into a metric, see `abi/README.md` section 7.1) and logged as
//! `Pod <pod> (role <role>, entry|worker) became Ready <s.mmm> s after creation`, at info, or at
//! warn past `warnAfterSeconds`. When the latency cannot be measured, a warn line says why and
//! nothing is observed; the hook never fails on a Pod.
//!
//! Config (camelCase, unknown fields refused, nil = absent):
//!
//! * `warnAfterSeconds`: optional int >= 1 (no bool, no float).
//!
//! Timestamps: `YYYY-MM-DDTHH:MM:SS`, an optional fraction `.d+` (milliseconds kept, the rest
//! cut), then `Z` or `+HH:MM` / `-HH:MM`; every field in range, no leap second. The Python
//! twin uses the same grammar.

use modelserving_plugin::config::Fields;
use modelserving_plugin::{export_plugin, log, Kind, Observation, RawValue, Request, Value};

pub const NAME: &str = "ready-reporter";
/// The observation's name.
pub const OBSERVATION: &str = "pod_ready_seconds";
/// Longest part of an unparsable time quoted in a message (characters).
pub const MAX_QUOTED_CHARS: usize = 64;

const DAYS_BEFORE_MONTH: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
const MS_PER_DAY: i64 = 86_400_000;

/// The validated config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub warn_after_seconds: Option<u64>,
}

impl Config {
    /// Validate a plugin config (nil = empty config), as the Python model does: a strict int
    /// (any size msgpack carries), at least 1.
    pub fn parse(config: &Value) -> Result<Config, String> {
        let mut f = Fields::config(config)?;
        let key = "warnAfterSeconds";
        let warn_after_seconds = match f.get(key) {
            None => None,
            Some(Value::Int(i)) if *i >= 1 => Some(*i as u64),
            Some(Value::Int(_)) => {
                return Err(format!("{}: must be at least 1", f.loc_of(key)));
            }
            Some(Value::UInt(u)) => Some(*u),
            Some(other) => {
                return Err(format!(
                    "{}: must be an int, got {}",
                    f.loc_of(key),
                    other.type_name()
                ));
            }
        };
        f.finish()?;
        Ok(Config { warn_after_seconds })
    }
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 0000-01-01 (proleptic Gregorian; year 0 is a leap year) to the date.
fn days_before(year: i64, month: i64, day: i64) -> i64 {
    let leaps = (year + 3) / 4 - (year + 99) / 100 + (year + 399) / 400;
    let days = 365 * year + leaps + DAYS_BEFORE_MONTH[(month - 1) as usize] + day - 1;
    if month > 2 && is_leap(year) {
        days + 1
    } else {
        days
    }
}

/// The number written with `n` ASCII digits at `at`.
fn digits(b: &[u8], at: usize, n: usize) -> Option<i64> {
    let part = b.get(at..at + n)?;
    let mut value = 0i64;
    for &c in part {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i64::from(c - b'0');
    }
    Some(value)
}

fn byte_is(b: &[u8], at: usize, want: u8) -> Option<()> {
    if b.get(at) == Some(&want) {
        Some(())
    } else {
        None
    }
}

/// Milliseconds since 0000-01-01T00:00:00Z of an RFC 3339 time; `None` when `text` is not one
/// (the grammar of the crate documentation, fields in range, no leap second).
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let year = digits(b, 0, 4)?;
    byte_is(b, 4, b'-')?;
    let month = digits(b, 5, 2)?;
    byte_is(b, 7, b'-')?;
    let day = digits(b, 8, 2)?;
    byte_is(b, 10, b'T')?;
    let hour = digits(b, 11, 2)?;
    byte_is(b, 13, b':')?;
    let minute = digits(b, 14, 2)?;
    byte_is(b, 16, b':')?;
    let second = digits(b, 17, 2)?;
    let mut pos = 19;
    let mut millis = 0i64;
    if b.get(pos) == Some(&b'.') {
        pos += 1;
        let start = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            if pos - start < 3 {
                millis = millis * 10 + i64::from(b[pos] - b'0');
            }
            pos += 1;
        }
        if pos == start {
            return None;
        }
        for _ in (pos - start).min(3)..3 {
            millis *= 10;
        }
    }
    let offset_ms = match b.get(pos) {
        Some(b'Z') => {
            pos += 1;
            0
        }
        Some(&sign) if sign == b'+' || sign == b'-' => {
            let off_hour = digits(b, pos + 1, 2)?;
            byte_is(b, pos + 3, b':')?;
            let off_minute = digits(b, pos + 4, 2)?;
            pos += 6;
            if off_hour > 23 || off_minute > 59 {
                return None;
            }
            let ms = (off_hour * 60 + off_minute) * 60_000;
            if sign == b'-' {
                -ms
            } else {
                ms
            }
        }
        _ => return None,
    };
    if pos != b.len() {
        return None;
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let clock = ((hour * 60 + minute) * 60 + second) * 1000 + millis;
    Some(days_before(year, month, day) * MS_PER_DAY + clock - offset_ms)
}

/// Milliseconds as seconds with exactly three decimals: 1500 -> `1.500`.
pub fn format_seconds(ms: i64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// `obj[key]` when `obj` is a map holding it with a non-nil value.
fn field<'a>(obj: Option<RawValue<'a>>, key: &str) -> Option<RawValue<'a>> {
    obj.and_then(|o| o.get(key)).filter(|v| !v.is_nil())
}

fn quoted(text: &str) -> String {
    let cut: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    if text.chars().nth(MAX_QUOTED_CHARS).is_some() {
        format!("'{cut}...'")
    } else {
        format!("'{cut}'")
    }
}

/// The time `value` (the field `what`) in milliseconds, or why not.
fn time_ms(value: Option<RawValue<'_>>, what: &str) -> Result<i64, String> {
    let value = match value {
        None => return Err(format!("{what} is not set")),
        Some(v) => v,
    };
    let text = match value.as_str() {
        None => return Err(format!("{what} is not a string")),
        Some(t) => t,
    };
    parse_rfc3339_ms(text).ok_or_else(|| format!("{what} {} is not an RFC 3339 time", quoted(text)))
}

/// The `lastTransitionTime` of the first Ready=True condition (`None` when it has none), or
/// why there is no such condition.
fn ready_since(pod: RawValue<'_>) -> Result<Option<RawValue<'_>>, String> {
    let conditions = match field(field(Some(pod), "status"), "conditions") {
        None => return Err("status.conditions is not set".to_owned()),
        Some(c) => c,
    };
    if conditions.kind() != Kind::Array {
        return Err("status.conditions is not a list".to_owned());
    }
    for condition in conditions.iter_array() {
        let is = |key: &str, want: &str| {
            field(Some(condition), key).and_then(RawValue::as_str) == Some(want)
        };
        if is("type", "Ready") && is("status", "True") {
            return Ok(field(Some(condition), "lastTransitionTime"));
        }
    }
    Err("it has no Ready condition with status True".to_owned())
}

/// The largest latency measured: a week, the largest observation the host takes.
const MAX_LATENCY_MS: i64 = 7 * 24 * 3600 * 1000;

/// Milliseconds from the Pod's creation to its Ready condition (0 when negative, at most a
/// week), or why it cannot be measured.
pub fn ready_latency_ms(pod: RawValue<'_>) -> Result<i64, String> {
    let created = time_ms(
        field(field(Some(pod), "metadata"), "creationTimestamp"),
        "metadata.creationTimestamp",
    )?;
    let since = ready_since(pod)?;
    let ready = time_ms(since, "the Ready condition's lastTransitionTime")?;
    if ready - created > MAX_LATENCY_MS {
        return Err("it became Ready more than a week (604800 s) after its creation".to_owned());
    }
    Ok((ready - created).max(0))
}

/// Log the line for one Pod and return its observation (None: not measurable).
pub fn report(config: &Config, req: &Request) -> Option<Observation> {
    let pod = req.pod();
    let pod_name = field(field(Some(pod), "metadata"), "name")
        .and_then(RawValue::as_str)
        .unwrap_or("");
    let latency = match ready_latency_ms(pod) {
        Ok(ms) => ms,
        Err(why) => {
            log::warn(format!("cannot measure readiness of Pod {pod_name}: {why}"));
            return None;
        }
    };
    let seconds = format_seconds(latency);
    let kind = if req.is_entry { "entry" } else { "worker" };
    let message = format!(
        "Pod {pod_name} (role {}, {kind}) became Ready {seconds} s after creation",
        req.role_name
    );
    let late = config
        .warn_after_seconds
        .map_or(false, |w| latency as u128 > u128::from(w) * 1000);
    if late {
        log::warn(message);
    } else {
        log::info(message);
    }
    Some(Observation::new(OBSERVATION, latency as f64 / 1000.0))
}

pub fn on_pod_ready(req: &Request) -> Result<Vec<Observation>, String> {
    let config = Config::parse(&req.config)?;
    Ok(report(&config, req).into_iter().collect())
}

pub fn validate_config(req: &Request) -> Result<(), String> {
    Config::parse(&req.config).map(|_| ())
}

export_plugin! {
    on_pod_ready: on_pod_ready,
    validate_config: validate_config,
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelserving_plugin::log::{take_logs, Level};
    use modelserving_plugin::{Hook, Response};

    fn parse(config: Value) -> Result<Config, String> {
        Config::parse(&config)
    }

    #[test]
    fn accepts_what_the_python_model_accepts() {
        assert_eq!(parse(Value::Nil).unwrap(), Config::default());
        assert_eq!(
            parse(Value::map([("warnAfterSeconds", Value::Nil)])).unwrap(),
            Config::default()
        );
        assert_eq!(
            parse(Value::map([("warnAfterSeconds", 30)]))
                .unwrap()
                .warn_after_seconds,
            Some(30)
        );
        assert_eq!(
            parse(Value::map([("warn_after_seconds", 1)]))
                .unwrap()
                .warn_after_seconds,
            Some(1)
        );
        assert_eq!(
            parse(Value::map([("warnAfterSeconds", Value::UInt(u64::MAX))]))
                .unwrap()
                .warn_after_seconds,
            Some(u64::MAX)
        );
    }

    #[test]
    fn refuses_what_the_python_model_refuses() {
        for (config, why) in [
            (Value::from("x"), "config: must be a map, got str"),
            (
                Value::map([("warnAfterSeconds", 0)]),
                "config.warnAfterSeconds: must be at least 1",
            ),
            (
                Value::map([("warnAfterSeconds", Value::Int(i64::MIN))]),
                "config.warnAfterSeconds: must be at least 1",
            ),
            (
                Value::map([("warnAfterSeconds", Value::Bool(true))]),
                "config.warnAfterSeconds: must be an int, got bool",
            ),
            (
                Value::map([("warnAfterSeconds", Value::Float(3.0))]),
                "config.warnAfterSeconds: must be an int, got float",
            ),
            (
                Value::map([("warnAfterSeconds", "3")]),
                "config.warnAfterSeconds: must be an int, got str",
            ),
            (Value::map([("other", 1)]), "config.other: unknown field"),
            (
                Value::map([("warnAfterSeconds", 1), ("warn_after_seconds", 2)]),
                "config.warn_after_seconds: unknown field",
            ),
        ] {
            assert_eq!(parse(config.clone()).unwrap_err(), why, "{config}");
        }
    }

    #[test]
    fn parses_rfc3339_times() {
        let t = |s: &str| parse_rfc3339_ms(s);
        assert_eq!(t("0000-01-01T00:00:00Z"), Some(0));
        assert_eq!(t("0000-01-02T00:00:00Z"), Some(MS_PER_DAY));
        assert_eq!(
            t("0000-03-01T00:00:00Z"),
            Some(60 * MS_PER_DAY),
            "year 0 is leap"
        );
        assert_eq!(t("0001-01-01T00:00:00Z"), Some(366 * MS_PER_DAY));
        let base = t("2024-02-28T23:59:59Z").unwrap();
        assert_eq!(t("2024-02-29T00:00:00Z"), Some(base + 1000));
        assert_eq!(t("2024-03-01T00:00:00Z"), Some(base + 1000 + MS_PER_DAY));
        assert_eq!(t("2024-02-28T23:59:59.5Z"), Some(base + 500));
        assert_eq!(t("2024-02-28T23:59:59.123999Z"), Some(base + 123));
        assert_eq!(t("2024-02-28T23:59:59.07Z"), Some(base + 70));
        assert_eq!(t("2024-02-29T01:30:00+01:30"), Some(base + 1000));
        assert_eq!(t("2024-02-28T22:29:59-01:30"), Some(base));
        assert_eq!(t("2024-02-28T23:59:59-00:00"), Some(base));
        // 1970-01-01 is 719528 days after 0000-01-01.
        assert_eq!(t("1970-01-01T00:00:00Z"), Some(719_528 * MS_PER_DAY));
        for bad in [
            "",
            "2024-02-28",
            "2024-02-28T23:59:59",
            "2024-02-28t23:59:59Z",
            "2024-02-28T23:59:59z",
            "2024-02-28 23:59:59Z",
            "2024-02-28T23:59:59.Z",
            "2024-02-28T23:59:59,5Z",
            "2024-02-28T23:59:59Z ",
            " 2024-02-28T23:59:59Z",
            "2024-02-28T23:59:59+0100",
            "2024-02-28T23:59:59+01",
            "2024-02-28T23:59:59+24:00",
            "2024-02-28T23:59:59+01:60",
            "2023-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-00-01T00:00:00Z",
            "2024-04-31T00:00:00Z",
            "2024-01-00T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01T00:00:60Z",
            "24-01-01T00:00:00Z",
            "+2024-01-01T00:00:00Z",
            "2024-1-01T00:00:00Z",
            "２024-01-01T00:00:00Z",
        ] {
            assert_eq!(t(bad), None, "{bad:?}");
        }
        assert!(t("2000-02-29T00:00:00Z").is_some());
    }

    #[test]
    fn formats_seconds_with_three_decimals() {
        assert_eq!(format_seconds(0), "0.000");
        assert_eq!(format_seconds(7), "0.007");
        assert_eq!(format_seconds(1500), "1.500");
        assert_eq!(format_seconds(61_042), "61.042");
    }

    fn request(config: Value, pod: Value, is_entry: bool) -> Vec<u8> {
        let place = builtins_kit::testing::Place {
            serving_group: "llm-0",
            role_name: "prefill",
            role_id: "prefill-0",
            is_entry,
            ..Default::default()
        };
        builtins_kit::testing::request("OnPodReady", NAME, config, &place, pod)
    }

    fn pod(created: Value, conditions: Value) -> Value {
        Value::map([
            (
                "metadata",
                Value::map([
                    ("name", Value::from("llm-0-prefill-0-0")),
                    ("creationTimestamp", created),
                ]),
            ),
            ("status", Value::map([("conditions", conditions)])),
        ])
    }

    fn ready(at: &str) -> Value {
        Value::map([
            ("type", Value::from("Ready")),
            ("status", Value::from("True")),
            ("lastTransitionTime", Value::from(at)),
        ])
    }

    fn call(config: Value, pod: Value, is_entry: bool) -> (Vec<u8>, Vec<(Level, String)>) {
        let _ = take_logs();
        let out = modelserving_call(Hook::OnPodReady, &request(config, pod, is_entry)).unwrap();
        (out, take_logs())
    }

    #[test]
    fn measures_and_logs() {
        let conditions = Value::array([
            Value::map([("type", "Initialized"), ("status", "True")]),
            ready("2025-03-01T10:01:01.2509+01:00"),
        ]);
        let p = pod(Value::from("2025-03-01T09:00:00Z"), conditions);
        let (out, logs) = call(Value::Nil, p.clone(), true);
        assert!(out.is_empty());
        // A v1 request: the observation is an `observe` line, after the Pod's line.
        assert_eq!(
            logs,
            vec![
                (
                    Level::Info,
                    "Pod llm-0-prefill-0-0 (role prefill, entry) became Ready 61.250 s after creation"
                        .to_owned()
                ),
                (Level::Info, "observe pod_ready_seconds 61.250".to_owned()),
            ]
        );
        let (_, logs) = call(Value::map([("warnAfterSeconds", 61)]), p.clone(), false);
        assert_eq!(logs[0].0, Level::Warn);
        assert!(logs[0].1.contains("(role prefill, worker)"), "{logs:?}");
        let (_, logs) = call(Value::map([("warnAfterSeconds", 62)]), p, false);
        assert_eq!(logs[0].0, Level::Info);
    }

    #[test]
    fn a_v2_request_gets_the_observation_in_the_response() {
        let conditions = Value::array([ready("2025-03-01T10:01:01.2509+01:00")]);
        let p = pod(Value::from("2025-03-01T09:00:00Z"), conditions);
        let mut bytes = request(Value::Nil, p, true);
        let v1 = Request::decode(&bytes).unwrap().to_msgpack();
        assert_eq!(v1, bytes);
        let mut req = Request::decode(&v1).unwrap();
        req.abi_version = 2;
        bytes = req.to_msgpack();
        let _ = take_logs();
        let out = modelserving_call(Hook::OnPodReady, &bytes).unwrap();
        let logs = take_logs();
        let response = modelserving_plugin::Response::decode(&out).unwrap();
        assert_eq!(response.observations, vec![("pod_ready_seconds".to_owned(), 61.25)]);
        assert_eq!(logs.len(), 1, "{logs:?}"); // the Pod's line only
    }

    #[test]
    fn negative_latency_counts_as_zero() {
        let p = pod(
            Value::from("2025-03-01T09:00:00Z"),
            Value::array([ready("2025-03-01T08:59:00Z")]),
        );
        let (_, logs) = call(Value::Nil, p, true);
        assert_eq!(logs[1].1, "observe pod_ready_seconds 0.000");
    }

    #[test]
    fn says_why_it_cannot_measure_and_never_fails() {
        let ok = Value::from("2025-03-01T09:00:00Z");
        let long = "x".repeat(70);
        let long_why = format!(
            "the Ready condition's lastTransitionTime '{}...' is not an RFC 3339 time",
            "x".repeat(64)
        );
        for (p, why) in [
            (
                pod(Value::Nil, Value::array([ready("2025-03-01T09:00:00Z")])),
                "metadata.creationTimestamp is not set",
            ),
            (
                pod(Value::Int(5), Value::Array(vec![])),
                "metadata.creationTimestamp is not a string",
            ),
            (
                pod(Value::from("yesterday"), Value::Array(vec![])),
                "metadata.creationTimestamp 'yesterday' is not an RFC 3339 time",
            ),
            (pod(ok.clone(), Value::Nil), "status.conditions is not set"),
            (
                pod(ok.clone(), Value::from("x")),
                "status.conditions is not a list",
            ),
            (
                pod(
                    ok.clone(),
                    Value::array([
                        Value::from("Ready"),
                        Value::map([("type", "Ready"), ("status", "False")]),
                        Value::map([
                            ("type", Value::from("Ready")),
                            ("status", Value::Bool(true)),
                        ]),
                    ]),
                ),
                "it has no Ready condition with status True",
            ),
            (
                pod(
                    ok.clone(),
                    Value::array([Value::map([("type", "Ready"), ("status", "True")])]),
                ),
                "the Ready condition's lastTransitionTime is not set",
            ),
            (
                pod(ok.clone(), Value::array([ready(&long)])),
                long_why.as_str(),
            ),
            (
                Value::map([("metadata", Value::map([("name", "p")]))]),
                "metadata.creationTimestamp is not set",
            ),
        ] {
            let (out, logs) = call(Value::Nil, p.clone(), true);
            assert!(out.is_empty(), "{p}");
            assert_eq!(logs.len(), 1, "{p}: {logs:?}");
            assert_eq!(logs[0].0, Level::Warn);
            assert!(
                logs[0].1.starts_with("cannot measure readiness of Pod "),
                "{logs:?}"
            );
            assert!(logs[0].1.ends_with(why), "{logs:?} lacks {why:?}");
        }
    }

    #[test]
    fn exports_through_the_abi_glue() {
        let validate = |config: Value| {
            let bytes = builtins_kit::testing::request(
                "ValidateConfig",
                NAME,
                config,
                &Default::default(),
                Value::Nil,
            );
            modelserving_call(Hook::ValidateConfig, &bytes).unwrap()
        };
        assert!(validate(Value::Nil).is_empty());
        assert_eq!(
            Response::decode(&validate(Value::map([("warnAfterSeconds", 0)])))
                .unwrap()
                .error
                .as_deref(),
            Some("config.warnAfterSeconds: must be at least 1")
        );
        assert!(modelserving_call(Hook::OnPodCreate, &[]).is_none());
    }
}
