//! JSON as the host's Python reads and writes it, for built-ins that parse JSON out of Pods
//! (`hccl-ranktable`'s device annotation) and write JSON files into ConfigMaps.
//!
//! [`parse`] accepts exactly what CPython's `json.loads(text, parse_constant=<refuse>,
//! object_pairs_hook=<refuse repeated keys>)` accepts (the C scanner, `strict=True`):
//!
//! * whitespace is ` `, `\t`, `\n` and `\r`, around values and tokens; nothing may follow the
//!   value; a byte-order mark is an error;
//! * `NaN`, `Infinity` and `-Infinity` are errors (the refusing `parse_constant`);
//! * numbers: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; an integer (no fraction, no
//!   exponent) of more than 4300 digits is an error (Python's `int` limit,
//!   `sys.int_info.default_max_str_digits`); floats never are (`1e999` is infinity);
//! * strings: a raw character below U+0020 is an error; escapes are `\" \\ \/ \b \f \n \r \t`
//!   and `\uXXXX` (hex in either case), a high surrogate followed by `\u` and a low one is one
//!   character, any other surrogate stays alone (so strings are kept as code points in
//!   generalized UTF-8, where a lone surrogate is not valid UTF-8: [`JsonStr::as_str`] is
//!   `None` for it);
//! * a key repeated in one object is an error (the refusing `object_pairs_hook`; keys compare
//!   as code points, so `"\u00e9"` and `"é"` are the same key);
//! * nesting deeper than [`MAX_DEPTH`] containers is an error, the bound
//!   `hccl_ranktable.MAX_NESTING` puts on the Python side before `json.loads` (whose own only
//!   limit, the interpreter's recursion limit, depends on the caller's stack).
//!
//! The parser is iterative (no recursion: a module's stack is 64 KiB) and keeps what it reads
//! in a [`Json`] tree, whose strings borrow from the text unless they hold escapes.
//! [`write_str`] writes a string as Python's `json.dumps` does with its default
//! `ensure_ascii=True`.

use std::borrow::Cow;

/// Most containers nested in one another that [`parse`] accepts (see the module
/// documentation).
pub const MAX_DEPTH: usize = 32;

/// Most digits of an integer (Python's default `int` conversion limit).
pub const MAX_INT_DIGITS: usize = 4300;

/// A string as code points in generalized UTF-8: UTF-8, except that a lone surrogate (only an
/// escape can make one) is encoded like any other code point of three bytes. Borrowed from the
/// text when it has no escapes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct JsonStr<'a>(Cow<'a, [u8]>);

impl JsonStr<'_> {
    /// The string, unless it holds a lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The encoded bytes (generalized UTF-8).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A parsed JSON value. Numbers are only checked, not kept (no built-in reads one).
#[derive(Clone, Debug, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Number,
    Str(JsonStr<'a>),
    Array(Vec<Json<'a>>),
    /// Entries in document order; keys are unique.
    Object(Vec<(JsonStr<'a>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// The value of `key` in an object (`None` for a missing key or a non-object), like
    /// Python's `dict.get`.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(entries) => entries
                .iter()
                .find(|(k, _)| k.as_bytes() == key.as_bytes())
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, when this is a string without lone surrogates.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => s.as_str(),
            _ => None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let digits = b.get(i..i + 4)?;
    let mut n = 0u32;
    for &d in digits {
        n = (n << 4) | char::from(d).to_digit(16)?;
    }
    Some(n)
}

/// Append code point `c` (a surrogate too) in generalized UTF-8.
fn push_code_point(out: &mut Vec<u8>, c: u32) {
    if c < 0x80 {
        out.push(c as u8);
    } else if c < 0x800 {
        out.push(0xc0 | (c >> 6) as u8);
        out.push(0x80 | (c & 0x3f) as u8);
    } else if c < 0x1_0000 {
        out.push(0xe0 | (c >> 12) as u8);
        out.push(0x80 | ((c >> 6) & 0x3f) as u8);
        out.push(0x80 | (c & 0x3f) as u8);
    } else {
        out.push(0xf0 | (c >> 18) as u8);
        out.push(0x80 | ((c >> 12) & 0x3f) as u8);
        out.push(0x80 | ((c >> 6) & 0x3f) as u8);
        out.push(0x80 | (c & 0x3f) as u8);
    }
}

/// The run of plain characters from `i`: up to the next quote, escape or control character.
fn plain_run(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .unwrap_or(b.len() - i)
}

/// The string whose opening quote is at `i`, and the index after its closing quote.
fn string(b: &[u8], i: usize) -> Option<(JsonStr<'_>, usize)> {
    let start = i + 1;
    let end = start + plain_run(b, start);
    if b.get(end) == Some(&b'"') {
        return Some((JsonStr(Cow::Borrowed(&b[start..end])), end + 1));
    }
    let mut out = b[start..end].to_vec();
    let mut i = end;
    loop {
        let c = *b.get(i)?;
        match c {
            b'"' => return Some((JsonStr(Cow::Owned(out)), i + 1)),
            b'\\' => {
                let e = *b.get(i + 1)?;
                i += 2;
                let plain = match e {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        let mut code = hex4(b, i)?;
                        i += 4;
                        if (0xd800..0xdc00).contains(&code) && b.get(i..i + 2) == Some(b"\\u") {
                            let low = hex4(b, i + 2)?; // bad hex here is an error in Python too
                            if (0xdc00..0xe000).contains(&low) {
                                code = 0x1_0000 + ((code - 0xd800) << 10) + (low - 0xdc00);
                                i += 6;
                            }
                        }
                        push_code_point(&mut out, code);
                        continue;
                    }
                    _ => return None,
                };
                out.push(plain);
            }
            0x00..=0x1f => return None,
            _ => {
                let run = plain_run(b, i);
                out.extend_from_slice(&b[i..i + run]);
                i += run;
            }
        }
    }
}

/// The number at `i` (checked, not kept), and the index after it.
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    let digit = |i: usize| matches!(b.get(i), Some(b'0'..=b'9'));
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let start = i;
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while digit(i) {
                i += 1;
            }
        }
        _ => return None,
    }
    let int_digits = i - start;
    let mut float = false;
    if b.get(i) == Some(&b'.') && digit(i + 1) {
        float = true;
        i += 2;
        while digit(i) {
            i += 1;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digit(j) {
            float = true;
            while digit(j) {
                j += 1;
            }
            i = j;
        }
    }
    if !float && int_digits > MAX_INT_DIGITS {
        return None;
    }
    Some(i)
}

/// A container being read.
enum Open<'a> {
    Array(Vec<Json<'a>>),
    /// The entries so far and the key of the value being read.
    Object(Vec<(JsonStr<'a>, Json<'a>)>, JsonStr<'a>),
}

/// The key at `i` (a string, then `:`), and the index of its value.
fn key(b: &[u8], i: usize) -> Option<(JsonStr<'_>, usize)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let (k, i) = string(b, i)?;
    let i = skip_ws(b, i);
    if b.get(i) != Some(&b':') {
        return None;
    }
    Some((k, skip_ws(b, i + 1)))
}

fn unique_keys(entries: &[(JsonStr<'_>, Json<'_>)]) -> bool {
    if entries.len() <= 16 {
        return entries
            .iter()
            .enumerate()
            .all(|(i, (k, _))| entries[..i].iter().all(|(seen, _)| seen != k));
    }
    let mut keys: Vec<&JsonStr<'_>> = entries.iter().map(|(k, _)| k).collect();
    keys.sort_unstable();
    keys.windows(2).all(|w| w[0] != w[1])
}

/// `text` as Python's `json.loads` with the refusing hooks reads it (the module
/// documentation's rules); `None` where Python raises.
pub fn parse(text: &str) -> Option<Json<'_>> {
    let b = text.as_bytes();
    let mut stack: Vec<Open> = Vec::new();
    let mut i = skip_ws(b, 0);
    loop {
        // A value starts at i.
        let mut value = match *b.get(i)? {
            open @ (b'{' | b'[') => {
                if stack.len() >= MAX_DEPTH {
                    return None;
                }
                let close = if open == b'{' { b'}' } else { b']' };
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&close) {
                    i += 1;
                    if open == b'{' {
                        Json::Object(Vec::new())
                    } else {
                        Json::Array(Vec::new())
                    }
                } else if open == b'{' {
                    let (k, next) = key(b, i)?;
                    stack.push(Open::Object(Vec::new(), k));
                    i = next;
                    continue;
                } else {
                    stack.push(Open::Array(Vec::new()));
                    continue;
                }
            }
            b'"' => {
                let (s, next) = string(b, i)?;
                i = next;
                Json::Str(s)
            }
            b'n' if b[i..].starts_with(b"null") => {
                i += 4;
                Json::Null
            }
            b't' if b[i..].starts_with(b"true") => {
                i += 4;
                Json::Bool(true)
            }
            b'f' if b[i..].starts_with(b"false") => {
                i += 5;
                Json::Bool(false)
            }
            _ => {
                // NaN, Infinity and -Infinity fail here too: no number starts with N or I.
                i = number(b, i)?;
                Json::Number
            }
        };
        // Put the value in its container, closing the containers that end after it.
        loop {
            i = skip_ws(b, i);
            match stack.last_mut() {
                None => return if i == b.len() { Some(value) } else { None },
                Some(Open::Array(items)) => {
                    items.push(value);
                    match b.get(i)? {
                        b',' => {
                            i = skip_ws(b, i + 1);
                            break;
                        }
                        b']' => {
                            i += 1;
                            match stack.pop() {
                                Some(Open::Array(items)) => value = Json::Array(items),
                                _ => return None,
                            }
                        }
                        _ => return None,
                    }
                }
                Some(Open::Object(entries, k)) => {
                    entries.push((std::mem::replace(k, JsonStr(Cow::Borrowed(&[]))), value));
                    match b.get(i)? {
                        b',' => {
                            let (next_key, next) = key(b, skip_ws(b, i + 1))?;
                            *k = next_key;
                            i = next;
                            break;
                        }
                        b'}' => {
                            i += 1;
                            match stack.pop() {
                                Some(Open::Object(entries, _)) if unique_keys(&entries) => {
                                    value = Json::Object(entries)
                                }
                                _ => return None,
                            }
                        }
                        _ => return None,
                    }
                }
            }
        }
    }
}

/// Append `text` as a JSON string the way Python's `json.dumps` writes it with
/// `ensure_ascii=True`: printable ASCII as is, `"` and `\` escaped, `\b \f \n \r \t` by name,
/// every other character as `\uXXXX` (lower-case hex; a surrogate pair above U+FFFF).
pub fn write_str(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    if text
        .bytes()
        .all(|c| matches!(c, b' '..=b'~') && c != b'"' && c != b'\\')
    {
        out.reserve(text.len() + 2);
        out.push('"');
        out.push_str(text);
        out.push('"');
        return;
    }
    let unit = |out: &mut String, u: u32| {
        out.push_str("\\u");
        for shift in [12, 8, 4, 0] {
            out.push(char::from(HEX[((u >> shift) & 0xf) as usize]));
        }
    };
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    unit(out, u32::from(*u));
                }
            }
        }
    }
    out.push('"');
}

/// Append `n` as a JSON string of its decimal digits (Python's `json.dumps(str(n))`), without
/// the formatting machinery.
pub fn write_decimal_str(mut n: usize, out: &mut String) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push('"');
    digits[at..].iter().for_each(|&d| out.push(char::from(d)));
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> bool {
        parse(text).is_some()
    }

    fn s(text: &str) -> Json {
        Json::Str(JsonStr(Cow::Owned(text.as_bytes().to_vec())))
    }

    #[test]
    fn values() {
        assert_eq!(parse(" null "), Some(Json::Null));
        assert_eq!(parse("true"), Some(Json::Bool(true)));
        assert_eq!(parse("\t\r\nfalse\n"), Some(Json::Bool(false)));
        assert_eq!(parse("\"a\""), Some(s("a")));
        assert_eq!(
            parse("[1, {\"a\" : [] , \"b\":{}}]"),
            Some(Json::Array(vec![
                Json::Number,
                Json::Object(vec![
                    (JsonStr(Cow::Borrowed(b"a")), Json::Array(vec![])),
                    (JsonStr(Cow::Borrowed(b"b")), Json::Object(vec![])),
                ]),
            ]))
        );
        let v = parse("{\"server_id\": \"1.2.3.4\", \"x\": null}").unwrap();
        assert_eq!(v.get("server_id").and_then(Json::as_str), Some("1.2.3.4"));
        assert_eq!(v.get("x"), Some(&Json::Null));
        assert_eq!(v.get("y"), None);
    }

    #[test]
    fn what_python_refuses() {
        for bad in [
            "",
            " ",
            "\u{feff}{}",
            "\u{c}{}",
            "\u{a0}1",
            "NaN",
            "-Infinity",
            "Infinity",
            "[NaN]",
            "nul",
            "True",
            "{} {}",
            "[1,]",
            "{\"a\":1,}",
            "{,}",
            "{\"a\" 1}",
            "{'a': 1}",
            "{1: 2}",
            "[1 2]",
            "01",
            "-",
            "+1",
            ".5",
            "1.",
            "1e",
            "1e+",
            "-01",
            "\"a",
            "\"\\a\"",
            "\"\\u12\"",
            "\"\\u12g4\"",
            "\"\\ud800\\u12g4\"",
            "\"tab\there\"",
            "\"\u{1f}\"",
            "{\"a\":1,\"a\":2}",
            "{\"é\":1,\"\\u00e9\":2}",
            "{\"\\ud83d\\ude00\":1,\"😀\":2}",
            "{\"\\ud800\":1,\"\\ud800\":2}",
            "[{\"a\":1,\"a\":1}]",
        ] {
            assert!(!ok(bad), "{bad:?}");
        }
    }

    #[test]
    fn what_python_accepts() {
        for good in [
            "0",
            "-0",
            "1.5e-3",
            "1E+2",
            "1e999",
            "-1e999",
            "\"\u{7f}\"",
            "\"\\/\\b\\f\\n\\r\\t\\\"\\\\\"",
            "\"\\uABcd\"",
            "{\"\\ud800\":1,\"\\ud801\":2}",
            "{\"a\":1,\"A\":2}",
            "[[[]]]",
            "{\"a\":{\"a\":{}}}",
        ] {
            assert!(ok(good), "{good:?}");
        }
    }

    #[test]
    fn surrogates() {
        // A pair is one character; a lone surrogate stays alone and is not a str.
        assert_eq!(parse("\"\\ud83d\\ude00\""), Some(s("😀")));
        assert_eq!(parse("\"\\ud83d\\ude00\"").unwrap().as_str(), Some("😀"));
        let lone = parse("\"\\ud83d\"").unwrap();
        assert_eq!(lone.as_str(), None);
        assert_eq!(
            lone,
            Json::Str(JsonStr(Cow::Owned(vec![0xed, 0xa0, 0xbd]))) // U+D83D, generalized UTF-8
        );
        // A high surrogate followed by something else than a low one is not joined.
        let v = parse("\"\\ud83d\\u0041\\ud83d\\ud83d\\ude00\"").unwrap();
        let mut want = vec![0xed, 0xa0, 0xbd, b'A', 0xed, 0xa0, 0xbd];
        want.extend_from_slice("😀".as_bytes());
        assert_eq!(v, Json::Str(JsonStr(Cow::Owned(want))));
        assert_eq!(parse("\"\\ude00\"").unwrap().as_str(), None);
    }

    #[test]
    fn integers_longer_than_python_converts_are_refused() {
        let n = "1".repeat(MAX_INT_DIGITS);
        assert!(ok(&n));
        assert!(ok(&format!("-{n}")));
        assert!(!ok(&format!("{n}1")));
        assert!(!ok(&format!("-{n}1")));
        assert!(ok(&format!("{n}1.0")));
        assert!(ok(&format!("{n}1e1")));
    }

    #[test]
    fn nesting_is_bounded_without_recursion() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(ok(&nested(MAX_DEPTH)));
        assert!(!ok(&nested(MAX_DEPTH + 1)));
        assert!(!ok(&nested(100_000)));
        let objects = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        assert!(ok(&objects(MAX_DEPTH)));
        assert!(!ok(&objects(MAX_DEPTH + 1)));
        // An empty container counts too.
        let inner_empty = format!(
            "{}{{}}{}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(ok(&inner_empty));
        let too_deep = format!("{}{{}}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(!ok(&too_deep));
    }

    #[test]
    fn writes_strings_as_python_ensure_ascii() {
        let dumped = |text: &str| {
            let mut out = String::new();
            write_str(text, &mut out);
            out
        };
        // json.dumps(text) for each.
        assert_eq!(dumped("a b~"), "\"a b~\"");
        assert_eq!(dumped("\"\\/"), "\"\\\"\\\\/\"");
        assert_eq!(dumped("\n\r\t\u{8}\u{c}"), "\"\\n\\r\\t\\b\\f\"");
        assert_eq!(dumped("\u{0}\u{1f}\u{7f}"), "\"\\u0000\\u001f\\u007f\"");
        assert_eq!(dumped("é€"), "\"\\u00e9\\u20ac\"");
        assert_eq!(dumped("😀"), "\"\\ud83d\\ude00\"");
        assert_eq!(dumped("a\"b~é"), "\"a\\\"b~\\u00e9\"");
        for (n, want) in [
            (0, "\"0\""),
            (7, "\"7\""),
            (1207, "\"1207\""),
            (usize::MAX, "\"18446744073709551615\""),
        ] {
            let mut out = String::new();
            write_decimal_str(n, &mut out);
            assert_eq!(out, want);
        }
    }
}
