//! `accelerator`: placeholder until the plugin is written.
