//! [`RawValue`]: a zero-copy, lazy view of one msgpack value.
//!
//! A `RawValue<'a>` borrows bytes that begin with one msgpack value. Nothing is decoded up
//! front: [`RawValue::get`] scans a map's keys and steps over the values in between without
//! decoding them (strings by their length prefix, containers by counting their items,
//! iteratively: no recursion, no allocation), [`RawValue::as_str`] checks UTF-8 only for the
//! string it returns, and [`RawValue::to_value`] materializes a subtree into an owned
//! [`Value`] when a plugin wants one. A value found by navigation is not delimited until
//! someone needs its end (to step over it, or [`RawValue::as_bytes`]), so reading `pod.spec`
//! does not walk `spec`.
//!
//! What is checked when (the trade-off against [`crate::msgpack::decode`], which checks
//! everything and allocates a [`Value`] for everything):
//!
//! * When a `RawValue` is made ([`RawValue::new`], or [`crate::Request::decode`] for the whole
//!   request), one pass over the headers checks the framing: every length lies inside the
//!   bytes, nothing trails, and there is no bin, ext or `0xc1` anywhere. String contents are
//!   stepped over and nothing is allocated. Navigation therefore never fails, never panics
//!   and never reads out of bounds afterwards. (The request's top-level keys must also be
//!   strings.)
//! * Only when read or materialized: UTF-8 ([`RawValue::as_str`] gives `None` for a string
//!   that is not UTF-8), map keys being strings (a key that is not a string matches no
//!   [`RawValue::get`]), floats being finite ([`RawValue::as_f64`]), and the nesting limit
//!   [`MAX_DEPTH`](crate::msgpack::MAX_DEPTH): navigation is iterative and needs none, the
//!   recursive [`RawValue::to_value`] checks it, with all the other rules of
//!   [`crate::msgpack::decode`]. (The request's `config` is decoded whole by
//!   [`crate::Request::decode`], its depth counted from the request's root as before.)
//! * Repeated keys: request maps never repeat a key (the host encodes Python dicts), so
//!   [`RawValue::get`] returns the first match and stops there; [`RawValue::iter_map`] yields
//!   entries as they are on the wire; [`RawValue::to_value`] merges repeats as a Python dict
//!   does (first position, last value).
//!
//! So a request whose Pod holds a string that is not UTF-8, or is nested deeper than
//! `MAX_DEPTH`, somewhere the plugin never looks is no longer refused as a whole; the host
//! encodes requests from Python objects (valid UTF-8 strings, dicts without repeated keys), so
//! this does not happen with the real host.
//!
//! Cost, in a module: the framing pass is about 35 fuel per msgpack value (a 14.5 KB request
//! of 1000 values: ~36k fuel); each later walk over a part costs about the same per value it
//! steps over.

use std::fmt;

use crate::msgpack::DecodeError;
use crate::value::Value;

/// The type of a [`RawValue`] (the JSON-shaped subset: bin and ext never pass the checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Nil,
    Bool,
    /// An integer, signed or unsigned, of any width.
    Int,
    /// A float32 or float64.
    Float,
    Str,
    Array,
    Map,
}

impl Kind {
    /// The name used in error messages, as [`Value::type_name`] gives it.
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Nil => "nil",
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Str => "str",
            Kind::Array => "array",
            Kind::Map => "map",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())
    }
}

/// One msgpack value, borrowed and undecoded; see the [module documentation](self).
///
/// `Copy` and two words wide: pass it by value. Equality compares the encodings.
#[derive(Clone, Copy)]
pub struct RawValue<'a> {
    /// Begins with exactly one value whose framing has been checked; may go on past it (to
    /// the end of the checked bytes it was found in).
    bytes: &'a [u8],
}

/// A value's header: what it is, and its size.
enum Head {
    Nil,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// Length in bytes.
    Str(usize),
    /// Item count.
    Array(usize),
    /// Entry count.
    Map(usize),
}

impl<'a> RawValue<'a> {
    /// The nil value (what [`crate::Request::pod`] gives when a request has no Pod).
    pub const NIL: RawValue<'static> = RawValue { bytes: &[0xc0] };

    /// Check that `bytes` hold exactly one value: the framing checks of the
    /// [module documentation](self), one pass over the headers, no allocation.
    pub fn new(bytes: &'a [u8]) -> Result<RawValue<'a>, DecodeError> {
        match skip(bytes, 0) {
            Some(end) if end == bytes.len() => Ok(RawValue { bytes }),
            _ => Err(diagnose(bytes)),
        }
    }

    /// Bytes that begin with a checked value (a value found inside a checked value).
    pub(crate) fn checked(bytes: &'a [u8]) -> RawValue<'a> {
        RawValue { bytes }
    }

    /// The length of this value's encoding (steps over it).
    pub(crate) fn encoded_len(self) -> usize {
        skip(self.bytes, 0).unwrap_or(self.bytes.len())
    }

    /// The msgpack encoding of this value, borrowed (finding its end steps over it).
    pub fn as_bytes(self) -> &'a [u8] {
        &self.bytes[..self.encoded_len()]
    }

    fn head(self) -> Head {
        let b = self.bytes;
        let tag = match b.first() {
            Some(&t) => t,
            None => return Head::Nil, // never: a RawValue holds a value
        };
        match tag {
            0x00..=0x7f => Head::Int(i64::from(tag)),
            0x80..=0x8f => Head::Map((tag & 0x0f) as usize),
            0x90..=0x9f => Head::Array((tag & 0x0f) as usize),
            0xa0..=0xbf => Head::Str((tag & 0x1f) as usize),
            0xc2 => Head::Bool(false),
            0xc3 => Head::Bool(true),
            0xca => Head::Float(f64::from(f32::from_bits(be(b, 1, 4) as u32))),
            0xcb => Head::Float(f64::from_bits(be(b, 1, 8))),
            0xcc => Head::Int(be(b, 1, 1) as i64),
            0xcd => Head::Int(be(b, 1, 2) as i64),
            0xce => Head::Int(be(b, 1, 4) as i64),
            0xcf => {
                let u = be(b, 1, 8);
                match i64::try_from(u) {
                    Ok(i) => Head::Int(i),
                    Err(_) => Head::UInt(u),
                }
            }
            0xd0 => Head::Int(i64::from(be(b, 1, 1) as u8 as i8)),
            0xd1 => Head::Int(i64::from(be(b, 1, 2) as u16 as i16)),
            0xd2 => Head::Int(i64::from(be(b, 1, 4) as u32 as i32)),
            0xd3 => Head::Int(be(b, 1, 8) as i64),
            0xd9 => Head::Str(be(b, 1, 1) as usize),
            0xda => Head::Str(be(b, 1, 2) as usize),
            0xdb => Head::Str(be(b, 1, 4) as usize),
            0xdc => Head::Array(be(b, 1, 2) as usize),
            0xdd => Head::Array(be(b, 1, 4) as usize),
            0xde => Head::Map(be(b, 1, 2) as usize),
            0xdf => Head::Map(be(b, 1, 4) as usize),
            0xe0..=0xff => Head::Int(i64::from(tag as i8)),
            // nil; bin, ext and 0xc1 never pass the checks
            _ => Head::Nil,
        }
    }

    /// What this value is.
    pub fn kind(self) -> Kind {
        let tag = self.bytes.first().copied().unwrap_or(0xc0);
        // The common cases without decoding the header.
        if tag.wrapping_sub(0xa0) < 0x20 {
            return Kind::Str;
        }
        if tag & 0xf0 == 0x80 {
            return Kind::Map;
        }
        if tag & 0xf0 == 0x90 {
            return Kind::Array;
        }
        match self.head() {
            Head::Nil => Kind::Nil,
            Head::Bool(_) => Kind::Bool,
            Head::Int(_) | Head::UInt(_) => Kind::Int,
            Head::Float(_) => Kind::Float,
            Head::Str(_) => Kind::Str,
            Head::Array(_) => Kind::Array,
            Head::Map(_) => Kind::Map,
        }
    }

    /// "nil", "bool", "int", "float", "str", "array" or "map", as [`Value::type_name`].
    pub fn type_name(self) -> &'static str {
        self.kind().type_name()
    }

    pub fn is_nil(self) -> bool {
        self.bytes.first() == Some(&0xc0)
    }

    pub fn as_bool(self) -> Option<bool> {
        match self.head() {
            Head::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// An integer that fits an i64.
    pub fn as_i64(self) -> Option<i64> {
        match self.head() {
            Head::Int(i) => Some(i),
            _ => None,
        }
    }

    /// A non-negative integer.
    pub fn as_u64(self) -> Option<u64> {
        match self.head() {
            Head::Int(i) => u64::try_from(i).ok(),
            Head::UInt(u) => Some(u),
            _ => None,
        }
    }

    /// A finite float (not an integer, as [`Value::as_f64`]).
    pub fn as_f64(self) -> Option<f64> {
        match self.head() {
            Head::Float(x) if x.is_finite() => Some(x),
            _ => None,
        }
    }

    /// The string, borrowed from the request; `None` when this is not a string or its bytes are
    /// not valid UTF-8 (checked now, for this string only).
    pub fn as_str(self) -> Option<&'a str> {
        self.str_bytes().and_then(utf8)
    }

    /// The bytes of a string, UTF-8 unchecked (compare them with a `&str`'s bytes to match a
    /// name without checking UTF-8).
    pub fn str_bytes(self) -> Option<&'a [u8]> {
        str_at(self.bytes, 0).map(|(start, end)| &self.bytes[start..end])
    }

    /// Items of an array, entries of a map, bytes of a string; 0 for anything else.
    pub fn len(self) -> usize {
        match self.head() {
            Head::Str(n) | Head::Array(n) | Head::Map(n) => n,
            _ => 0,
        }
    }

    /// `len() == 0`.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Python truthiness, as [`Value::is_truthy`]: nil, false, 0, 0.0, "", [] and {} are false.
    pub fn is_truthy(self) -> bool {
        match self.head() {
            Head::Nil => false,
            Head::Bool(b) => b,
            Head::Int(i) => i != 0,
            Head::UInt(_) => true,
            Head::Float(x) => x != 0.0,
            Head::Str(n) | Head::Array(n) | Head::Map(n) => n != 0,
        }
    }

    /// The value of `key` when this is a map holding it (like Python's `dict.get`); `None` for
    /// a missing key or when this is not a map. Scans the keys in order and stops at the first
    /// match (request maps never repeat a key), stepping over the values before it without
    /// decoding them. To read several keys of a big map, one [`RawValue::iter_map`] pass is
    /// cheaper than several `get`s.
    pub fn get(self, key: &str) -> Option<RawValue<'a>> {
        let key = key.as_bytes();
        let b = self.bytes;
        let (mut pos, n) = container_at(b, true)?;
        for _ in 0..n {
            let value = match str_at(b, pos) {
                Some((start, end)) => {
                    if &b[start..end] == key {
                        return b.get(end..).map(RawValue::checked);
                    }
                    end
                }
                None => skip(b, pos)?, // a key that is not a string matches nothing
            };
            pos = skip(b, value)?;
        }
        None
    }

    /// Item `index` of an array (`None` when out of range or not an array).
    pub fn item(self, index: usize) -> Option<RawValue<'a>> {
        self.iter_array().nth(index)
    }

    /// The items of an array, in order (nothing when this is not an array). An item is stepped
    /// over only when the next one is asked for.
    pub fn iter_array(self) -> ArrayIter<'a> {
        let (pos, left) = container_at(self.bytes, false).unwrap_or((0, 0));
        ArrayIter {
            bytes: self.bytes,
            pos,
            left,
            pending: false,
        }
    }

    /// The `(key, value)` entries of a map in wire order (nothing when this is not a map). Keys
    /// are strings in a request; read them with [`RawValue::as_str`] or compare
    /// [`RawValue::str_bytes`]. A value is stepped over only when the next entry is asked for.
    pub fn iter_map(self) -> MapIter<'a> {
        let (pos, left) = container_at(self.bytes, true).unwrap_or((0, 0));
        MapIter {
            items: ArrayIter {
                bytes: self.bytes,
                pos,
                left: 2 * left,
                pending: false,
            },
        }
    }

    /// Decode this value into an owned [`Value`], with every check of
    /// [`crate::msgpack::decode`] (UTF-8 of every string, string keys, finite floats, nesting
    /// at most [`crate::msgpack::MAX_DEPTH`] deep; repeated keys merged as a Python dict does).
    /// Error offsets count from the start of this value.
    pub fn to_value(self) -> Result<Value, DecodeError> {
        crate::msgpack::decode(self.as_bytes())
    }
}

impl Default for RawValue<'_> {
    fn default() -> Self {
        RawValue::NIL
    }
}

/// Same encoding.
impl PartialEq for RawValue<'_> {
    fn eq(&self, other: &RawValue<'_>) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for RawValue<'_> {}

/// JSON-like, as `Value`'s `Display` (decodes the value).
impl fmt::Display for RawValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_value() {
            Ok(v) => write!(f, "{v}"),
            Err(e) => write!(f, "<{e}>"),
        }
    }
}

impl fmt::Debug for RawValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawValue({self})")
    }
}

/// The items of an array, see [`RawValue::iter_array`].
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    bytes: &'a [u8],
    /// Where the next item starts, or (`pending`) where the last one returned starts.
    pos: usize,
    left: usize,
    pending: bool,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = RawValue<'a>;

    fn next(&mut self) -> Option<RawValue<'a>> {
        if self.left == 0 {
            return None;
        }
        if self.pending {
            match skip(self.bytes, self.pos) {
                Some(end) => self.pos = end,
                None => {
                    self.left = 0; // never: the bytes were checked
                    return None;
                }
            }
        }
        self.left -= 1;
        self.pending = true;
        match self.bytes.get(self.pos..) {
            Some(rest) if !rest.is_empty() => Some(RawValue::checked(rest)),
            _ => {
                self.left = 0; // never: the bytes were checked
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

/// The entries of a map, see [`RawValue::iter_map`].
#[derive(Clone, Debug)]
pub struct MapIter<'a> {
    /// Keys and values, alternating.
    items: ArrayIter<'a>,
}

impl<'a> Iterator for MapIter<'a> {
    type Item = (RawValue<'a>, RawValue<'a>);

    fn next(&mut self) -> Option<(RawValue<'a>, RawValue<'a>)> {
        let key = self.items.next()?;
        let value = self.items.next()?;
        Some((key, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.items.left / 2;
        (n, Some(n))
    }
}

impl ExactSizeIterator for MapIter<'_> {}

/// Visit a map's entries in one pass; `f` gets each key and value and returns the value's
/// encoded length when it walked the value itself (so it is not stepped over again), or `None`
/// to have it stepped over. Gives the map's encoded length. Nothing for a non-map.
pub(crate) fn walk_map<'a>(
    map: RawValue<'a>,
    mut f: impl FnMut(&'a [u8], RawValue<'a>) -> Option<usize>,
) -> usize {
    let (mut pos, n) = match container_at(map.bytes, true) {
        Some(head) => head,
        None => return map.encoded_len(),
    };
    let b = map.bytes;
    for _ in 0..n {
        // The key's bytes (empty for a key that is not a string: it matches no name).
        let (key, value) = match str_at(b, pos) {
            Some((start, end)) => (&b[start..end], end),
            None => match skip(b, pos) {
                Some(v) => (&b[..0], v),
                None => return b.len(), // never: the bytes were checked
            },
        };
        let rest = match b.get(value..) {
            Some(rest) => RawValue::checked(rest),
            None => return b.len(),
        };
        pos = match f(key, rest) {
            Some(len) => value + len,
            None => match skip(b, value) {
                Some(end) => end,
                None => return b.len(),
            },
        };
    }
    pos.min(b.len())
}

/// The first value of `key` in `map` and the map's encoded length, in one pass that steps
/// over the values (`(None, len)` for a non-map).
pub(crate) fn find_in_map<'a>(map: RawValue<'a>, key: &[u8]) -> (Option<RawValue<'a>>, usize) {
    let b = map.bytes;
    let (mut pos, n) = match container_at(b, true) {
        Some(head) => head,
        None => return (None, map.encoded_len()),
    };
    let mut found = None;
    for _ in 0..n {
        let value = match str_at(b, pos) {
            Some((start, end)) => {
                if found.is_none() && end - start == key.len() && &b[start..end] == key {
                    found = Some(end);
                }
                end
            }
            None => match skip(b, pos) {
                Some(v) => v,
                None => break, // never: the bytes were checked
            },
        };
        pos = match skip(b, value) {
            Some(end) => end,
            None => break,
        };
    }
    let found = found.and_then(|v| b.get(v..)).map(RawValue::checked);
    (found, pos.min(b.len()))
}

/// [`walk_map`] for the items of an array (`f` gets the index and the item).
pub(crate) fn walk_array<'a>(
    array: RawValue<'a>,
    mut f: impl FnMut(usize, RawValue<'a>) -> Option<usize>,
) -> usize {
    let (mut pos, n) = match container_at(array.bytes, false) {
        Some(head) => head,
        None => return array.encoded_len(),
    };
    let b = array.bytes;
    for i in 0..n {
        let item = match b.get(pos..) {
            Some(rest) => RawValue::checked(rest),
            None => return b.len(),
        };
        pos = match f(i, item) {
            Some(len) => pos + len,
            None => match skip(b, pos) {
                Some(end) => end,
                None => return b.len(),
            },
        };
    }
    pos.min(b.len())
}

/// The big-endian unsigned integer of `n` bytes at `at`; 0 when out of range (never, for
/// checked bytes).
fn be(b: &[u8], at: usize, n: usize) -> u64 {
    match b.get(at..at + n) {
        Some(s) => s.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
        None => 0,
    }
}

/// The start of the entries and the entry count of the map at the start of `b` (`map`), or of
/// the items and the item count of the array (`!map`); `None` for anything else. Inline: the
/// headers of small maps and arrays are read on every step of a walk.
#[inline]
fn container_at(b: &[u8], map: bool) -> Option<(usize, usize)> {
    let tag = *b.first()?;
    if tag & 0xf0 == if map { 0x80 } else { 0x90 } {
        return Some((1, (tag & 0x0f) as usize));
    }
    match (tag, map) {
        (0xde, true) | (0xdc, false) => Some((3, be16(b, 1)?)),
        (0xdf, true) | (0xdd, false) => Some((5, be32(b, 1)?)),
        _ => None,
    }
}

#[inline]
fn be16(b: &[u8], at: usize) -> Option<usize> {
    Some(((*b.get(at)? as usize) << 8) | *b.get(at + 1)? as usize)
}

#[inline]
fn be32(b: &[u8], at: usize) -> Option<usize> {
    let s = b.get(at..at + 4)?;
    usize::try_from(u32::from_be_bytes([s[0], s[1], s[2], s[3]])).ok()
}

/// Where the string at `pos` has its bytes (start and end offsets), when it is a string whose
/// bytes are all there.
#[inline]
fn str_at(b: &[u8], pos: usize) -> Option<(usize, usize)> {
    let tag = *b.get(pos)?;
    let (start, n) = if tag.wrapping_sub(0xa0) < 0x20 {
        (pos + 1, (tag & 0x1f) as usize)
    } else {
        match tag {
            0xd9 => (pos + 2, *b.get(pos + 1)? as usize),
            0xda => (pos + 3, be16(b, pos + 1)?),
            0xdb => (pos + 5, be32(b, pos + 1)?),
            _ => return None,
        }
    };
    let end = start.checked_add(n)?;
    if end <= b.len() {
        Some((start, end))
    } else {
        None
    }
}

/// `bytes` as UTF-8. Names and keys are nearly always ASCII, and checking that byte by byte is
/// much cheaper in a module than the general validation.
pub(crate) fn utf8(bytes: &[u8]) -> Option<&str> {
    // OR every byte together, eight at a time: ASCII when no high bit is set.
    let mut acc = 0u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        acc |= u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    }
    for &c in chunks.remainder() {
        acc |= u64::from(c);
    }
    if acc & 0x8080_8080_8080_8080 == 0 {
        // SAFETY: ASCII bytes are valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes).ok()
}

/// [`skip_any`] with the commonest case, a fixstr (nearly every key), inline.
#[inline]
pub(crate) fn skip(b: &[u8], pos: usize) -> Option<usize> {
    let tag = *b.get(pos)?;
    if tag.wrapping_sub(0xa0) < 0x20 {
        let end = pos + 1 + (tag & 0x1f) as usize;
        return if end <= b.len() { Some(end) } else { None };
    }
    skip_any(b, pos)
}

/// The offset just past the value at `pos`, stepping over nested values iteratively (a count
/// of values still to step over, no recursion, no allocation); `None` when the bytes end
/// early, a length cannot fit, or a bin, ext or `0xc1` turns up. Never reads out of bounds.
///
/// This is the loop every navigation runs, so it is written for the common case (a fixstr, in
/// Kubernetes objects nearly every key and most values) first.
#[inline(never)]
fn skip_any(b: &[u8], mut pos: usize) -> Option<usize> {
    let len = b.len();
    // Values still to step over; kept <= len - pos when adding, as each takes a byte.
    let mut left: usize = 1;
    loop {
        let tag = *b.get(pos)?;
        pos += 1;
        left -= 1;
        if tag.wrapping_sub(0xa0) < 0x20 {
            // fixstr; an overshoot is caught by the next read or the final check
            pos += (tag & 0x1f) as usize;
        } else if !(0x80..0xe0).contains(&tag) {
            // positive or negative fixint
        } else if tag < 0xa0 {
            // fixmap (0x80..=0x8f: two values per entry) or fixarray (0x90..=0x9f)
            let n = ((tag & 0x0f) as usize) << (tag < 0x90) as u32;
            if n > (len - pos).saturating_sub(left) {
                return None;
            }
            left += n;
        } else {
            // (payload bytes after the tag, values inside)
            let (bytes, n) = match tag {
                0xc0 | 0xc2 | 0xc3 => (0, 0),
                0xcc | 0xd0 => (1, 0),
                0xcd | 0xd1 => (2, 0),
                0xca | 0xce | 0xd2 => (4, 0),
                0xcb | 0xcf | 0xd3 => (8, 0),
                0xd9 => (1 + *b.get(pos)? as usize, 0),
                0xda => (2 + be16(b, pos)?, 0),
                0xdb => (4usize.checked_add(be32(b, pos)?)?, 0),
                0xdc => (2, be16(b, pos)?),
                0xdd => (4, be32(b, pos)?),
                0xde => (2, 2 * be16(b, pos)?),
                0xdf => (4, be32(b, pos)?.checked_mul(2)?),
                _ => return None, // bin, ext, 0xc1
            };
            if bytes > len - pos {
                return None;
            }
            pos += bytes;
            if n > (len - pos).saturating_sub(left) {
                return None;
            }
            left += n;
        }
        if left == 0 {
            return if pos <= len { Some(pos) } else { None };
        }
    }
}

/// Why `bytes` are not exactly one well-framed value (the slow path: the full decoder says).
fn diagnose(bytes: &[u8]) -> DecodeError {
    match crate::msgpack::decode(bytes) {
        Err(e) => e,
        Ok(_) => DecodeError {
            offset: 0,
            message: "malformed msgpack".to_owned(),
        },
    }
}

/// Check `bytes` as [`RawValue::new`] does and, when they hold a map, call `entry` with each
/// entry's key and value in wire order: one pass over the bytes (the request's decoder). A key
/// that is not a string is refused.
pub(crate) fn check_root<'a>(
    bytes: &'a [u8],
    mut entry: impl FnMut(RawValue<'a>, RawValue<'a>),
) -> Result<RawValue<'a>, DecodeError> {
    let (mut pos, n) = match bytes.first() {
        Some(&t @ 0x80..=0x8f) => (1, (t & 0x0f) as usize),
        Some(0xde) => match be16(bytes, 1) {
            Some(n) => (3, n),
            None => return Err(diagnose(bytes)),
        },
        Some(0xdf) => match be32(bytes, 1) {
            Some(n) => (5, n),
            None => return Err(diagnose(bytes)),
        },
        _ => return RawValue::new(bytes),
    };
    for _ in 0..n {
        let key = pos;
        if !matches!(bytes.get(key), Some(0xa0..=0xbf | 0xd9..=0xdb)) {
            return Err(diagnose(bytes));
        }
        let value = skip(bytes, key).ok_or_else(|| diagnose(bytes))?;
        pos = skip(bytes, value).ok_or_else(|| diagnose(bytes))?;
        entry(
            RawValue::checked(&bytes[key..]),
            RawValue::checked(&bytes[value..]),
        );
    }
    if pos != bytes.len() {
        return Err(diagnose(bytes));
    }
    Ok(RawValue::checked(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgpack::{encode, MAX_DEPTH};

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn sample() -> Value {
        Value::map([
            ("a", Value::Int(1)),
            (
                "b",
                Value::array([
                    Value::from("x".repeat(40)),
                    Value::map([("c", Value::Float(1.5)), ("d", Value::Nil)]),
                    Value::Int(-5),
                    Value::UInt(u64::MAX),
                    Value::Bool(true),
                ]),
            ),
            ("é", Value::from("ü")),
            ("big", Value::Array(vec![Value::Int(300); 20])),
            (
                "m",
                Value::Map((0..20).map(|i| (format!("k{i}"), Value::Int(i))).collect()),
            ),
        ])
    }

    #[test]
    fn navigates_without_decoding() {
        let bytes = encode(&sample());
        let v = RawValue::new(&bytes).unwrap();
        assert_eq!(v.kind(), Kind::Map);
        assert_eq!(v.len(), 5);
        assert_eq!(v.get("a").and_then(RawValue::as_i64), Some(1));
        assert_eq!(v.get("é").and_then(RawValue::as_str), Some("ü"));
        assert_eq!(v.get("zz"), None);
        let b = v.get("b").unwrap();
        assert_eq!(b.kind(), Kind::Array);
        let items: Vec<Kind> = b.iter_array().map(RawValue::kind).collect();
        assert_eq!(
            items,
            [Kind::Str, Kind::Map, Kind::Int, Kind::Int, Kind::Bool]
        );
        assert_eq!(b.item(0).unwrap().len(), 40);
        assert_eq!(b.item(1).unwrap().get("c").unwrap().as_f64(), Some(1.5));
        assert!(b.item(1).unwrap().get("d").unwrap().is_nil());
        assert_eq!(b.item(2).unwrap().as_i64(), Some(-5));
        assert_eq!(b.item(3).unwrap().as_u64(), Some(u64::MAX));
        assert_eq!(b.item(3).unwrap().as_i64(), None);
        assert_eq!(b.item(4).unwrap().as_bool(), Some(true));
        assert_eq!(b.item(5), None);
        assert_eq!(v.get("big").unwrap().iter_array().count(), 20);
        assert_eq!(v.get("m").unwrap().get("k19").unwrap().as_i64(), Some(19));
        let keys: Vec<&str> = v.iter_map().map(|(k, _)| k.as_str().unwrap()).collect();
        assert_eq!(keys, ["a", "b", "é", "big", "m"]);
        // Every subtree materializes to what the full decoder gives.
        assert_eq!(v.to_value().unwrap(), sample());
        assert_eq!(
            v.get("b").unwrap().to_value().unwrap(),
            sample().get("b").unwrap().clone()
        );
        // Navigation on a non-container is empty.
        let one = v.get("a").unwrap();
        assert_eq!(one.get("x"), None);
        assert_eq!(one.iter_map().count(), 0);
        assert_eq!(one.iter_array().count(), 0);
        assert_eq!(RawValue::NIL.kind(), Kind::Nil);
    }

    #[test]
    fn every_encoding_reads_back() {
        for v in [
            Value::Int(0),
            Value::Int(127),
            Value::Int(128),
            Value::Int(65536),
            Value::Int(1 << 40),
            Value::Int(-1),
            Value::Int(-33),
            Value::Int(-200),
            Value::Int(-40000),
            Value::Int(i64::MIN),
        ] {
            let bytes = encode(&v);
            assert_eq!(RawValue::new(&bytes).unwrap().as_i64(), v.as_i64(), "{v}");
        }
        for n in [0usize, 31, 32, 255, 256, 65535, 65536] {
            let s = "y".repeat(n);
            let bytes = encode(&Value::from(s.as_str()));
            assert_eq!(RawValue::new(&bytes).unwrap().as_str(), Some(s.as_str()));
            for v in [
                Value::Array(vec![Value::Nil; n]),
                Value::Map((0..n).map(|i| (format!("{i}"), Value::Nil)).collect()),
            ] {
                let bytes = encode(&v);
                let r = RawValue::new(&bytes).unwrap();
                assert_eq!(r.len(), n);
                assert_eq!(r.iter_array().count() + r.iter_map().count(), n);
            }
        }
        // float32 and wide encodings of small numbers
        for (hex, kind) in [
            ("ca3fc00000", Kind::Float),
            ("d3000000000000000a", Kind::Int),
            ("cf0000000000000005", Kind::Int),
            ("d90161", Kind::Str),
            ("da000161", Kind::Str),
            ("db0000000161", Kind::Str),
            ("dc000101", Kind::Array),
            ("dd0000000101", Kind::Array),
            ("de0001a16101", Kind::Map),
            ("df00000001a16101", Kind::Map),
        ] {
            let bytes = unhex(hex);
            let r = RawValue::new(&bytes).unwrap();
            assert_eq!(r.kind(), kind, "{hex}");
            assert_eq!(r.to_value().unwrap(), msgpack_decode(&bytes), "{hex}");
        }
        assert_eq!(
            RawValue::new(&unhex("ca3fc00000")).unwrap().as_f64(),
            Some(1.5)
        );
    }

    fn msgpack_decode(b: &[u8]) -> Value {
        crate::msgpack::decode(b).unwrap()
    }

    #[test]
    fn utf8_fast_path_agrees_with_std() {
        for s in [
            "",
            "a",
            "abcdefg",
            "abcdefgh",
            "abcdefghi",
            "é",
            "aaaaaaaé",
            "aaaaaaaaé",
            "€uro",
        ] {
            assert_eq!(utf8(s.as_bytes()), Some(s));
        }
        for b in [
            &[0xc3u8, 0x28][..],
            &[b'a'; 9][..8],
            &[0xffu8; 9],
            &[b'a', b'a', 0x80],
        ] {
            assert_eq!(utf8(b), std::str::from_utf8(b).ok(), "{b:?}");
        }
        let mut long = vec![b'a'; 100];
        long[97] = 0xe9;
        assert_eq!(utf8(&long), None);
    }

    #[test]
    fn repeated_keys_give_the_first_match_to_value_merges_them() {
        let bytes = unhex("86a16101a16202a16103a16304a16205a16106");
        let v = RawValue::new(&bytes).unwrap();
        assert_eq!(v.get("a").unwrap().as_i64(), Some(1));
        assert_eq!(v.get("b").unwrap().as_i64(), Some(2));
        assert_eq!(v.iter_map().count(), 6);
        assert_eq!(
            v.to_value().unwrap(),
            Value::map([("a", 6), ("b", 5), ("c", 4)])
        );
    }

    #[test]
    fn values_found_inside_know_their_end_only_when_asked() {
        let bytes = encode(&sample());
        let v = RawValue::new(&bytes).unwrap();
        let b = v.get("b").unwrap();
        // Begins at `b` and runs to the end of the request ...
        assert_eq!(b.bytes.len(), bytes.len() - 6);
        // ... but is exactly `b` wherever it matters.
        assert_eq!(b.as_bytes(), &encode(sample().get("b").unwrap())[..]);
        assert_eq!(b.encoded_len(), b.as_bytes().len());
        assert_eq!(b, RawValue::new(b.as_bytes()).unwrap());
        assert_eq!(b.to_string(), sample().get("b").unwrap().to_string());
        assert_ne!(b, v.get("a").unwrap());
        let mut it = b.iter_array();
        assert_eq!(it.len(), 5);
        it.next();
        assert_eq!(it.len(), 4);
    }

    #[test]
    fn walks_report_the_encoded_length() {
        let bytes = encode(&sample());
        let v = RawValue::new(&bytes).unwrap();
        let mut keys = Vec::new();
        assert_eq!(
            walk_map(v, |k, x| {
                keys.push(String::from_utf8(k.to_vec()).unwrap());
                // Walk "b" ourselves, step over the others.
                if k == b"b" {
                    Some(walk_array(x, |_, _| None))
                } else {
                    None
                }
            }),
            bytes.len()
        );
        assert_eq!(keys, ["a", "b", "é", "big", "m"]);
        let b = v.get("b").unwrap();
        let mut seen = 0;
        assert_eq!(
            walk_array(b, |i, x| {
                seen += 1;
                assert_eq!(i, seen - 1);
                Some(x.encoded_len())
            }),
            b.as_bytes().len()
        );
        assert_eq!(seen, 5);
        let one = v.get("a").unwrap();
        assert_eq!(walk_map(one, |_, _| unreachable!()), 1);
        assert_eq!(walk_array(one, |_, _| unreachable!()), 1);
    }

    #[test]
    fn utf8_keys_floats_and_depth_are_checked_when_read() {
        // {"a": "\xc3(", "b": 1}
        let bytes = unhex("82a161a2c328a16201");
        let v = RawValue::new(&bytes).unwrap();
        assert_eq!(v.get("b").unwrap().as_i64(), Some(1));
        let bad = v.get("a").unwrap();
        assert_eq!(bad.kind(), Kind::Str);
        assert_eq!(bad.as_str(), None);
        assert_eq!(bad.str_bytes(), Some(&[0xc3, 0x28][..]));
        assert!(v.to_value().unwrap_err().to_string().contains("UTF-8"));
        // {1: nil, "a": NaN}
        let bytes = unhex("8201c0a161cb7ff8000000000000");
        let v = RawValue::new(&bytes).unwrap();
        let (k, _) = v.iter_map().next().unwrap();
        assert_eq!(k.kind(), Kind::Int);
        assert_eq!(v.get("a").unwrap().kind(), Kind::Float);
        assert_eq!(v.get("a").unwrap().as_f64(), None);
        assert!(v
            .to_value()
            .unwrap_err()
            .to_string()
            .contains("not a string"));
        let deep = [vec![0x91u8; 100_000], vec![0x90]].concat();
        let v = RawValue::new(&deep).unwrap();
        assert_eq!(v.item(0).unwrap().item(0).unwrap().len(), 1);
        assert!(v
            .to_value()
            .unwrap_err()
            .to_string()
            .contains("nested more than 128"));
        let ok = [vec![0x91u8; MAX_DEPTH - 1], vec![0x90]].concat();
        assert!(RawValue::new(&ok).unwrap().to_value().is_ok());
    }

    #[test]
    fn refuses_bad_framing() {
        for (bytes, why) in [
            ("c401ff", "bin"),
            ("91c401ff", "bin"),
            ("d40100", "ext"),
            ("81a161d40100", "ext"),
            ("c70101ff", "ext"),
            ("c1", "never used"),
            ("92c0", "truncated"),
            ("dd7fffffff", "truncated"),
            ("df7fffffff", "truncated"),
            ("81a161", "truncated"),
            ("a3616263c0", "trailing"),
            ("c0c0", "trailing"),
            ("", "truncated"),
            ("d9", "truncated"),
            ("d905", "truncated"),
            ("db7fffffff61", "truncated"),
            ("dbffffffff61", "truncated"),
            ("cd01", "truncated"),
            ("cb00", "truncated"),
            ("dc00", "truncated"),
            ("9fc0", "truncated"),
        ] {
            let err = RawValue::new(&unhex(bytes)).unwrap_err();
            assert!(err.to_string().contains(why), "{bytes}: {err}");
        }
    }

    /// Every prefix and every one- or two-byte change of a valid encoding is either refused or
    /// navigates without panicking, and whatever `RawValue::new` accepts the full decoder
    /// accepts too, but for what is left to the reader (UTF-8, key types, NaN, depth).
    #[test]
    fn mangled_input_never_panics() {
        let bytes = encode(&sample());
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        fn go(v: RawValue<'_>, n: &mut usize) {
            *n += 1;
            let _ = (v.kind(), v.as_str(), v.len(), v.is_truthy(), v.get("a"));
            let _ = (
                v.as_i64(),
                v.as_u64(),
                v.as_f64(),
                v.as_bool(),
                v.as_bytes(),
            );
            for x in v.iter_array() {
                go(x, n);
            }
            for (k, x) in v.iter_map() {
                go(k, n);
                go(x, n);
            }
            walk_map(v, |_, x| Some(x.encoded_len()));
            walk_array(v, |_, _| None);
        }
        for cut in 0..bytes.len() {
            assert!(RawValue::new(&bytes[..cut]).is_err(), "prefix {cut}");
        }
        for _ in 0..20_000 {
            let mut m = bytes.clone();
            let i = (rand() as usize) % m.len();
            m[i] = rand() as u8;
            if rand() % 4 == 0 {
                let j = (rand() as usize) % m.len();
                m[j] = rand() as u8;
            }
            let full = crate::msgpack::decode(&m);
            match RawValue::new(&m) {
                Ok(v) => {
                    go(v, &mut 0);
                    assert_eq!(v.as_bytes(), &m[..]);
                    if let Err(e) = &full {
                        assert!(
                            ["UTF-8", "not a string", "not JSON numbers", "nested"]
                                .iter()
                                .any(|w| e.message.contains(w)),
                            "{e}"
                        );
                    }
                    assert_eq!(v.to_value(), full);
                }
                Err(_) => assert!(full.is_err()),
            }
        }
    }
}
