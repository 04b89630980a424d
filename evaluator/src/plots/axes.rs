//! Accuracy against one axis of the scenario space (evaluator/METRICS.md, "Plots"):
//! pair accuracy per bucket, one line per profiler, combined collectors,
//! instrumented, with each point's 95 % interval as a whisker.

use super::{colour, draw_categories, draw_legend, draw_unit_mesh, font};
use crate::axes::AxisRow;
use crate::buckets::HEADLINE_AXIS;
use crate::leaderboard::Leaderboard;
use crate::EvalError;
use ground_truth::{Collectors, Mode};
use plotters::prelude::*;
use std::path::Path;

/// (plot file, axis, what the axis is) for each per-axis plot.
pub const AXIS_PLOTS: &[(&str, &str, &str)] = &[
    (
        "accuracy_by_gating_depth.png",
        "gating_depth",
        "gating hops between root cause and symptom",
    ),
    (
        "accuracy_by_magnitude_ratio.png",
        "magnitude_ratio",
        "injected magnitude / symptom's normal latency",
    ),
    (
        "accuracy_by_peers.png",
        "peers",
        "same-named peers of the symptom",
    ),
    (
        "accuracy_by_graph_nodes.png",
        "graph_nodes",
        "nodes of the scenario's CUDA graph",
    ),
];

/// A plotted point: x, pair accuracy, and its interval when defined.
type Point = (f64, f64, Option<(f64, f64)>);

/// Draws the pair-accuracy curve of `axis` into `path`.
pub(super) fn axis_curve(
    path: &Path,
    lb: &Leaderboard,
    axis: &str,
    desc: &str,
    profilers: &[String],
) -> Result<(), EvalError> {
    let rows: Vec<&AxisRow> = lb
        .axes
        .iter()
        .filter(|r| {
            r.axis == axis && r.collectors == Collectors::Combined && r.mode == Mode::Instrumented
        })
        .collect();
    // Rows come in bucket order (`evaluator/src/axes.rs`).
    let mut buckets: Vec<&str> = Vec::new();
    for r in &rows {
        if !buckets.contains(&r.bucket.as_str()) {
            buckets.push(&r.bucket);
        }
    }
    let legend_h = 24 * ((profilers.len() as u32).div_ceil(4)).max(1);
    let full = BitMapBackend::new(path, (1000, 560 + legend_h)).into_drawing_area();
    tri!(full.fill(&WHITE), path);
    let title = format!("Pair accuracy by {axis} (combined collectors, instrumented)");
    let root = tri!(full.titled(&title, font(20)), path);
    let (legend_area, rest) = root.split_vertically(legend_h);
    draw_legend(&legend_area, profilers, path)?;
    let (rest, foot) = rest.split_vertically(rest.dim_in_pixel().1 - 24);
    let note = if axis == HEADLINE_AXIS {
        "Whiskers: 95 % cluster-bootstrap interval. Dashed: the 0.3 threshold of the headline."
    } else {
        "Whiskers: 95 % cluster-bootstrap interval over family instances."
    };
    tri!(
        foot.draw_text(note, &font(13).color(&RGBColor(90, 90, 90)), (20, 2)),
        path
    );
    let k = buckets.len().max(1);
    let mut chart = tri!(
        ChartBuilder::on(&rest)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(k as f64 - 0.5), 0f64..1.05f64),
        path
    );
    draw_unit_mesh(&mut chart, desc, Some("pair accuracy"), path)?;
    let labels: Vec<String> = buckets.iter().map(|b| b.to_string()).collect();
    draw_categories(
        &full,
        &chart,
        &labels,
        "no generated cases with this axis in this result set",
        path,
    )?;
    if axis == HEADLINE_AXIS {
        if let Some(i) = buckets.iter().position(|b| *b == "<0.3") {
            let x = i as f64 + 0.5;
            let dashes = (0..21).map(|j| {
                let y = j as f64 * 0.05;
                PathElement::new(
                    vec![(x, y), (x, y + 0.025)],
                    RGBColor(90, 90, 90).stroke_width(2),
                )
            });
            tri!(chart.draw_series(dashes), path);
        }
    }
    let n = profilers.len().max(1) as f64;
    for (pi, p) in profilers.iter().enumerate() {
        // Each profiler's points are nudged sideways so whiskers do not overlap.
        let nudge = (pi as f64 - (n - 1.0) / 2.0) * 0.04;
        let pts: Vec<Option<Point>> = buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let r = rows.iter().find(|r| &r.profiler == p && r.bucket == *b)?;
                let v = r.pair_accuracy?;
                let ci = r.pair_accuracy_ci.map(|c| (c.low, c.high));
                Some((i as f64 + nudge, v.clamp(0.0, 1.0), ci))
            })
            .collect();
        for seg in pts.split(Option::is_none) {
            let line: Vec<(f64, f64)> = seg.iter().flatten().map(|&(x, y, _)| (x, y)).collect();
            if line.len() > 1 {
                tri!(
                    chart.draw_series(LineSeries::new(line, colour(p).stroke_width(3))),
                    path
                );
            }
        }
        let whiskers = pts.iter().flatten().filter_map(|&(x, _, ci)| {
            ci.map(|(lo, hi)| {
                PathElement::new(
                    vec![(x, lo.clamp(0.0, 1.0)), (x, hi.clamp(0.0, 1.0))],
                    colour(p).stroke_width(2),
                )
            })
        });
        tri!(chart.draw_series(whiskers), path);
        let dots = pts
            .iter()
            .flatten()
            .map(|&(x, y, _)| Circle::new((x, y), 5, colour(p).filled()));
        tri!(chart.draw_series(dots), path);
    }
    tri!(full.present(), path);
    Ok(())
}
