//! Carries the provider's `tracing` events to the host's log.
//!
//! A plugin links its own copy of `tracing`, whose global dispatcher the host cannot see, and must
//! never print to stdout. So the SDK installs, once per plugin, a subscriber that formats each
//! event and hands it to the [`LogSink`] the host passed when it created the provider.

use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use abi_stable::std_types::RStr;

use crate::guard::panic_message;
use quiver_plugin_abi::{LogLevel, LogSink};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

static SINK: OnceLock<LogSink> = OnceLock::new();

/// Routes this plugin's `tracing` events to `sink`. The first sink wins: one plugin, one host.
pub(crate) fn install(sink: LogSink) {
    if SINK.set(sink).is_ok() {
        let subscriber = tracing_subscriber::registry().with(HostLog { max_level: sink.max_level });
        // Fails only if the provider installed its own subscriber, which then stays in charge.
        let _ = tracing::subscriber::set_global_default(subscriber);
        // The default hook prints to the plugin's own stderr, with a backtrace when RUST_BACKTRACE
        // is set; the panic guard already turns the panic into an error, so one log line is enough.
        let log = sink.log;
        std::panic::set_hook(Box::new(move |info| {
            let location = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let message = format!("panicked{location}: {}", panic_message(info.payload()));
            log(LogLevel::ERROR, RStr::from("panic"), RStr::from(message.as_str()));
        }));
    }
}

fn level_of(level: &Level) -> LogLevel {
    match *level {
        Level::ERROR => LogLevel::ERROR,
        Level::WARN => LogLevel::WARN,
        Level::INFO => LogLevel::INFO,
        Level::DEBUG => LogLevel::DEBUG,
        Level::TRACE => LogLevel::TRACE,
    }
}

struct HostLog {
    max_level: LogLevel,
}

impl<S: Subscriber> Layer<S> for HostLog {
    fn enabled(&self, metadata: &tracing::Metadata<'_>, _: Context<'_, S>) -> bool {
        level_of(metadata.level()) <= self.max_level
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let Some(sink) = SINK.get() else { return };
        let mut line = Line::default();
        event.record(&mut line);
        let meta = event.metadata();
        (sink.log)(level_of(meta.level()), RStr::from(meta.target()), RStr::from(line.0.as_str()));
    }
}

/// `message key=value key=value`.
#[derive(Default)]
struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            if !self.0.is_empty() {
                self.0.push(' ');
            }
            self.0.push_str(value);
        } else {
            self.record_debug(field, &value);
        }
    }
}
