//! What the built-ins that write a ServingGroup's files share (`hccl-ranktable`,
//! `entry-address-file`): their config's mount path, ConfigMap suffix and container
//! ([`GroupFileConfig`]), the rules of a file name and of an IP as they read one, and the
//! optional ConfigMap volume that shows the files in a Pod ([`PodEdit::add_config_map_files`]).
//!
//! The twin of the host's `modelserving.plugins.builtins.group_files` and of
//! `PodEdit.add_config_map_files`: the same rules, the same refusals (with the Python
//! validators' texts after the field's location), the same patch operations.

use modelserving_plugin::config::Fields;
use modelserving_plugin::{Object, Value};

use crate::{is_dns1123_label, PodEdit};

/// Whether `text` is taken as an IP: 2 to 45 of `0-9 a-f A-F . :` (IPv4 or IPv6 as Kubernetes
/// writes them; not checked further).
pub fn is_ip(text: &str) -> bool {
    (2..=45).contains(&text.len())
        && text
            .bytes()
            .all(|c| c.is_ascii_hexdigit() || c == b'.' || c == b':')
}

/// Why `name` cannot be a ConfigMap key shown as a file (`None` when it can): 1 to 253 of
/// `- . _ a-z A-Z 0-9`, and not `.` or `..`.
pub fn file_name_problem(name: &str) -> Option<String> {
    let ok = (1..=253).contains(&name.len())
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
        && name != "."
        && name != "..";
    if ok {
        return None;
    }
    Some(format!(
        "'{name}' is not a file name (letters, digits, '-', '_' and '.')"
    ))
}

/// Why `path` cannot be where a volume is mounted (`None` when it can): absolute, without `:`
/// or NUL.
pub fn mount_path_problem(path: &str) -> Option<String> {
    if path.starts_with('/') && !path.contains('\0') && !path.contains(':') {
        return None;
    }
    Some(format!("'{path}' is not an absolute path without ':'"))
}

/// Why `suffix` cannot end a ConfigMap's name (`None` when it can): a DNS-1123 label of at most
/// 40 characters.
pub fn suffix_problem(suffix: &str) -> Option<String> {
    if suffix.len() <= 40 && is_dns1123_label(suffix) {
        return None;
    }
    Some(format!(
        "'{suffix}' is not a name suffix (at most 40 lower-case letters, digits and '-')"
    ))
}

/// The config fields both file-writing built-ins have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFileConfig {
    /// The folder the files appear in.
    pub mount_path: String,
    /// The ConfigMap is `<servingGroup>-<suffix>`, the volume `<suffix>`.
    pub config_map_suffix: String,
    /// The container to mount them in, by name (`None`: the first one).
    pub container: Option<String>,
}

/// The string field `name` (`default` when absent), refused when `problem` says so: the
/// field's location, then the problem.
pub fn checked_str(
    f: &mut Fields<'_>,
    name: &str,
    default: &str,
    problem: fn(&str) -> Option<String>,
) -> Result<String, String> {
    let value = f.str(name)?.unwrap_or(default);
    match problem(value) {
        None => Ok(value.to_owned()),
        Some(why) => Err(format!("{}: {why}", f.loc_of(name))),
    }
}

impl GroupFileConfig {
    /// Read `mountPath`, `configMapSuffix` and `container` from `f` (the defaults are checked
    /// too, as the host's models validate them).
    pub fn read(
        f: &mut Fields<'_>,
        default_mount_path: &str,
        default_suffix: &str,
    ) -> Result<GroupFileConfig, String> {
        Ok(GroupFileConfig {
            mount_path: checked_str(f, "mountPath", default_mount_path, mount_path_problem)?,
            config_map_suffix: checked_str(f, "configMapSuffix", default_suffix, suffix_problem)?,
            container: f.str("container")?.map(str::to_owned),
        })
    }

    /// The ServingGroup's ConfigMap: `<servingGroup>-<configMapSuffix>`.
    pub fn config_map_name(&self, serving_group: &str) -> String {
        let mut name =
            String::with_capacity(serving_group.len() + 1 + self.config_map_suffix.len());
        name.push_str(serving_group);
        name.push('-');
        name.push_str(&self.config_map_suffix);
        name
    }
}

/// The owned ConfigMap a ServingGroup hook returns: `name` with `data` (a key given twice keeps
/// its first position and its last value, as in a Python dict).
pub fn config_map<K: Into<String>, V: Into<String>>(
    name: impl Into<String>,
    data: impl IntoIterator<Item = (K, V)>,
) -> Object {
    let mut object = Object::config_map(name);
    for (k, v) in data {
        object.set_data(k, v);
    }
    object
}

impl PodEdit {
    /// `add_volume` of the optional ConfigMap `config_map` as the volume `volume`, each
    /// `(key, file)` of `files` shown as that file under `mount_path`.
    pub fn add_config_map_files(
        &mut self,
        container: usize,
        volume: &str,
        config_map: &str,
        files: &[(&str, &str)],
        mount_path: &str,
    ) -> Result<(), String> {
        let items = files
            .iter()
            .map(|(key, path)| Value::map([("key", *key), ("path", *path)]));
        let source = Value::map([
            ("name", Value::from(config_map)),
            ("optional", Value::Bool(true)),
            ("items", Value::array(items)),
        ]);
        let volume = Value::map([("name", Value::from(volume)), ("configMap", source)]);
        self.add_volume(container, volume, mount_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::F;

    #[test]
    fn ips() {
        for ok in ["10.0.0.1", "::", "fe80::1", "FE80::A", &"1".repeat(45)] {
            assert!(is_ip(ok), "{ok}");
        }
        for bad in [
            "",
            "1",
            "10.0.0.1 ",
            "g::1",
            "1.2.3.4/8",
            "١٢",
            &"1".repeat(46),
        ] {
            assert!(!is_ip(bad), "{bad}");
        }
    }

    #[test]
    fn names_and_paths() {
        assert_eq!(file_name_problem("hccl.json"), None);
        assert_eq!(file_name_problem("a-b_c.D9"), None);
        for bad in ["", ".", "..", "a/b", "a b", "é", &"a".repeat(254)] {
            assert!(file_name_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(file_name_problem(&"a".repeat(253)), None);
        assert_eq!(
            file_name_problem("a/b").unwrap(),
            "'a/b' is not a file name (letters, digits, '-', '_' and '.')"
        );
        assert_eq!(mount_path_problem("/etc/x/"), None);
        for bad in ["", "etc", "/a:b", "/a\0"] {
            assert!(mount_path_problem(bad).is_some(), "{bad:?}");
        }
        assert_eq!(suffix_problem("rank-table"), None);
        assert_eq!(suffix_problem(&"a".repeat(40)), None);
        for bad in ["", "A", "-a", "a.b", &"a".repeat(41)] {
            assert!(suffix_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn reads_the_shared_fields() {
        let config = Value::map([("mount_path", "/m"), ("container", "engine")]);
        let mut f = Fields::config(&config).unwrap();
        let read = GroupFileConfig::read(&mut f, "/default", "files").unwrap();
        f.finish().unwrap();
        assert_eq!(
            read,
            GroupFileConfig {
                mount_path: "/m".to_owned(),
                config_map_suffix: "files".to_owned(),
                container: Some("engine".to_owned()),
            }
        );
        assert_eq!(read.config_map_name("llama-0"), "llama-0-files");
        let config = Value::map([("configMapSuffix", "Bad")]);
        let mut f = Fields::config(&config).unwrap();
        assert_eq!(
            GroupFileConfig::read(&mut f, "/m", "x").unwrap_err(),
            "config.configMapSuffix: 'Bad' is not a name suffix (at most 40 lower-case letters, digits and '-')"
        );
        // A default is checked too.
        let mut f = Fields::config(&Value::Nil).unwrap();
        assert!(GroupFileConfig::read(&mut f, "relative", "x").is_err());
    }

    #[test]
    fn config_maps_and_their_volume() {
        let object = config_map("g-0-x", [("a", "1"), ("b", "2"), ("a", "3")]);
        assert_eq!(
            object.data,
            vec![
                ("a".to_owned(), "3".to_owned()),
                ("b".to_owned(), "2".to_owned())
            ]
        );
        let pod = Value::map([(
            "spec",
            Value::map([("containers", Value::array([Value::map([("name", "c")])]))]),
        )]);
        let mut edit = PodEdit::new(pod);
        edit.add_config_map_files(
            0,
            "files",
            "g-0-files",
            &[("k", "f"), ("k.json", "f.json")],
            "/etc/f",
        )
        .unwrap();
        let items = Value::array([
            Value::map([("key", "k"), ("path", "f")]),
            Value::map([("key", "k.json"), ("path", "f.json")]),
        ]);
        let volume = Value::map([
            ("name", Value::from("files")),
            (
                "configMap",
                Value::map([
                    ("name", Value::from("g-0-files")),
                    ("optional", Value::Bool(true)),
                    ("items", items),
                ]),
            ),
        ]);
        assert_eq!(
            edit.get(&[F("spec"), F("volumes")]),
            Some(&Value::array([volume]))
        );
        assert_eq!(
            edit.ops()
                .iter()
                .map(|o| o.path.as_str())
                .collect::<Vec<_>>(),
            ["/spec/volumes", "/spec/containers/0/volumeMounts"]
        );
    }
}
