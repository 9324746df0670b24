//! Replays the shared ABI test vectors (`abi/vectors/*.json` at the top of the repository, or
//! the directory in `MODELSERVING_ABI_VECTORS`) against this plugin, natively: each vector's
//! request goes through exactly the code the module's export runs, and the response bytes must
//! be the expected ones (or an `{"error": ...}` response where the host expects the failure
//! class PluginError). Vectors of other plugins are skipped.
//!
//! A vector: `{"name", "description", "plugin", "hook", "request": <base64 msgpack>,
//! "expect": {"response": <base64 msgpack; "" = empty>} | {"failure": <class>}}`.

use std::path::{Path, PathBuf};

use demo_pod_tweaks::{modelserving_call, NAME};
use modelserving_plugin::{Hook, Response};

const DIR_ENV: &str = "MODELSERVING_ABI_VECTORS";

#[test]
fn abi_vectors() {
    let (dir, explicit) = match std::env::var_os(DIR_ENV) {
        Some(d) => (PathBuf::from(d), true),
        None => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../abi/vectors"),
            false,
        ),
    };
    if !dir.is_dir() {
        assert!(!explicit, "{DIR_ENV}={} is not a directory", dir.display());
        eprintln!("abi_vectors: no {} yet; nothing to replay", dir.display());
        return;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().map_or(false, |x| x == "json"))
        .collect();
    files.sort();

    let (mut checked, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for path in &files {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let vector = json::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let label = format!(
            "{} ({})",
            path.file_name().unwrap().to_string_lossy(),
            vector.str("name")
        );
        if vector.str("plugin") != NAME {
            skipped += 1;
            continue;
        }
        match run(&vector) {
            Outcome::Pass => checked += 1,
            Outcome::Skip(why) => {
                eprintln!("abi_vectors: skipping {label}: {why}");
                skipped += 1;
            }
            Outcome::Fail(why) => failures.push(format!("{label}: {why}")),
        }
    }
    eprintln!(
        "abi_vectors: {} files in {}: {checked} passed, {skipped} skipped, {} failed",
        files.len(),
        dir.display(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} vector(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

enum Outcome {
    Pass,
    Skip(String),
    Fail(String),
}

fn run(vector: &json::Json) -> Outcome {
    let hook_name = vector.str("hook");
    let hook = match Hook::from_name(hook_name) {
        Some(h) => h,
        None => return Outcome::Fail(format!("unknown hook {hook_name:?}")),
    };
    let request = match base64::decode(vector.str("request")) {
        Ok(r) => r,
        Err(e) => return Outcome::Fail(format!("request: {e}")),
    };
    let expect = vector.get("expect");
    let got = modelserving_call(hook, &request);
    if let Some(want) = expect.get_opt("response") {
        let want = match base64::decode(want.as_str()) {
            Ok(w) => w,
            Err(e) => return Outcome::Fail(format!("expect.response: {e}")),
        };
        return match got {
            None => Outcome::Fail(format!("the plugin does not export {}", hook.export_name())),
            Some(got) if got == want => Outcome::Pass,
            Some(got) => Outcome::Fail(format!(
                "response differs\n  want {} = {:?}\n  got  {} = {:?}",
                hex(&want),
                Response::decode(&want),
                hex(&got),
                Response::decode(&got)
            )),
        };
    }
    let class = expect.str("failure");
    if class != "PluginError" {
        return Outcome::Skip(format!("failure class {class} is the host's to produce"));
    }
    match got.map(|g| Response::decode(&g)) {
        Some(Ok(Response { error: Some(e), .. })) if !e.is_empty() => Outcome::Pass,
        other => Outcome::Fail(format!(
            "expected an error response (PluginError), got {other:?}"
        )),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Standard base64 (RFC 4648, with or without padding).
mod base64 {
    pub fn decode(text: &str) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(text.len() * 3 / 4);
        let (mut acc, mut bits) = (0u32, 0u32);
        let body = text.trim_end_matches('=');
        for c in body.bytes() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return Err(format!("invalid base64 character {:?}", c as char)),
            };
            acc = (acc << 6) | u32::from(v);
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
                acc &= (1 << bits) - 1;
            }
        }
        if bits >= 6 {
            return Err("truncated base64".to_owned());
        }
        Ok(out)
    }

    #[test]
    fn decodes() {
        assert_eq!(decode("").unwrap(), b"");
        assert_eq!(decode("Zg==").unwrap(), b"f");
        assert_eq!(decode("Zm8=").unwrap(), b"fo");
        assert_eq!(decode("Zm9v").unwrap(), b"foo");
        assert_eq!(decode("+/8A").unwrap(), [0xfb, 0xff, 0x00]);
        assert!(decode("Z").is_err());
        assert!(decode("Zm9v!").is_err());
    }
}

/// Just enough JSON to read the vector files.
mod json {
    #[derive(Debug, PartialEq)]
    pub enum Json {
        Null,
        Bool(bool),
        Num(f64),
        Str(String),
        Arr(Vec<Json>),
        Obj(Vec<(String, Json)>),
    }

    static NULL: Json = Json::Null;

    impl Json {
        pub fn get_opt(&self, key: &str) -> Option<&Json> {
            match self {
                Json::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                _ => None,
            }
        }

        pub fn get(&self, key: &str) -> &Json {
            self.get_opt(key).unwrap_or(&NULL)
        }

        pub fn as_str(&self) -> &str {
            match self {
                Json::Str(s) => s,
                _ => "",
            }
        }

        /// The string at `key`, "" when absent or not a string.
        pub fn str(&self, key: &str) -> &str {
            self.get(key).as_str()
        }
    }

    pub fn parse(text: &str) -> Result<Json, String> {
        let mut p = Parser {
            b: text.as_bytes(),
            i: 0,
        };
        let v = p.value(0)?;
        p.ws();
        if p.i != p.b.len() {
            return Err(p.err("trailing characters"));
        }
        Ok(v)
    }

    struct Parser<'a> {
        b: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn err(&self, what: &str) -> String {
            format!("JSON: {what} at byte {}", self.i)
        }

        fn ws(&mut self) {
            while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            }
        }

        fn eat(&mut self, lit: &str) -> Result<(), String> {
            if self.b[self.i..].starts_with(lit.as_bytes()) {
                self.i += lit.len();
                Ok(())
            } else {
                Err(self.err(&format!("expected {lit}")))
            }
        }

        fn value(&mut self, depth: usize) -> Result<Json, String> {
            if depth > 200 {
                return Err(self.err("nested too deep"));
            }
            self.ws();
            match self.b.get(self.i) {
                None => Err(self.err("unexpected end")),
                Some(b'n') => self.eat("null").map(|_| Json::Null),
                Some(b't') => self.eat("true").map(|_| Json::Bool(true)),
                Some(b'f') => self.eat("false").map(|_| Json::Bool(false)),
                Some(b'"') => self.string().map(Json::Str),
                Some(b'[') => {
                    self.i += 1;
                    let mut items = Vec::new();
                    self.ws();
                    if self.b.get(self.i) == Some(&b']') {
                        self.i += 1;
                        return Ok(Json::Arr(items));
                    }
                    loop {
                        items.push(self.value(depth + 1)?);
                        self.ws();
                        match self.b.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                return Ok(Json::Arr(items));
                            }
                            _ => return Err(self.err("expected , or ]")),
                        }
                    }
                }
                Some(b'{') => {
                    self.i += 1;
                    let mut entries = Vec::new();
                    self.ws();
                    if self.b.get(self.i) == Some(&b'}') {
                        self.i += 1;
                        return Ok(Json::Obj(entries));
                    }
                    loop {
                        self.ws();
                        if self.b.get(self.i) != Some(&b'"') {
                            return Err(self.err("expected a key"));
                        }
                        let k = self.string()?;
                        self.ws();
                        self.eat(":")?;
                        let v = self.value(depth + 1)?;
                        entries.push((k, v));
                        self.ws();
                        match self.b.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                return Ok(Json::Obj(entries));
                            }
                            _ => return Err(self.err("expected , or }")),
                        }
                    }
                }
                Some(_) => self.number(),
            }
        }

        fn number(&mut self) -> Result<Json, String> {
            let start = self.i;
            while self.i < self.b.len()
                && matches!(
                    self.b[self.i],
                    b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                )
            {
                self.i += 1;
            }
            let s =
                std::str::from_utf8(&self.b[start..self.i]).map_err(|_| self.err("bad number"))?;
            s.parse::<f64>()
                .map(Json::Num)
                .map_err(|_| self.err("bad number"))
        }

        fn hex4(&mut self) -> Result<u32, String> {
            let s = self
                .b
                .get(self.i..self.i + 4)
                .ok_or_else(|| self.err("truncated \\u escape"))?;
            let s = std::str::from_utf8(s).map_err(|_| self.err("bad \\u escape"))?;
            let v = u32::from_str_radix(s, 16).map_err(|_| self.err("bad \\u escape"))?;
            self.i += 4;
            Ok(v)
        }

        fn string(&mut self) -> Result<String, String> {
            self.i += 1; // opening quote
            let mut out = String::new();
            loop {
                let start = self.i;
                while self.i < self.b.len() && !matches!(self.b[self.i], b'"' | b'\\') {
                    self.i += 1;
                }
                out.push_str(
                    std::str::from_utf8(&self.b[start..self.i])
                        .map_err(|_| self.err("bad UTF-8"))?,
                );
                match self.b.get(self.i) {
                    None => return Err(self.err("unterminated string")),
                    Some(b'"') => {
                        self.i += 1;
                        return Ok(out);
                    }
                    _ => {}
                }
                self.i += 1; // backslash
                let c = *self
                    .b
                    .get(self.i)
                    .ok_or_else(|| self.err("unterminated escape"))?;
                self.i += 1;
                match c {
                    b'"' => out.push('"'),
                    b'\\' => out.push('\\'),
                    b'/' => out.push('/'),
                    b'b' => out.push('\u{8}'),
                    b'f' => out.push('\u{c}'),
                    b'n' => out.push('\n'),
                    b'r' => out.push('\r'),
                    b't' => out.push('\t'),
                    b'u' => {
                        let mut cp = self.hex4()?;
                        if (0xd800..0xdc00).contains(&cp) && self.b[self.i..].starts_with(b"\\u") {
                            self.i += 2;
                            let low = self.hex4()?;
                            cp = 0x10000
                                + ((cp - 0xd800) << 10)
                                + (low.wrapping_sub(0xdc00) & 0x3ff);
                        }
                        out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                    }
                    _ => return Err(self.err("bad escape")),
                }
            }
        }
    }

    #[test]
    fn parses() {
        let v = parse(
            r#" {"a": [1, -2.5e1, true, false, null], "b": "x\"\u00e9\ud83d\ude00\n", "c": {}} "#,
        )
        .unwrap();
        assert_eq!(
            v.get("a"),
            &Json::Arr(vec![
                Json::Num(1.0),
                Json::Num(-25.0),
                Json::Bool(true),
                Json::Bool(false),
                Json::Null
            ])
        );
        assert_eq!(v.str("b"), "x\"é😀\n");
        assert_eq!(v.get("c"), &Json::Obj(vec![]));
        assert!(parse("{").is_err());
        assert!(parse("[1,]").is_err());
        assert!(parse("1 2").is_err());
    }
}
