//! Inline SVG plots of one view (collectors × mode): never pooled across views, each
//! profiler in its own colour (`evaluator::palette`), intervals as whiskers.

use super::html::esc;
use evaluator::palette::Colour;
use evaluator::Interval;
use std::fmt::Write as _;

/// One bar: a profiler's rate and its interval.
pub struct Bar<'a> {
    pub profiler: &'a str,
    /// Its colour in the site's palette.
    pub colour: Colour,
    pub value: Option<f64>,
    pub ci: Option<&'a Interval>,
}

/// Horizontal bars of rates in [0, 1], one per profiler, in the order given.
pub fn rate_bars(title: &str, bars: &[Bar]) -> String {
    let (label_w, bar_h, plot_w) = (170.0, 22.0, 420.0);
    let height = 34.0 + bar_h * bars.len() as f64 + 24.0;
    let width = label_w + plot_w + 60.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\
         <title>{}</title><text x=\"4\" y=\"16\" font-size=\"13\">{}</text>",
        esc(title),
        esc(title)
    );
    let x = |v: f64| label_w + v.clamp(0.0, 1.0) * plot_w;
    let bottom = 30.0 + bar_h * bars.len() as f64;
    for tick in 0..=10 {
        let v = f64::from(tick) / 10.0;
        let _ = write!(
            s,
            "<line x1=\"{0}\" y1=\"26\" x2=\"{0}\" y2=\"{bottom}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" fill=\"#555\">{v:.1}</text>",
            x(v),
            bottom + 14.0
        );
    }
    for (i, bar) in bars.iter().enumerate() {
        let y = 30.0 + bar_h * i as f64;
        let colour = bar.colour.hex();
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            label_w - 6.0,
            y + bar_h * 0.65,
            esc(bar.profiler)
        );
        match bar.value {
            Some(v) => {
                let _ = write!(
                    s,
                    "<rect x=\"{label_w}\" y=\"{}\" width=\"{:.1}\" height=\"{}\" fill=\"{colour}\"/>",
                    y + 3.0,
                    x(v) - label_w,
                    bar_h - 6.0
                );
                if let Some(ci) = bar.ci {
                    let (mid, low, high) = (y + bar_h / 2.0, x(ci.low), x(ci.high));
                    let (top, foot) = (mid - 4.0, mid + 4.0);
                    let _ = write!(
                        s,
                        "<line x1=\"{low:.1}\" y1=\"{mid}\" x2=\"{high:.1}\" y2=\"{mid}\" stroke=\"#222\" stroke-width=\"1.5\"/>\
                         <line x1=\"{low:.1}\" y1=\"{top}\" x2=\"{low:.1}\" y2=\"{foot}\" stroke=\"#222\"/>\
                         <line x1=\"{high:.1}\" y1=\"{top}\" x2=\"{high:.1}\" y2=\"{foot}\" stroke=\"#222\"/>"
                    );
                }
                let _ = write!(
                    s,
                    "<text x=\"{:.1}\" y=\"{}\">{v:.2}</text>",
                    x(bar.ci.map_or(v, |c| c.high.max(v))) + 5.0,
                    y + bar_h * 0.65
                );
            }
            None => {
                let _ = write!(
                    s,
                    "<text x=\"{}\" y=\"{}\" fill=\"#777\">n/a</text>",
                    label_w + 4.0,
                    y + bar_h * 0.65
                );
            }
        }
    }
    s.push_str("</svg>");
    s
}
