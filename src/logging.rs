//! ember's one `log` logger. `EMBER_LOG=error|warn|info|debug|trace` prints the log records of
//! ember's dependencies (Burn, CubeCL, wgpu) on stderr: which adapter and device were opened,
//! which kernels were compiled. Off by default. The same logger counts CubeCL's kernel launches
//! where `ember bench --launches` asks for them (`device::launches`); those lines are never
//! printed.

use std::sync::OnceLock;

struct EmberLog;

/// The level `EMBER_LOG` asks to print, if any.
fn printed() -> Option<log::LevelFilter> {
    static LEVEL: OnceLock<Option<log::LevelFilter>> = OnceLock::new();
    *LEVEL.get_or_init(|| std::env::var("EMBER_LOG").ok()?.parse().ok())
}

impl log::Log for EmberLog {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        meta.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if crate::device::launches::observe(record) {
            return;
        }
        if printed().is_some_and(|level| record.level() <= level) {
            eprintln!("[{} {}] {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger when `EMBER_LOG` names a level.
pub fn init_from_env() {
    if printed().is_some() {
        install();
    }
}

/// Installs the logger (once), letting through what `EMBER_LOG` prints and, when launches are
/// counted, CubeCL's trace lines.
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = log::set_boxed_logger(Box::new(EmberLog));
    });
    let counting = crate::device::launches::enabled().then_some(log::LevelFilter::Trace);
    log::set_max_level(printed().max(counting).unwrap_or(log::LevelFilter::Off));
}
