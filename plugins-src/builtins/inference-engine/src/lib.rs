//! `inference-engine`: placeholder until the plugin is written.
