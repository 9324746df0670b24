//! `rdma-network`: placeholder until the plugin is written.
