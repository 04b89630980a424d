//! Progress of the long subcommands (`run`, `submit`, `check --rerun`, `corpus
//! record`, `measure …`, `megakernel run`): on a terminal an indicatif bar with its
//! ETA (and, in `run`, the views each profiler has explained); in a log (stderr not a
//! terminal) one line when a stage starts and one when it ends; nothing with `--quiet`.

use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a command reports its progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// A live bar on the terminal.
    Bar,
    /// One line per stage: stderr is a file or a pipe.
    Lines,
    /// Nothing (`--quiet`).
    Quiet,
}

impl Report {
    /// A bar on a terminal, lines elsewhere, nothing when asked for quiet.
    pub fn choose(quiet: bool) -> Report {
        if quiet {
            Report::Quiet
        } else if std::io::stderr().is_terminal() {
            Report::Bar
        } else {
            Report::Lines
        }
    }
}

/// One stage of a command: `len` steps of `what` (bundles, views, …).
pub struct Stage {
    bar: ProgressBar,
    report: Report,
    what: String,
    started: Instant,
    /// The step under way, shown after the bar.
    item: Mutex<String>,
    /// Views explained so far, per profiler.
    views: Mutex<BTreeMap<String, u64>>,
}

impl Stage {
    /// Starts the stage (in a log: its first line).
    pub fn start(report: Report, len: usize, what: &str) -> Stage {
        let bar = match report {
            Report::Bar => styled(len, what),
            Report::Lines | Report::Quiet => ProgressBar::hidden(),
        };
        if report == Report::Bar {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        if report == Report::Lines {
            eprintln!("causalbench: {what}: {len} to do");
        }
        // A hidden bar still counts: the last line says how far the stage got.
        bar.set_length(len as u64);
        Stage {
            bar,
            report,
            what: what.to_string(),
            started: Instant::now(),
            item: Mutex::default(),
            views: Mutex::default(),
        }
    }

    /// Names the step under way.
    pub fn set_item(&self, item: impl Into<String>) {
        *self.item.lock().unwrap_or_else(|p| p.into_inner()) = item.into();
        self.show();
    }

    /// One step done.
    pub fn inc(&self) {
        self.bar.inc(1);
    }

    /// Steps done so far.
    pub fn position(&self) -> usize {
        self.bar.position() as usize
    }

    /// `n` more steps to do than the stage started with (a recording's re-draws).
    pub fn add_items(&self, n: usize) {
        self.bar.inc_length(n as u64);
    }

    /// `profiler` explained one more view.
    pub fn viewed(&self, profiler: &str) {
        *self
            .views
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(profiler.to_string())
            .or_default() += 1;
        self.show();
    }

    /// Prints a line above the bar, or plainly in a log; nothing when quiet.
    pub fn say(&self, line: impl Into<String>) {
        match self.report {
            Report::Bar => self.bar.println(line.into()),
            Report::Lines => eprintln!("{}", line.into()),
            Report::Quiet => {}
        }
    }

    /// Ends the stage (in a log: its last line, with the views per profiler).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        if self.report == Report::Lines {
            eprintln!(
                "causalbench: {}: {}/{} in {:.1} s{}",
                self.what,
                self.bar.position(),
                self.bar.length().unwrap_or(0),
                self.started.elapsed().as_secs_f64(),
                self.views_text()
                    .map(|v| format!("; views explained: {v}"))
                    .unwrap_or_default()
            );
        }
    }

    fn views_text(&self) -> Option<String> {
        let views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        (!views.is_empty()).then(|| {
            views
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }

    fn show(&self) {
        if self.report != Report::Bar {
            return;
        }
        let item = self.item.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.bar.set_message(match self.views_text() {
            Some(views) => format!("{item} · views: {views}"),
            None => item,
        });
    }
}

/// A styled bar of `len` steps of `what`, with its ETA and a message after it.
fn styled(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {what} (ETA {{eta}}) {{msg}}"
        ))
        .expect("valid template"),
    );
    bar
}

/// A bar of `len` steps of `what`, with a message after it (hidden when stderr is
/// not a terminal: [`say`] then prints plainly, so a log keeps every line).
pub fn bar(len: usize, what: &str) -> ProgressBar {
    let bar = styled(len, what);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Prints a line above the bar, or plainly when the bar is hidden (stderr is
/// not a terminal: a log file keeps every line).
pub fn say(bar: &ProgressBar, line: impl Into<String>) {
    let line = line.into();
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_stage_counts_but_shows_nothing() {
        let stage = Stage::start(Report::Quiet, 3, "bundles");
        stage.set_item("sim-a.r0");
        stage.viewed("causal-graph");
        stage.viewed("causal-graph");
        stage.viewed("mine");
        stage.inc();
        assert_eq!(stage.bar.position(), 1);
        assert!(stage.bar.is_hidden());
        assert_eq!(
            stage.views_text().as_deref(),
            Some("causal-graph 2, mine 1")
        );
        stage.finish();
    }

    #[test]
    fn quiet_wins_and_a_log_gets_lines() {
        assert_eq!(Report::choose(true), Report::Quiet);
        // Under `cargo test` stderr is captured or a terminal: either way not quiet.
        assert_ne!(Report::choose(false), Report::Quiet);
    }
}
