//! Logging through the host's `modelserving.log` import (the only import a module may have).
//!
//! On other targets (unit tests) messages are kept per thread; [`take_logs`] returns them.

/// The level the host logs a message at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

#[cfg(target_arch = "wasm32")]
mod host {
    #[link(wasm_import_module = "modelserving")]
    extern "C" {
        #[link_name = "log"]
        pub fn log(level: i32, ptr: i32, len: i32);
    }
}

/// Send `message` (UTF-8) to the host's log at `level`.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    // SAFETY: the host only reads `len` bytes at `ptr`, which `message` owns for the call.
    unsafe {
        host::log(
            level as i32,
            message.as_ptr() as usize as i32,
            message.len() as i32,
        );
    }
    #[cfg(not(target_arch = "wasm32"))]
    LOGS.with(|logs| logs.borrow_mut().push((level, message.to_owned())));
}

pub fn debug(message: impl AsRef<str>) {
    log(Level::Debug, message.as_ref());
}

pub fn info(message: impl AsRef<str>) {
    log(Level::Info, message.as_ref());
}

pub fn warn(message: impl AsRef<str>) {
    log(Level::Warn, message.as_ref());
}

pub fn error(message: impl AsRef<str>) {
    log(Level::Error, message.as_ref());
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static LOGS: std::cell::RefCell<Vec<(Level, String)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The messages logged on this thread since the last call (not on wasm32, where they go to the
/// host).
#[cfg(not(target_arch = "wasm32"))]
pub fn take_logs() -> Vec<(Level, String)> {
    LOGS.with(|logs| std::mem::take(&mut *logs.borrow_mut()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_are_kept_for_tests() {
        let _ = take_logs();
        info("hello");
        error(format!("n={}", 2));
        assert_eq!(
            take_logs(),
            vec![(Level::Info, "hello".into()), (Level::Error, "n=2".into())]
        );
        assert!(take_logs().is_empty());
    }
}
