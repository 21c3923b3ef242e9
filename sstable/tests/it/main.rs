//! Integration tests of the table layer (one test binary; modules by topic).

mod builder;
mod cache;
mod common;
mod corruption;
mod filter;
mod footer;
mod model;
mod properties;
