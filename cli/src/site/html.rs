//! The pieces every page of the static leaderboard shares: escaping, the page shell
//! with its inline style sheet (pages open from disk, offline, with nothing fetched),
//! and how rates, intervals, verdicts and profilers are shown.

use evaluator::palette::{Palette, CORRECT, NOT_ASKED, WRONG};
use evaluator::Interval;
use std::fmt::Write as _;

/// Text made safe inside HTML elements and quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A name made safe as a file name: anything but letters, digits, `.`, `_`, `-` becomes `_`.
pub fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:78em;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.6em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ci{color:#666;font-size:.85em}.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.35em;vertical-align:-.1em;border:1px solid #555}
.ok{background:CORRECT_BG}.bad{background:WRONG_BG}.none{background:NONE_BG}
.paths{display:flex;flex-wrap:wrap;gap:1em}.paths>div{flex:1 1 18em;border:1px solid #ccc;padding:.5em}
.paths ol{padding-left:1.6em;margin:.3em 0}.onpath{font-weight:600}.offpath{color:#a35a00}
pre{background:#f6f6f6;padding:.7em;overflow-x:auto;font-size:.85em}
nav a{margin-right:1em}.note{color:#555;font-size:.9em}
";

/// A whole page: `depth` is how many directories below the site's root it lies, so
/// that the navigation links resolve from it.
pub fn page(title: &str, depth: usize, body: &str) -> String {
    let up = "../".repeat(depth);
    let style = STYLE
        .replace("CORRECT_BG", &light(CORRECT))
        .replace("WRONG_BG", &light(WRONG))
        .replace("NONE_BG", &NOT_ASKED.hex());
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} — causalbench</title><style>{style}</style></head>\n<body>\
         <nav><a href=\"{up}index.html\">leaderboard</a></nav>\n<h1>{title}</h1>\n{body}\n</body></html>\n",
        title = esc(title),
    )
}

/// A verdict colour lightened for a cell background (text stays readable on it).
fn light(c: evaluator::palette::Colour) -> String {
    let mix = |v: u8| (u16::from(v) + 3 * 255) / 4;
    format!("#{:02x}{:02x}{:02x}", mix(c.0), mix(c.1), mix(c.2))
}

/// A rate to two decimals, `n/a` when undefined.
pub fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"))
}

/// A rate with its 95 % interval beneath, as a table cell.
pub fn rate_cell(value: Option<f64>, ci: Option<&Interval>) -> String {
    let mut s = format!("<td class=\"num\">{}", rate(value));
    if let Some(i) = ci {
        let _ = write!(
            s,
            "<br><span class=\"ci\">[{:.2}, {:.2}]</span>",
            i.low, i.high
        );
    }
    s.push_str("</td>");
    s
}

/// A profiler's name after its colour swatch (its colour in the site's `palette`).
pub fn profiler(palette: &Palette, name: &str) -> String {
    format!(
        "<span class=\"swatch\" style=\"background:{}\"></span>{}",
        palette.colour(name).hex(),
        esc(name)
    )
}

/// A verdict cell: the mark says it as well as the colour does.
pub fn verdict_cell(correct: Option<bool>, text: &str) -> String {
    let (class, mark) = match correct {
        Some(true) => ("ok", "✓ "),
        Some(false) => ("bad", "✗ "),
        None => ("none", ""),
    };
    format!("<td class=\"{class}\">{mark}{}</td>", esc(text))
}
