//! Progress of the long subcommands (`corpus record`, `measure …`, `megakernel
//! run`, the megakernel track in `run`): an indicatif bar on a terminal, plain
//! lines in a log.

/// A bar of `len` steps of `what`, with a message after it.
pub fn bar(len: usize, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {what} {{msg}}"
        ))
        .expect("valid template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Prints a line above the bar, or plainly when the bar is hidden (stderr is
/// not a terminal: a log file keeps every line).
pub fn say(bar: &indicatif::ProgressBar, line: impl Into<String>) {
    let line = line.into();
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}
