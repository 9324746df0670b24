//! Replays the shared ABI vectors of this plugin (`abi/vectors/hccl-ranktable-*.json`, made from the
//! native Python built-in by `tests/vectors.py`; or the directory in
//! `MODELSERVING_ABI_VECTORS`) through exactly the code the module's exports run.

#[test]
fn abi_vectors() {
    let replayed = builtins_kit::testing::replay_vectors(
        hccl_ranktable::NAME,
        hccl_ranktable::modelserving_call,
    );
    eprintln!(
        "abi_vectors: {replayed} vectors of {} replayed",
        hccl_ranktable::NAME
    );
}
