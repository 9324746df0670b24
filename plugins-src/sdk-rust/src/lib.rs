//! Guest SDK for modelserving WebAssembly plugins (ABI v1, v2 and v3).
//!
//! A plugin is a `cdylib` crate built for `wasm32-unknown-unknown`. It writes ordinary Rust
//! functions that take a [`Request`] and lets [`export_plugin!`] generate the module's
//! exports:
//!
//! ```ignore
//! use modelserving_plugin::{export_plugin, PodPatch, Request};
//!
//! fn on_pod_create(req: &Request) -> Result<PodPatch, String> {
//!     if req.role_name == "forbidden" {
//!         return Err("this role may not be labelled".into()); // {"error": ...}
//!     }
//!     let mut patch = PodPatch::new(req.pod());
//!     patch.merge_labels([("example.com/team", "ml")]);
//!     Ok(patch)                                               // {"patch": [...]}
//! }
//!
//! export_plugin! { on_pod_create: on_pod_create }
//! ```
//!
//! What the SDK provides:
//!
//! * [`Value`] and the [`msgpack`] codec: JSON-shaped data, encoded byte-for-byte as the
//!   host's Python `msgpack.packb(obj, use_bin_type=True)` encodes it;
//! * [`Request`]: the request of one hook call, checked and read lazily: the Pod and the
//!   ModelServing stay undecoded [`RawValue`]s borrowed from the request bytes;
//! * [`RawValue`] ([`raw`]): a zero-copy msgpack view: navigate (`get`, `iter_array`,
//!   `iter_map`, `as_str`, ...) without decoding, or materialize a subtree with `to_value`;
//! * [`PodPatch`] and [`Op`]: JSON Patch operations with the same semantics as the host's
//!   Python `PodPatch`, so a plugin gives identical patches in either runtime;
//! * [`config::Fields`]: strict config reading with the host's conventions (unknown fields
//!   refused, nil means absent, no type coercion);
//! * [`names`]: Kubernetes name rules; [`log`]: the host's log.
//!
//! An `on_pod_ready` function may return [`Observation`]s: a v2 host takes them from the
//! response, a v1 host from `observe` log lines (the SDK writes whichever the request's
//! `abiVersion` asks for). An `on_serving_group_change` function ([`group`], ABI v3) is given a
//! [`GroupRequest`] (a ServingGroup's Pods) and returns the [`Object`]s (ConfigMaps) the plugin
//! owns in the group; a plugin with it exports the marker `modelserving_abi_v3` too.
//!
//! The ABI in short: the module exports `memory`, `modelserving_abi_v1`, `modelserving_abi_v2`
//! (and `modelserving_abi_v3` with the ServingGroup hook), `ms_alloc`, `ms_free` and
//! `ms_on_pod_create` / `ms_on_pod_ready` / `ms_validate_config` / `ms_on_serving_group_change`
//! as implemented; it imports
//! only `modelserving.log`. The host writes the msgpack request into memory from `ms_alloc`,
//! calls the hook with `(ptr, len)` and gets `ptr << 32 | len` of the msgpack response back
//! (length 0: no change / config valid). Every call runs in a fresh instance, so memory is
//! never freed (see the `bump-allocator` feature).

#[cfg(all(target_arch = "wasm32", feature = "bump-allocator"))]
mod alloc;
pub mod config;
#[doc(hidden)]
pub mod export;
pub mod group;
pub mod log;
pub mod msgpack;
pub mod names;
pub mod patch;
pub mod raw;
pub mod request;
pub mod response;
pub mod value;

pub use export::{IntoObjects, IntoPatch};
pub use group::{GroupPod, GroupRequest, Object};
pub use patch::{escape, Op, OpKind, PodPatch};
pub use raw::{Kind, RawValue};
pub use export::IntoObservations;
pub use request::{
    Hook, Request, ABI_VERSION, ABI_VERSION_GROUP_HOOK, ABI_VERSION_MIN,
    ABI_VERSION_WITHOUT_GROUP_HOOK,
};
pub use response::{
    error_response, objects_response, observations_response, patch_response, Observation,
    Response,
};
pub use value::Value;

/// Glue for [`export_plugin!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::export::*;
}
