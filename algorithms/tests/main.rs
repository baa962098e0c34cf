//! The algorithms' tests, in one binary so that the algorithms are
//! compiled for each transport once, not once per file. Each module is a
//! file of its own (`tests/NAME.rs`); a multi-process case names itself by
//! its module path (`catena_testkit::test_name`), which its ranks run.

mod common;
mod split_reference;

mod alltoall;
mod async_runtime;
mod bulk;
mod chain_shape;
mod collectives;
mod comm;
mod concurrent;
mod create_group;
mod fuzz_host;
mod fuzz_split;
mod hierarchy;
mod host;
mod levels;
mod shift;
mod split;
mod torus_trees;
mod tree_pipeline;
