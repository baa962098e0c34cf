//! The libfabric provider (feature `ofi`). Work in progress.
