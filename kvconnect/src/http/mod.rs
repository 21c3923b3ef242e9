//! The HTTP side every KV Connect front end shares (feature `http`): the network tier's
//! settings and accept loop (bounded connections, timeouts, graceful shutdown), request
//! checks (token in constant time, protocol version, database id, body limits), Deno's
//! request limits, error answers, the metadata exchange's helpers, and the log format.

mod config;
mod connections;
mod error;
mod limits;
mod listen;
pub mod logging;
mod metadata;
mod request;

pub use config::NetConfig;
pub use connections::{Connection, ConnectionWatchSlot};
pub use error::{bad, method_not_allowed, not_found, unavailable, HttpError};
pub use limits::{
    check_read, MAX_READ_ENTRIES, MAX_READ_KEY_BYTES, MAX_READ_LIMIT, MAX_READ_RANGES, MAX_WATCHED_KEYS,
    TOO_MANY_WATCHED_KEYS,
};
pub use listen::serve_router;
pub use metadata::{negotiate_version, rfc3339, version1_host};
pub use request::{check_data_path, check_token, checked_body, decode, drain, protobuf, read_limited};
