//! Log lines through `tracing`: one line per event on standard error, as
//! `ts_ms=<unix ms> level=<level> msg="<message>" key=value ...` (a value with spaces,
//! quotes or `=` is quoted), so the server's and the edge's logs are read by eye or split
//! by a script alike.

use std::fmt::{self, Debug};
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Installs the line format for this process at the level named by `STAMPKV_LOG`
/// (`error`, `warn`, `info` (the default), `debug` or `trace`). A second call does nothing.
pub fn init() {
    let level = match std::env::var("STAMPKV_LOG").unwrap_or_default().to_ascii_lowercase().as_str() {
        "error" => Level::ERROR,
        "warn" => Level::WARN,
        "debug" => Level::DEBUG,
        "trace" => Level::TRACE,
        _ => Level::INFO,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .event_format(LineFormat)
        .try_init();
}

/// The `ts_ms=... level=... msg=... key=value` line format.
#[derive(Debug, Clone, Copy, Default)]
pub struct LineFormat;

impl<S, N> FormatEvent<S, N> for LineFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let ts = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        let level = event.metadata().level().as_str().to_ascii_lowercase();
        let mut fields = Fields::default();
        event.record(&mut fields);
        write!(writer, "ts_ms={ts} level={level} msg={:?}", fields.message)?;
        for (name, value) in &fields.others {
            write!(writer, " {name}={value}")?;
        }
        writeln!(writer)
    }
}

/// An event's message and its other fields, formatted.
#[derive(Default)]
struct Fields {
    message: String,
    others: Vec<(&'static str, String)>,
}

/// A value as written in a line: bare, or quoted when it would not read as one token.
fn token(text: String) -> String {
    if text.is_empty() || text.contains(|c: char| c.is_whitespace() || c == '"' || c == '=') {
        format!("{text:?}")
    } else {
        text
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.others.push((field.name(), format!("{value:?}")));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.others.push((field.name(), token(format!("{value:?}"))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_spaces_are_quoted() {
        assert_eq!(token("127.0.0.1:80".into()), "127.0.0.1:80");
        assert_eq!(token("too many files".into()), "\"too many files\"");
        assert_eq!(token(String::new()), "\"\"");
    }
}
