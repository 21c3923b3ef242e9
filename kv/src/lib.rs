//! stampkv: the Deno KV layer (not yet built; see the engine crate).
