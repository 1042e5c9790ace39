//! The data plane of ddflow, without Python.
//!
//! One module per concept, as in differential dataflow:
//!
//! * [`lattice`]: times of any width with product and lexicographic coordinates, their join,
//!   meet and `advance_by`, and antichains (frontiers);
//! * [`consolidation`]: updates with equal `(data, time)` added up;
//! * [`group`]: the group functions (count, sum, min, max, distinct) of a key's group at a time;
//! * [`hash`]: a fast hasher for maps of times;
//! * [`history`]: updates `(values, time, diff)` as columns, consolidated and advanced;
//! * [`interesting`]: a key's interesting times (lubs of its times with new ones);
//! * [`trace`]: arrangements, sorted batches of every key's updates merged by a spine and read
//!   by galloping cursors;
//! * [`progress`]: pointstamps, path summaries and the frontiers they imply;
//! * [`expr`]: column expressions over rows of integers, as a loop region evaluates them;
//! * [`region`]: loop regions, subgraphs of built-in operators with a scheduler of their own;
//! * [`reduce`]: the reduce family's state and step (interesting times, evaluation, compaction);
//! * [`row`]: an order-preserving row encoding of records of any type (keys as bytes).
//!
//! Nothing here knows of Python: the binding crate (`ddflow-native`) converts at the boundary,
//! and every invariant is tested here with `cargo test`.

pub mod consolidation;
pub mod expr;
pub mod group;
pub mod hash;
pub mod history;
pub mod interesting;
pub mod lattice;
pub mod progress;
pub mod reduce;
pub mod region;
pub mod row;
pub mod trace;

/// The version of the core, as the Python package checks it against its own.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
