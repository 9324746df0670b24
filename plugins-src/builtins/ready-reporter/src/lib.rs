//! `ready-reporter`: placeholder until the plugin is written.
