//! The msgpack codec of the ABI, written out by hand (no external crates).
//!
//! The decoder accepts only the JSON-shaped subset: nil, bool, int, float, str, array and maps
//! with string keys, nested at most [`MAX_DEPTH`] deep. It refuses bin, ext, non-string map
//! keys, invalid UTF-8, NaN and infinities, and trailing bytes. A key repeated in one map keeps
//! its first position and its last value, as in the Python dict the host would decode.
//!
//! The encoder produces the same bytes as Python's `msgpack.packb(obj, use_bin_type=True)`:
//! the smallest integer format (positive fixint, uint8..uint64 for non-negative numbers;
//! negative fixint, int8..int64 for negative ones), floats always as float64, fixstr / str8 /
//! str16 / str32, fixarray / array16 / array32, fixmap / map16 / map32, maps in insertion order.

use std::fmt;

use crate::value::Value;

/// Deepest container nesting the decoder accepts (the outermost map or array is level 1).
pub const MAX_DEPTH: usize = 128;

/// Why bytes could not be decoded, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset where the problem was found.
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid msgpack at byte {}: {}",
            self.offset, self.message
        )
    }
}

impl std::error::Error for DecodeError {}

/// Decode exactly one value filling all of `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    decode_nested(bytes, 0)
}

/// [`decode`] for a value that sits `outer` containers deep in a larger document, so the
/// nesting limit counts from the document's root.
pub(crate) fn decode_nested(bytes: &[u8], outer: usize) -> Result<Value, DecodeError> {
    let mut d = Decoder { buf: bytes, pos: 0 };
    let v = d.value(outer)?;
    if d.pos != bytes.len() {
        return Err(d.err(format!(
            "{} trailing bytes after the value",
            bytes.len() - d.pos
        )));
    }
    Ok(v)
}

struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    fn err(&self, message: impl Into<String>) -> DecodeError {
        DecodeError {
            offset: self.pos,
            message: message.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.pos < n {
            return Err(self.err(format!(
                "truncated: needs {n} more bytes, {} left",
                self.buf.len() - self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn len16(&mut self) -> Result<usize, DecodeError> {
        Ok(u16::from_be_bytes(self.be()?) as usize)
    }

    fn len32(&mut self) -> Result<usize, DecodeError> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        let start = self.pos;
        let tag = self.u8()?;
        let v = match tag {
            0x00..=0x7f => Value::Int(i64::from(tag)),
            0x80..=0x8f => return self.map((tag & 0x0f) as usize, depth),
            0x90..=0x9f => return self.array((tag & 0x0f) as usize, depth),
            0xa0..=0xbf => return self.str((tag & 0x1f) as usize),
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xca => {
                let x = f64::from(f32::from_be_bytes(self.be()?));
                self.float(x, start)?
            }
            0xcb => {
                let x = f64::from_be_bytes(self.be()?);
                self.float(x, start)?
            }
            0xcc => Value::Int(i64::from(self.u8()?)),
            0xcd => Value::Int(i64::from(u16::from_be_bytes(self.be()?))),
            0xce => Value::Int(i64::from(u32::from_be_bytes(self.be()?))),
            0xcf => Value::from(u64::from_be_bytes(self.be()?)),
            0xd0 => Value::Int(i64::from(i8::from_be_bytes(self.be()?))),
            0xd1 => Value::Int(i64::from(i16::from_be_bytes(self.be()?))),
            0xd2 => Value::Int(i64::from(i32::from_be_bytes(self.be()?))),
            0xd3 => Value::Int(i64::from_be_bytes(self.be()?)),
            0xd9 => {
                let n = self.u8()? as usize;
                return self.str(n);
            }
            0xda => {
                let n = self.len16()?;
                return self.str(n);
            }
            0xdb => {
                let n = self.len32()?;
                return self.str(n);
            }
            0xdc => {
                let n = self.len16()?;
                return self.array(n, depth);
            }
            0xdd => {
                let n = self.len32()?;
                return self.array(n, depth);
            }
            0xde => {
                let n = self.len16()?;
                return self.map(n, depth);
            }
            0xdf => {
                let n = self.len32()?;
                return self.map(n, depth);
            }
            0xc4..=0xc6 => return Err(self.at(start, "binary data (bin) is not JSON")),
            0xc7..=0xc9 | 0xd4..=0xd8 => {
                return Err(self.at(start, "extension types (ext) are not JSON"))
            }
            0xc1 => return Err(self.at(start, "0xc1 is never used in msgpack")),
            0xe0..=0xff => Value::Int(i64::from(tag as i8)),
        };
        Ok(v)
    }

    fn at(&self, offset: usize, message: &str) -> DecodeError {
        DecodeError {
            offset,
            message: message.to_owned(),
        }
    }

    fn float(&self, x: f64, start: usize) -> Result<Value, DecodeError> {
        if x.is_finite() {
            Ok(Value::Float(x))
        } else {
            Err(self.at(start, "NaN and infinities are not JSON numbers"))
        }
    }

    fn str(&mut self, n: usize) -> Result<Value, DecodeError> {
        let start = self.pos;
        let bytes = self.take(n)?;
        match crate::raw::utf8(bytes) {
            Some(s) => Ok(Value::Str(s.to_owned())),
            None => Err(self.at(start, "string is not valid UTF-8")),
        }
    }

    fn enter(&self, depth: usize) -> Result<usize, DecodeError> {
        if depth >= MAX_DEPTH {
            Err(self.err(format!("nested more than {MAX_DEPTH} levels deep")))
        } else {
            Ok(depth + 1)
        }
    }

    /// Capacity for `n` announced items without trusting a hostile length: every item takes at
    /// least one byte.
    fn capacity(&self, n: usize) -> usize {
        n.min(self.buf.len() - self.pos)
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let depth = self.enter(depth)?;
        let mut items = Vec::with_capacity(self.capacity(n));
        for _ in 0..n {
            items.push(self.value(depth)?);
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let depth = self.enter(depth)?;
        let mut entries = Vec::with_capacity(self.capacity(n / 2));
        for _ in 0..n {
            let key_at = self.pos;
            let key = match self.value(depth)? {
                Value::Str(s) => s,
                other => {
                    return Err(self.at(
                        key_at,
                        &format!("map key is a {}, not a string", other.type_name()),
                    ))
                }
            };
            let value = self.value(depth)?;
            entries.push((key, value));
        }
        Ok(Value::Map(dedupe(entries)))
    }
}

/// Python dict semantics for repeated keys: the first position, the last value.
fn dedupe(entries: Vec<(String, Value)>) -> Vec<(String, Value)> {
    let n = entries.len();
    if n < 2 {
        return entries;
    }
    if n <= 16 {
        // Small maps (nearly all): compare pairs, no allocation.
        let repeated = (1..n).any(|j| entries[..j].iter().any(|(k, _)| *k == entries[j].0));
        if !repeated {
            return entries;
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| entries[a].0.cmp(&entries[b].0));
    if !order.windows(2).any(|w| entries[w[0]].0 == entries[w[1]].0) {
        return entries;
    }
    // value_from[i]: for the first occurrence of each key, the index of its last occurrence;
    // None for later occurrences (dropped).
    let mut value_from: Vec<Option<usize>> = vec![None; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && entries[order[j + 1]].0 == entries[order[i]].0 {
            j += 1;
        }
        value_from[order[i]] = Some(order[j]);
        i = j + 1;
    }
    let mut slots: Vec<Option<(String, Value)>> = entries.into_iter().map(Some).collect();
    for first in 0..n {
        match value_from[first] {
            Some(last) if last != first => {
                if let Some((_, v)) = slots[last].take() {
                    if let Some(slot) = slots[first].as_mut() {
                        slot.1 = v;
                    }
                }
            }
            _ => {}
        }
    }
    slots
        .into_iter()
        .zip(value_from)
        .filter_map(|(slot, keep)| keep.and(slot))
        .collect()
}

/// Encode `value` as Python's `msgpack.packb(value, use_bin_type=True)` would.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(value, &mut out);
    out
}

/// Append the encoding of `value` to `out`.
pub fn encode_into(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Nil => out.push(0xc0),
        Value::Bool(false) => out.push(0xc2),
        Value::Bool(true) => out.push(0xc3),
        Value::Int(i) => write_int(*i, out),
        Value::UInt(u) => write_uint(*u, out),
        Value::Float(x) => {
            out.push(0xcb);
            out.extend_from_slice(&x.to_be_bytes());
        }
        Value::Str(s) => write_str(s, out),
        Value::Array(items) => {
            write_array_len(items.len(), out);
            for item in items {
                encode_into(item, out);
            }
        }
        Value::Map(entries) => {
            write_map_len(entries.len(), out);
            for (k, v) in entries {
                write_str(k, out);
                encode_into(v, out);
            }
        }
    }
}

/// An integer in the smallest format Python's msgpack picks.
pub fn write_int(i: i64, out: &mut Vec<u8>) {
    if i >= 0 {
        write_uint(i as u64, out);
    } else if i >= -32 {
        out.push(i as i8 as u8);
    } else if i >= -128 {
        out.push(0xd0);
        out.push(i as i8 as u8);
    } else if i >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= -(1i64 << 31) {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

/// A non-negative integer in the smallest format.
pub fn write_uint(u: u64, out: &mut Vec<u8>) {
    if u < 0x80 {
        out.push(u as u8);
    } else if u < 0x100 {
        out.push(0xcc);
        out.push(u as u8);
    } else if u < 0x1_0000 {
        out.push(0xcd);
        out.extend_from_slice(&(u as u16).to_be_bytes());
    } else if u < 0x1_0000_0000 {
        out.push(0xce);
        out.extend_from_slice(&(u as u32).to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&u.to_be_bytes());
    }
}

/// A UTF-8 string: fixstr, str8, str16 or str32.
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n < 0x100 {
        out.push(0xd9);
        out.push(n as u8);
    } else if n < 0x1_0000 {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s.as_bytes());
}

/// The header of an array of `n` items: fixarray, array16 or array32.
pub fn write_array_len(n: usize, out: &mut Vec<u8>) {
    if n < 16 {
        out.push(0x90 | n as u8);
    } else if n < 0x1_0000 {
        out.push(0xdc);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdd);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// The header of a map of `n` entries: fixmap, map16 or map32.
pub fn write_map_len(n: usize, out: &mut Vec<u8>) {
    if n < 16 {
        out.push(0x80 | n as u8);
    } else if n < 0x1_0000 {
        out.push(0xde);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdf);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// (value, bytes from Python: `msgpack.packb(v, use_bin_type=True).hex()`).
    #[test]
    fn integers_match_python() {
        let cases: &[(i64, &str)] = &[
            (0, "00"),
            (1, "01"),
            (127, "7f"),
            (128, "cc80"),
            (255, "ccff"),
            (256, "cd0100"),
            (65535, "cdffff"),
            (65536, "ce00010000"),
            (4294967295, "ceffffffff"),
            (4294967296, "cf0000000100000000"),
            (i64::MAX, "cf7fffffffffffffff"),
            (-1, "ff"),
            (-32, "e0"),
            (-33, "d0df"),
            (-128, "d080"),
            (-129, "d1ff7f"),
            (-32768, "d18000"),
            (-32769, "d2ffff7fff"),
            (-2147483648, "d280000000"),
            (-2147483649, "d3ffffffff7fffffff"),
            (i64::MIN, "d38000000000000000"),
        ];
        for &(i, want) in cases {
            let got = encode(&Value::Int(i));
            assert_eq!(hex(&got), want, "{i}");
            assert_eq!(decode(&got).unwrap(), Value::Int(i));
        }
        assert_eq!(hex(&encode(&Value::UInt(u64::MAX))), "cfffffffffffffffff");
        assert_eq!(
            decode(&unhex("cfffffffffffffffff")).unwrap(),
            Value::UInt(u64::MAX)
        );
        // A value Python packs smaller, decoded from a wider format, re-encodes the small way.
        assert_eq!(
            decode(&unhex("d3000000000000000a")).unwrap(),
            Value::Int(10)
        );
        assert_eq!(decode(&unhex("cf0000000000000005")).unwrap(), Value::Int(5));
    }

    #[test]
    fn scalars_match_python() {
        assert_eq!(hex(&encode(&Value::Nil)), "c0");
        assert_eq!(hex(&encode(&Value::Bool(true))), "c3");
        assert_eq!(hex(&encode(&Value::Bool(false))), "c2");
        assert_eq!(hex(&encode(&Value::Float(1.5))), "cb3ff8000000000000");
        assert_eq!(hex(&encode(&Value::Float(-0.0))), "cb8000000000000000");
        // float32 on the wire becomes a float64 when re-encoded, as in Python.
        assert_eq!(decode(&unhex("ca3fc00000")).unwrap(), Value::Float(1.5));
    }

    #[test]
    fn strings_pick_the_smallest_header() {
        for (n, header) in [
            (0usize, "a0"),
            (31, "bf"),
            (32, "d920"),
            (255, "d9ff"),
            (256, "da0100"),
            (65535, "daffff"),
            (65536, "db00010000"),
        ] {
            let s = "x".repeat(n);
            let got = encode(&Value::Str(s.clone()));
            assert_eq!(hex(&got[..header.len() / 2]), header, "len {n}");
            assert_eq!(got.len(), header.len() / 2 + n);
            assert_eq!(decode(&got).unwrap(), Value::Str(s));
        }
        // Length counts UTF-8 bytes.
        assert_eq!(hex(&encode(&Value::from("é"))), "a2c3a9");
    }

    #[test]
    fn containers_pick_the_smallest_header() {
        for (n, header) in [
            (0usize, "90"),
            (15, "9f"),
            (16, "dc0010"),
            (65535, "dcffff"),
            (65536, "dd00010000"),
        ] {
            let v = Value::Array(vec![Value::Nil; n]);
            let got = encode(&v);
            assert_eq!(hex(&got[..header.len() / 2]), header, "array {n}");
            assert_eq!(decode(&got).unwrap(), v);
        }
        for (n, header) in [
            (0usize, "80"),
            (15, "8f"),
            (16, "de0010"),
            (65535, "deffff"),
            (65536, "df00010000"),
        ] {
            let v = Value::Map(
                (0..n)
                    .map(|i| (format!("k{i}"), Value::Int(i as i64)))
                    .collect(),
            );
            let got = encode(&v);
            assert_eq!(hex(&got[..header.len() / 2]), header, "map {n}");
            assert_eq!(decode(&got).unwrap(), v);
        }
    }

    #[test]
    fn nested_document_matches_python() {
        // msgpack.packb({"op": "add", "path": "/a", "value": [1, -1, 1.5, None, True, {"x": "y"}]},
        //               use_bin_type=True).hex()
        let want =
            "83a26f70a3616464a470617468a22f61a576616c756596 01ffcb3ff8000000000000c0c381a178a179"
                .replace(' ', "");
        let v = Value::map([
            ("op", Value::from("add")),
            ("path", Value::from("/a")),
            (
                "value",
                Value::array([
                    Value::Int(1),
                    Value::Int(-1),
                    Value::Float(1.5),
                    Value::Nil,
                    Value::Bool(true),
                    Value::map([("x", "y")]),
                ]),
            ),
        ]);
        assert_eq!(hex(&encode(&v)), want);
        assert_eq!(decode(&unhex(&want)).unwrap(), v);
    }

    #[test]
    fn refuses_what_json_cannot_hold() {
        for (bytes, why) in [
            ("c401ff", "bin"),
            ("d40100", "ext"),
            ("c70101ff", "ext"),
            ("c1", "never used"),
            ("8101c0", "not a string"),
            ("cb7ff8000000000000", "not JSON numbers"),
            ("ca7f800000", "not JSON numbers"),
            ("a2c328", "UTF-8"),
            ("92c0", "truncated"),
            ("dd7fffffff", "truncated"),
            ("c0c0", "trailing"),
            ("", "truncated"),
        ] {
            let err = decode(&unhex(bytes)).unwrap_err();
            assert!(err.to_string().contains(why), "{bytes}: {err}");
        }
    }

    #[test]
    fn nesting_is_limited() {
        let ok = [vec![0x91u8; MAX_DEPTH - 1], vec![0x90]].concat();
        assert!(decode(&ok).is_ok());
        let too_deep = [vec![0x91u8; MAX_DEPTH], vec![0x90]].concat();
        let err = decode(&too_deep).unwrap_err();
        assert!(err.to_string().contains("nested more than 128"), "{err}");
        // Deep nesting of a hostile size never recurses past the limit.
        assert!(decode(&vec![0x91u8; 100_000]).is_err());
    }

    #[test]
    fn repeated_keys_keep_first_position_and_last_value() {
        // {"a": 1, "b": 2, "a": 3, "c": 4, "b": 5, "a": 6} as Python's dict sees it.
        let bytes = unhex("86a16101a16202a16103a16304a16205a16106");
        assert_eq!(
            decode(&bytes).unwrap(),
            Value::map([("a", 6), ("b", 5), ("c", 4)])
        );
        let many = Value::Map(
            (0..40)
                .map(|i| (format!("k{}", i % 20), Value::Int(i)))
                .collect(),
        );
        let want = Value::Map(
            (0..20)
                .map(|i| (format!("k{i}"), Value::Int(i + 20)))
                .collect(),
        );
        assert_eq!(decode(&encode(&many)).unwrap(), want);
    }
}
