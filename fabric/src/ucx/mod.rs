//! The UCX provider (feature `ucx`). Work in progress.
