//! `dump` and `load`: a lossless, line-oriented text form of a whole database (the format
//! is in `cli/FORMAT.md`, section "dump format").

use crate::error::CliError;
use crate::progress::Progress;
use crate::transfer::dumpfile::{DumpReader, DumpWriter, Header, Record};
use crate::transfer::target;
use stampkv::store::Store;
use stampkv::Kv;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::PathBuf;

/// Arguments of `stampkv dump`.
#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    #[command(flatten)]
    location: target::Location,
    /// Write the dump to this file instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Leave out the versionstamps (a load then gives every entry a new one).
    #[arg(long)]
    no_versionstamps: bool,
    /// Leave out the expiry times (a load then keeps every entry until it is deleted).
    #[arg(long)]
    no_expiry: bool,
    /// Leave out the queued messages.
    #[arg(long)]
    no_queue: bool,
}

/// Arguments of `stampkv load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    /// The dump to load (`-`: standard input).
    file: PathBuf,
    /// The database: a directory (created if missing or empty), or a prefix on etcd.
    #[command(flatten)]
    location: target::Location,
    #[command(flatten)]
    write: target::WriteOptions,
}

/// A one-line report on standard error, shown on a terminal only (like the progress bar).
pub(crate) fn report(text: &str) {
    if io::stderr().is_terminal() {
        eprintln!("{text}");
    }
}

/// Runs `stampkv dump`.
pub fn dump(args: DumpArgs) -> Result<(), CliError> {
    match args.location.open_to_read()? {
        target::Source::Dir(kv) => dump_from(kv, &args),
        target::Source::Etcd(kv) => dump_from(kv, &args),
    }
}

fn dump_from<S: Store>(kv: Kv<S>, args: &DumpArgs) -> Result<(), CliError> {
    let name = args.location.name();
    let snapshot = kv.bulk_snapshot();
    let header = Header {
        versionstamps: !args.no_versionstamps,
        expiry: !args.no_expiry,
        queue: !args.no_queue,
        last_versionstamp: (!args.no_versionstamps).then(|| snapshot.last_versionstamp()),
    };
    let to_file = args.output.as_ref().filter(|p| p.as_os_str() != "-");
    let out: Box<dyn Write> = match to_file {
        Some(file) => Box::new(
            File::create(file)
                .map_err(|e| CliError::failed(format!("cannot create {}: {e}", file.display())))?,
        ),
        None => Box::new(io::stdout().lock()),
    };
    let progress = Progress::new("dumping", None);
    let result = (|| -> Result<(u64, u64), String> {
        let writing = |e: io::Error| format!("writing the dump: {e}");
        let mut writer = DumpWriter::new(BufWriter::with_capacity(1 << 20, out), header).map_err(writing)?;
        for entry in snapshot.entries() {
            let entry = entry.map_err(|e| format!("reading {name}: {e}"))?;
            writer.entry(&entry).map_err(writing)?;
            progress.advance(1);
        }
        if header.queue {
            for message in snapshot.messages() {
                let message = message.map_err(|e| format!("reading the queue of {name}: {e}"))?;
                writer.message(&message).map_err(writing)?;
                progress.advance(1);
            }
        }
        let counts = (writer.entries(), writer.messages());
        let out = writer.finish().map_err(writing)?;
        let file = out.into_inner().map_err(|e| writing(e.into_error()))?;
        drop(file);
        Ok(counts)
    })();
    progress.finish();
    drop(snapshot);
    let closed = target::close(kv, &name);
    let (entries, messages) = match result {
        Ok(counts) => counts,
        Err(message) => {
            if let Some(file) = to_file {
                let _ = std::fs::remove_file(file);
            }
            return Err(CliError::failed(message));
        }
    };
    if let Some(file) = to_file {
        File::open(file)
            .and_then(|f| f.sync_all())
            .map_err(|e| CliError::failed(format!("syncing {}: {e}", file.display())))?;
    }
    closed?;
    report(&format!("dumped {entries} entries and {messages} queued messages"));
    Ok(())
}

/// Runs `stampkv load`.
pub fn load(args: LoadArgs) -> Result<(), CliError> {
    let from_stdin = args.file.as_os_str() == "-";
    let name = if from_stdin { "standard input".to_owned() } else { args.file.display().to_string() };
    let (input, size): (Box<dyn BufRead>, Option<u64>) = if from_stdin {
        (Box::new(BufReader::with_capacity(1 << 20, io::stdin().lock())), None)
    } else {
        let file =
            File::open(&args.file).map_err(|e| CliError::failed(format!("cannot open {name}: {e}")))?;
        let size = file.metadata().ok().map(|m| m.len());
        (Box::new(BufReader::with_capacity(1 << 20, file)), size)
    };
    let bad = |e: crate::transfer::dumpfile::FormatError| CliError::failed(format!("{name} {e}"));
    let mut reader = DumpReader::new(input).map_err(bad)?;
    let header = reader.header();
    let (entries, messages) = match args.location.open_to_write()? {
        target::Sink::Dir(kv) => load_and_close(kv, &args, &mut reader, &name, size, true)?,
        target::Sink::Etcd(kv) => load_and_close(kv, &args, &mut reader, &name, size, false)?,
    };
    report(&format!(
        "loaded {entries} entries and {messages} queued messages{}",
        if header.versionstamps && !args.write.new_versionstamps { ", versionstamps kept" } else { "" }
    ));
    Ok(())
}

/// Loads the dump into `kv` and closes it; `atomic`: whether the store makes the load
/// visible all at once.
fn load_and_close<S: Store>(
    kv: Kv<S>,
    args: &LoadArgs,
    reader: &mut DumpReader<Box<dyn BufRead>>,
    name: &str,
    size: Option<u64>,
    atomic: bool,
) -> Result<(u64, u64), CliError> {
    let result = load_into(&kv, args, reader, name, size, atomic);
    let closed = target::close(kv, &args.location.name());
    let counts = result?;
    closed?;
    Ok(counts)
}

fn load_into<S: Store>(
    kv: &Kv<S>,
    args: &LoadArgs,
    reader: &mut DumpReader<Box<dyn BufRead>>,
    name: &str,
    size: Option<u64>,
    atomic: bool,
) -> Result<(u64, u64), CliError> {
    let header = reader.header();
    let keep_versionstamps = header.versionstamps && !args.write.new_versionstamps;
    let database = args.location.name();
    let mut restore = target::start_restore(kv, &database, args.write.force)?;
    let progress = match size {
        Some(size) => Progress::bytes("loading", size),
        None => Progress::new("loading", None),
    };
    let mut shown = 0;
    let result = (|| -> Result<(), CliError> {
        loop {
            let record = reader.next_record().map_err(|e| CliError::failed(format!("{name} {e}")))?;
            let at = |e: stampkv::KvError| CliError::failed(format!("{name} line {}: {e}", reader.line()));
            match record {
                None => break,
                Some(Record::Entry(entry)) => {
                    let versionstamp = if keep_versionstamps { entry.versionstamp } else { None };
                    let expires_at_ms = if args.write.no_expiry { None } else { entry.expires_at_ms };
                    restore.entry(&entry.key, &entry.value, versionstamp, expires_at_ms).map_err(at)?;
                }
                Some(Record::Message(message)) => {
                    if !args.write.no_queue {
                        restore.message(&message).map_err(at)?;
                    }
                }
            }
            let read = if size.is_some() { reader.bytes_read() } else { reader.line() };
            progress.advance(read - shown);
            shown = read;
        }
        Ok(())
    })();
    progress.finish();
    result?;
    let last = if keep_versionstamps { header.last_versionstamp } else { None };
    let summary = restore.finish(last).map_err(|e| target::finish_error(&database, e, atomic))?;
    Ok((summary.entries, summary.messages))
}
