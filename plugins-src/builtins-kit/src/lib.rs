//! Shared helpers of the built-in plugins (filled in below).
