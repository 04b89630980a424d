//! `plots/accuracy_vs_cost.png`: pair accuracy against the launch-bound
//! overhead of the collector configuration each view models, one marker per
//! profiler × configuration, the Pareto frontier joined (the leaderboard's
//! "Accuracy against cost" section).

use super::{font, register_font, text_width};
use crate::costs::{on_frontier, CostPoint};
use crate::EvalError;
use plotters::prelude::*;
use std::path::Path;

pub fn accuracy_vs_cost(path: &Path, points: &[CostPoint]) -> Result<(), EvalError> {
    register_font();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| EvalError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let drawn: Vec<(&CostPoint, f64)> = points
        .iter()
        .filter_map(|p| p.launch_bound.map(|o| (p, o.median)))
        .collect();
    let x_max = drawn.iter().map(|d| d.1).fold(1.0f64, f64::max) * 1.05 + 0.01;
    let root = BitMapBackend::new(path, (1000, 640)).into_drawing_area();
    tri!(root.fill(&WHITE), path);
    let (plot_area, legend) = root.split_horizontally(720);
    let mut chart = tri!(
        ChartBuilder::on(&plot_area)
            .caption(
                "Pair accuracy against collector overhead (launch-bound workload)",
                font(18)
            )
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0.95f64..x_max, 0f64..1.02f64),
        path
    );
    tri!(
        chart
            .configure_mesh()
            .x_desc("wall time with the collectors / without (median of interleaved pairs)")
            .y_desc("pair accuracy (instrumented)")
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw(),
        path
    );
    let mut frontier: Vec<(f64, f64)> = drawn
        .iter()
        .filter(|(p, _)| on_frontier(p, points))
        .map(|(p, x)| (*x, p.pair_accuracy))
        .collect();
    frontier.sort_by(|a, b| a.0.total_cmp(&b.0));
    tri!(
        chart.draw_series(LineSeries::new(frontier, BLACK.mix(0.5).stroke_width(2))),
        path
    );
    for (p, x) in &drawn {
        let c = super::colour(&p.profiler);
        let at = (*x, p.pair_accuracy);
        let shape: DynElement<_, _> = match p.configuration.as_str() {
            "cupti" => Circle::new(at, 6, c.filled()).into_dyn(),
            "ebpf" => TriangleMarker::new(at, 8, c.filled()).into_dyn(),
            _ => Cross::new(at, 7, c.stroke_width(3)).into_dyn(),
        };
        tri!(chart.draw_series(std::iter::once(shape)), path);
    }
    // Legend: one swatch per profiler, then the configuration markers.
    let mut profilers: Vec<&str> = drawn.iter().map(|(p, _)| p.profiler.as_str()).collect();
    profilers.sort_unstable();
    profilers.dedup();
    let mut y = 40;
    for name in &profilers {
        tri!(
            legend.draw(&Rectangle::new(
                [(10, y), (24, y + 14)],
                super::colour(name).filled()
            )),
            path
        );
        // Cut by characters: a byte cut could split one.
        let label: String = if text_width(name, 14) > 240 {
            name.chars().take(30).collect()
        } else {
            name.to_string()
        };
        tri!(legend.draw_text(&label, &font(14), (30, y)), path);
        y += 22;
    }
    y += 14;
    for (shape, what) in [
        ("●", "CUPTI only (cupti view)"),
        ("▲", "eBPF host only (host view)"),
        ("✕", "both (combined view)"),
    ] {
        tri!(
            legend.draw_text(&format!("{shape} {what}"), &font(14), (10, y)),
            path
        );
        y += 22;
    }
    tri!(
        legend.draw_text("— Pareto frontier", &font(14), (10, y)),
        path
    );
    tri!(root.present(), path);
    Ok(())
}
