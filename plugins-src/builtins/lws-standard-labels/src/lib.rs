//! `lws-standard-labels`: placeholder until the plugin is written.
