//! `get`, `set`, `delete`, `list`: read and edit single entries, keys in Deno's syntax.
//!
//! Keys are parsed by [`crate::key_syntax`]; values are printed by
//! [`crate::value_display`] (Deno's console notation) or [`crate::value_json`] (`--json`,
//! described in `cli/FORMAT.md`).

use crate::error::CliError;
use crate::key_syntax::{decode_hex, parse_key};
use crate::value_display::{inspect, inspect_key, InspectOptions};
use crate::value_json::{self, key_json, raw_v8_json, value_json};
use stampkv::engine::Error as EngineError;
use stampkv::store::{ReadOnlyStore, Store};
use stampkv::{Key, Kv, KvError, KvOptions, KvValue, ListOptions, Selector, SetOptions, Value, Versionstamp};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

const KEY_HELP: &str =
    "Keys are written in Deno's syntax, e.g. '[\"users\", 42n, true, 1.5]'. Parts: strings \
('...', \"...\"), numbers (42, -0, 1e3, Infinity, NaN), bigints (42n), booleans, and bytes \
(new Uint8Array([1, 2]), Uint8Array(2) [ 1, 2 ] as Deno prints them, or Uint8Array.fromHex(\"0102\")). \
The typed JSON keys that --json prints are accepted too.";

/// Arguments of `stampkv get`.
#[derive(Debug, clap::Args)]
#[command(after_help = format!(
    "{KEY_HELP}\n\nThe value is printed as Deno's console.log shows it (Deno.inspect: a string in quotes, \
    long values across lines, containers deeper than 4 levels as [Object], 100 items at most; --full \
    shows everything), or with --json as one line of typed JSON (cli/FORMAT.md).\n\n\
    Exit status: 0 when the key has an entry; 1 when it has none (nothing on standard output, \
    `no entry for key ...` on standard error) and on any error."
))]
pub struct GetArgs {
    /// The database directory (must hold a stampkv database).
    #[arg(long, value_name = "DIR")]
    path: PathBuf,
    /// The key, e.g. '["users", 42n]'.
    #[arg(value_name = "KEY")]
    key: String,
    /// Print the entry (key, value, versionstamp) as one line of typed JSON.
    #[arg(long)]
    json: bool,
    /// Print the versionstamp on a line before the value.
    #[arg(long, conflicts_with = "json")]
    versionstamp: bool,
    /// Print the whole value: no depth limit, every item and every character.
    #[arg(long, conflicts_with = "json")]
    full: bool,
}

/// Runs `stampkv get`.
pub fn get(args: GetArgs) -> Result<(), CliError> {
    let key = parse_key_argument("KEY", &args.key)?;
    let kv = open_reader(&args.path)?;
    let entry = kv.get::<KvValue>(&key);
    close(kv)?;
    let entry = entry.map_err(|e| CliError::failed(format!("cannot read {}: {e}", inspect_key(&key))))?;
    let (Some(value), Some(versionstamp)) = (entry.value, entry.versionstamp) else {
        return Err(CliError::failed(format!("no entry for key {}", inspect_key(&key))));
    };
    let mut text = String::new();
    if args.json {
        text.push_str(&entry_json(&key, &value, &versionstamp));
    } else {
        if args.versionstamp {
            text.push_str(&versionstamp.to_hex());
            text.push('\n');
        }
        let options = if args.full { InspectOptions::FULL } else { InspectOptions::DENO };
        text.push_str(&show_value(&value, &options));
    }
    text.push('\n');
    print(text.as_bytes())
}

/// Arguments of `stampkv set`.
#[derive(Debug, clap::Args)]
#[command(after_help = format!(
    "{KEY_HELP}\n\nThe value is JSON by default ('{{\"name\": \"Ann\"}}', '42', '\"text\"'), read as \
    JSON.parse reads it. --typed takes the typed JSON that `get --json` prints under \"value\", which \
    holds every kind (bigint, Uint8Array, Map, Set, Date, RegExp, undefined, KvU64, ...). \
    On success the versionstamp of the commit is printed."
))]
#[command(group(clap::ArgGroup::new("kind").args(["json", "typed", "string", "u64", "bytes_hex", "bytes_file"])))]
pub struct SetArgs {
    /// The database directory (must hold a stampkv database unless --create is given).
    #[arg(long, value_name = "DIR")]
    path: PathBuf,
    /// The key, e.g. '["users", 42n]'.
    #[arg(value_name = "KEY")]
    key: String,
    /// The value (its kind is chosen by the flags below; absent with --bytes-file).
    #[arg(value_name = "VALUE", allow_hyphen_values = true, required_unless_present = "bytes_file")]
    value: Option<String>,
    /// VALUE is JSON (the default).
    #[arg(long)]
    json: bool,
    /// VALUE is typed JSON as `get --json` prints a value: '{"type":"bigint","value":"42"}'.
    #[arg(long)]
    typed: bool,
    /// VALUE is stored as a string, as it is.
    #[arg(long)]
    string: bool,
    /// VALUE is a Deno.KvU64: a decimal integer from 0 to 2^64-1 (a trailing 'n' is allowed).
    #[arg(long)]
    u64: bool,
    /// VALUE is a Uint8Array written as hex digits (whitespace ignored).
    #[arg(long)]
    bytes_hex: bool,
    /// The value is a Uint8Array holding this file's bytes ('-': standard input).
    #[arg(long, value_name = "FILE", conflicts_with = "value")]
    bytes_file: Option<PathBuf>,
    /// The entry expires this many milliseconds after the commit.
    #[arg(long, value_name = "MS")]
    expire_in: Option<u64>,
    /// Create the database if DIR does not exist or is empty.
    #[arg(long)]
    create: bool,
}

/// Runs `stampkv set`.
pub fn set(args: SetArgs) -> Result<(), CliError> {
    let key = parse_key_argument("KEY", &args.key)?;
    let value = set_value(&args)?;
    let kv =
        open(&args.path, if args.create { Open::CreateIfMissing } else { Open::ExistingOrSuggestCreate })?;
    let options = SetOptions { expire_in: args.expire_in.map(Duration::from_millis) };
    let result = kv.set_with(&key, &value, options);
    close(kv)?;
    let versionstamp =
        result.map_err(|e| CliError::failed(format!("cannot set {}: {e}", inspect_key(&key))))?;
    print(format!("{}\n", versionstamp.to_hex()).as_bytes())
}

/// The value `set` stores, from VALUE and the kind flags.
fn set_value(args: &SetArgs) -> Result<KvValue, CliError> {
    if let Some(file) = &args.bytes_file {
        let mut bytes = Vec::new();
        let read = if file.as_os_str() == "-" {
            io::stdin().read_to_end(&mut bytes).map(|_| ())
        } else {
            std::fs::read(file).map(|data| bytes = data)
        };
        read.map_err(|e| CliError::failed(format!("cannot read {}: {e}", file.display())))?;
        return Ok(KvValue::Bytes(bytes));
    }
    let text = args.value.as_deref().ok_or_else(|| CliError::failed("missing VALUE"))?;
    let bad_value = |message: String| CliError::failed(format!("invalid VALUE: {message}"));
    if args.string {
        return KvValue::from_value(&Value::String(text.to_owned())).map_err(|e| bad_value(e.to_string()));
    }
    if args.u64 {
        let digits = text.trim().strip_suffix('n').unwrap_or(text.trim());
        return digits
            .parse::<u64>()
            .map(KvValue::U64)
            .map_err(|_| bad_value(format!("{text:?} is not an integer from 0 to 18446744073709551615")));
    }
    if args.bytes_hex {
        let hex = text.trim();
        let hex = hex.strip_prefix("0x").unwrap_or(hex);
        return decode_hex(hex).map(KvValue::Bytes).map_err(bad_value);
    }
    let json = value_json::parse_json(text).map_err(bad_value)?;
    if args.typed {
        return value_json::typed_to_kv_value(json).map_err(bad_value);
    }
    KvValue::from_value(&value_json::plain_to_value(json)).map_err(|e| bad_value(e.to_string()))
}

/// Arguments of `stampkv delete`.
#[derive(Debug, clap::Args)]
#[command(after_help = format!(
    "{KEY_HELP}\n\nExit status: 0 when the entry was deleted; 1 when the key had no entry (unless \
    --force) and on any error."
))]
pub struct DeleteArgs {
    /// The database directory (must hold a stampkv database).
    #[arg(long, value_name = "DIR")]
    path: PathBuf,
    /// The key, e.g. '["users", 42n]'.
    #[arg(value_name = "KEY")]
    key: String,
    /// Succeed even when the key has no entry.
    #[arg(long, short)]
    force: bool,
}

/// Runs `stampkv delete`.
pub fn delete(args: DeleteArgs) -> Result<(), CliError> {
    let key = parse_key_argument("KEY", &args.key)?;
    let kv = open(&args.path, Open::Existing)?;
    let result = delete_entry(&kv, &key, args.force);
    close(kv)?;
    result
}

fn delete_entry(kv: &Kv, key: &Key, force: bool) -> Result<(), CliError> {
    let failed = |e: KvError| CliError::failed(format!("cannot delete {}: {e}", inspect_key(key)));
    if key.is_empty() {
        return Err(failed(KvError::EmptyKey));
    }
    let exists = kv.get::<KvValue>(key).map_err(failed)?.exists();
    if !exists && !force {
        return Err(CliError::failed(format!("no entry for key {}", inspect_key(key))));
    }
    kv.delete(key).map_err(failed)
}

/// Arguments of `stampkv list`.
#[derive(Debug, clap::Args)]
#[command(after_help = format!(
    "{KEY_HELP}\n\nWithout --prefix, --start or --end every entry is listed. --start alone lists from \
    that key on, --end alone up to it; --prefix may be narrowed by one of them. Ranges, order and \
    errors are Deno's kv.list(): --start is inclusive, --end exclusive, a prefix never matches itself.\n\n\
    Each entry is printed on one line as `KEY => VALUE` in Deno's console notation (with nothing \
    elided), preceded by its versionstamp with --versionstamp; with --json each line is the entry \
    in typed JSON (cli/FORMAT.md). Entries are read from one consistent snapshot and printed as \
    they are read."
))]
pub struct ListArgs {
    /// The database directory (must hold a stampkv database).
    #[arg(long, value_name = "DIR")]
    path: PathBuf,
    /// List the keys that extend this prefix, e.g. '["users"]'.
    #[arg(long, value_name = "KEY")]
    prefix: Option<String>,
    /// Start at this key (inclusive).
    #[arg(long, value_name = "KEY")]
    start: Option<String>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    end: Option<String>,
    /// List in descending key order.
    #[arg(long)]
    reverse: bool,
    /// List at most N entries.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print each entry as one line of typed JSON.
    #[arg(long)]
    json: bool,
    /// Print only the keys.
    #[arg(long)]
    keys_only: bool,
    /// Print each entry's versionstamp before it.
    #[arg(long, conflicts_with = "json")]
    versionstamp: bool,
}

/// Runs `stampkv list`.
pub fn list(args: ListArgs) -> Result<(), CliError> {
    let parse =
        |name: &str, text: &Option<String>| text.as_deref().map(|t| parse_key_argument(name, t)).transpose();
    let (prefix, start, end) =
        (parse("--prefix", &args.prefix)?, parse("--start", &args.start)?, parse("--end", &args.end)?);
    // Deno needs a prefix unless both start and end are given: the whole key space is the
    // prefix [] (which every key but [] extends).
    let prefix = match (&prefix, &start, &end) {
        (None, Some(_), Some(_)) => None,
        (None, _, _) => Some(Key::new()),
        (Some(p), _, _) => Some(p.clone()),
    };
    let selector = Selector { prefix, start, end };
    if args.limit == Some(0) {
        return Err(CliError::failed("--limit must be a positive integer"));
    }
    let options = ListOptions { limit: args.limit, reverse: args.reverse, ..ListOptions::default() };
    let kv = open_reader(&args.path)?;
    let result = list_entries(&kv, &selector, &options, &args);
    close(kv)?;
    result
}

fn list_entries(
    kv: &Kv<ReadOnlyStore>,
    selector: &Selector,
    options: &ListOptions,
    args: &ListArgs,
) -> Result<(), CliError> {
    let entries =
        kv.list::<KvValue>(selector, options).map_err(|e| CliError::failed(format!("cannot list: {e}")))?;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut last_key: Option<Key> = None;
    for entry in entries {
        let entry = entry.map_err(|e| {
            let after = last_key.as_ref().map(|k| format!(" after {}", inspect_key(k))).unwrap_or_default();
            CliError::failed(format!("cannot read the entry{after}: {e}"))
        })?;
        let mut line = String::new();
        if args.json {
            if args.keys_only {
                line.push_str(&key_json(&entry.key));
            } else {
                line.push_str(&entry_json(&entry.key, &entry.value, &entry.versionstamp));
            }
        } else {
            if args.versionstamp {
                line.push_str(&entry.versionstamp.to_hex());
                line.push(' ');
            }
            line.push_str(&inspect_key(&entry.key));
            if !args.keys_only {
                line.push_str(" => ");
                line.push_str(&show_value(&entry.value, &InspectOptions::ONE_LINE));
            }
        }
        line.push('\n');
        if !write_output(&mut out, line.as_bytes())? {
            return Ok(());
        }
        last_key = Some(entry.key);
    }
    match out.flush() {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(CliError::failed(format!("cannot write: {e}")))
        }
        _ => Ok(()),
    }
}

/// A stored value in Deno's console notation; V8 data `Value` cannot hold is described.
fn show_value(value: &KvValue, options: &InspectOptions) -> String {
    match value.to_value() {
        Ok(value) => inspect(&value, options),
        Err(e) => format!("[undecodable V8 value, {} bytes: {e}]", kv_value_len(value)),
    }
}

fn kv_value_len(value: &KvValue) -> usize {
    match value {
        KvValue::V8(bytes) | KvValue::Bytes(bytes) => bytes.len(),
        KvValue::U64(_) => 8,
    }
}

/// One entry in typed JSON: `{"key":[...],"value":{...},"versionstamp":"..."}`.
fn entry_json(key: &Key, value: &KvValue, versionstamp: &Versionstamp) -> String {
    let value = match (value.to_value(), value) {
        (Ok(decoded), _) => value_json(&decoded),
        (Err(e), KvValue::V8(bytes)) => raw_v8_json(bytes, &e.to_string()),
        (Err(e), _) => raw_v8_json(&[], &e.to_string()),
    };
    format!(r#"{{"key":{},"value":{value},"versionstamp":"{}"}}"#, key_json(key), versionstamp.to_hex())
}

fn parse_key_argument(name: &str, text: &str) -> Result<Key, CliError> {
    parse_key(text).map_err(|e| CliError::failed(format!("invalid {name}: {e}")))
}

/// Writes to standard output; `Ok(false)` when the reader has gone (a closed pipe, as with
/// `| head`), which ends the command quietly.
fn write_output(out: &mut impl Write, bytes: &[u8]) -> Result<bool, CliError> {
    match out.write_all(bytes) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(CliError::failed(format!("cannot write: {e}"))),
    }
}

fn print(bytes: &[u8]) -> Result<(), CliError> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if write_output(&mut out, bytes)? {
        match out.flush() {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                return Err(CliError::failed(format!("cannot write: {e}")));
            }
            _ => {}
        }
    }
    Ok(())
}

/// How a command opens its database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// The directory must hold a database: nothing is created.
    Existing,
    /// As `Existing`, and a refusal suggests `--create`.
    ExistingOrSuggestCreate,
    /// A missing or empty directory becomes a new database.
    CreateIfMissing,
}

/// Opens the database in `path`, refusing (before touching anything) a directory that does
/// not hold one, unless asked to create it.
fn open(path: &Path, mode: Open) -> Result<Kv, CliError> {
    check_directory(path, mode)?;
    open_engine(path, mode == Open::CreateIfMissing)
}

/// Opens the existing database in `path` to read only: nothing is written to it, and other
/// readers may have it open too.
fn open_reader(path: &Path) -> Result<Kv<ReadOnlyStore>, CliError> {
    check_directory(path, Open::Existing)?;
    Kv::open_read_only(path, KvOptions::default()).map_err(|e| open_error(path, e))
}

/// Refuses a path that is not a database directory (or, when creating, an empty one).
fn check_directory(path: &Path, mode: Open) -> Result<(), CliError> {
    let shown = path.display();
    let create = mode == Open::CreateIfMissing;
    let hint = if mode == Open::ExistingOrSuggestCreate { " (--create makes a new database)" } else { "" };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if !create {
                return Err(CliError::failed(format!(
                    "no database at {shown}: the directory does not exist{hint}"
                )));
            }
        }
        Err(e) => return Err(CliError::failed(format!("cannot open {shown}: {e}"))),
        Ok(metadata) if !metadata.is_dir() => {
            return Err(CliError::failed(format!("{shown} is not a database directory (it is a file)")));
        }
        Ok(_) if !path.join("CURRENT").exists() => {
            let empty = std::fs::read_dir(path)
                .map_err(|e| CliError::failed(format!("cannot open {shown}: {e}")))?
                .next()
                .is_none();
            let refusal = match (create, empty) {
                (true, true) => None,
                (true, false) => Some(format!("{shown} is not empty and holds no stampkv database")),
                (false, true) => Some(format!("no database at {shown}: the directory is empty{hint}")),
                (false, false) => Some(format!("{shown} holds no stampkv database (it has no CURRENT file)")),
            };
            if let Some(message) = refusal {
                return Err(CliError::failed(message));
            }
        }
        Ok(_) => {}
    }
    Ok(())
}

fn open_engine(path: &Path, create: bool) -> Result<Kv, CliError> {
    let mut options = KvOptions::default();
    options.engine.create_if_missing = create;
    Kv::open(path, options).map_err(|e| open_error(path, e))
}

/// The one line for a database that cannot be opened.
fn open_error(path: &Path, error: KvError) -> CliError {
    match error {
        KvError::Storage(e)
            if matches!(e.downcast_ref::<EngineError>(), Some(EngineError::Locked { .. })) =>
        {
            let holder = match e.downcast_ref::<EngineError>() {
                Some(EngineError::Locked { holder, .. }) => *holder,
                _ => None,
            };
            CliError::failed(format!(
                "the database in {} is in use by another process ({})",
                path.display(),
                crate::engine_error::holder_text(holder)
            ))
        }
        e => CliError::failed(format!("cannot open the database in {}: {e}", path.display())),
    }
}

/// Closes the database, syncing and sealing its log.
fn close<S: Store>(kv: Kv<S>) -> Result<(), CliError> {
    kv.close().map_err(|e| CliError::failed(format!("cannot close the database: {e}")))
}
