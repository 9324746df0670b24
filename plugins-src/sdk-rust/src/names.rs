//! Kubernetes name rules as predicates, the same as the host's `modelserving.api.names`, so a
//! plugin refuses in its config what the API server would refuse later.

/// One DNS-1123 label pattern `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (no length limit; see callers).
fn is_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

/// Lower-case DNS labels joined by dots, at most 253 characters (e.g. a RuntimeClass name).
pub fn is_dns1123_subdomain(value: &str) -> bool {
    !value.is_empty() && value.len() <= 253 && value.split('.').all(is_label_shape)
}

/// A label or annotation key: an optional DNS-subdomain prefix and `/`, then a name of at most
/// 63 characters matching `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
pub fn is_qualified_name(value: &str) -> bool {
    let name = match value.rfind('/') {
        Some(slash) => {
            if !is_dns1123_subdomain(&value[..slash]) {
                return false;
            }
            &value[slash + 1..]
        }
        None => value,
    };
    let b = name.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) if b.len() <= 63 => {
            alnum(first)
                && alnum(last)
                && b.iter()
                    .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// An environment variable name: `^[-._a-zA-Z][-._a-zA-Z0-9]*$` (what the API server accepts).
pub fn is_env_var_name(value: &str) -> bool {
    let b = value.as_bytes();
    let ok = |c: &u8| c.is_ascii_alphabetic() || matches!(c, b'-' | b'.' | b'_');
    match b.first() {
        Some(first) => ok(first) && b.iter().all(|c| ok(c) || c.is_ascii_digit()),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains() {
        for ok in ["a", "gvisor", "kata-qemu", "a.b.c", "0", &"a".repeat(253)] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for bad in [
            "",
            "A",
            "-a",
            "a-",
            "a..b",
            ".a",
            "a.",
            "a_b",
            "é",
            &"a".repeat(254),
            "a/b",
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn qualified_names() {
        for ok in [
            "a",
            "A",
            "a.b_c-D",
            "example.com/Key",
            "a/b",
            &"x".repeat(63),
        ] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "Example.com/a",
            "a/b/c",
            "-a",
            "a_",
            &"x".repeat(64),
            "a b",
            "é",
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }

    #[test]
    fn env_var_names() {
        for ok in ["A", "_a", "-", ".x9", "a.b-c_D1"] {
            assert!(is_env_var_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A B", "A=B", "é", "A\n"] {
            assert!(!is_env_var_name(bad), "{bad}");
        }
    }
}
